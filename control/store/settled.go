package store

import (
	"context"
	"fmt"
)

// settledChunk bounds one IN list of SettledJobs.
const settledChunk = 500

// SettledJobs returns which of ids are in a terminal state (COMPLETED,
// FAILED, CANCELLED). It serves waiting status reads on other replicas: one
// primary-key lookup per id, no lock.
func (s *Store) SettledJobs(ctx context.Context, ids []int64) ([]int64, error) {
	var out []int64
	for start := 0; start < len(ids); start += settledChunk {
		in, args := inList(ids[start:min(start+settledChunk, len(ids))])
		got, err := queryAll(ctx, s.db, func(sc rowScanner) (int64, error) {
			var id int64
			err := sc.Scan(&id)
			return id, err
		}, `SELECT id FROM judge_job WHERE id IN (`+in+`) AND state IN ('COMPLETED', 'FAILED', 'CANCELLED')`, args...)
		if err != nil {
			return nil, fmt.Errorf("store: settled jobs: %w", err)
		}
		out = append(out, got...)
	}
	return out, nil
}
