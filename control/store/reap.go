package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ReapStats counts what one Reap pass did.
type ReapStats struct {
	Requeued int
	Failed   int
}

// reap returns expired leases to QUEUED with backoff, or to FAILED when the
// attempts are used up. Candidates are read without locks, then each job is
// re-checked under its lock in its own short transaction, skipping rows
// another replica holds; running it in every replica at once is safe.
func (s *Store) reap(ctx context.Context) (ReapStats, error) {
	var st ReapStats
	ids, err := queryAll(ctx, s.db, scanID,
		`SELECT id FROM judge_job WHERE state = 'RUNNING' AND lease_until < NOW(6)
		 ORDER BY lease_until, id LIMIT ?`, s.cfg.ReapBatch)
	if err != nil {
		return st, fmt.Errorf("store: reap: candidates: %w", err)
	}
	pools := map[string]bool{}
	for _, id := range ids {
		var outcome JobState
		var pool string
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			outcome = ""
			var j struct {
				kind        JobKind
				pool        string
				typ, sid    string
				generation  int
				leaseEpoch  int64
				attempts    int
				maxAttempts int
			}
			// SKIP LOCKED: a result commit or another reaper holds it; leave it.
			err := tx.QueryRowContext(ctx,
				`SELECT kind, pool, submission_type, submission_id, generation, lease_epoch, attempt_count, max_attempts
				 FROM judge_job WHERE id = ? AND state = 'RUNNING' AND lease_until < NOW(6)
				 FOR UPDATE SKIP LOCKED`, id).Scan(
				&j.kind, &j.pool, &j.typ, &j.sid, &j.generation, &j.leaseEpoch, &j.attempts, &j.maxAttempts)
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("store: reap: job %d: %w", id, err)
			}
			pool = j.pool
			if err := closeAttempt(ctx, tx, id, j.leaseEpoch, "EXPIRED", "LEASE_EXPIRED", ""); err != nil {
				return err
			}
			if j.attempts < j.maxAttempts {
				outcome = StateQueued
				if err := s.requeueLocked(ctx, tx, id, j.attempts, "LEASE_EXPIRED"); err != nil {
					return err
				}
				return bumpPool(ctx, tx, j.pool)
			}
			outcome = StateFailed
			if err := failLocked(ctx, tx, id, "LEASE_EXPIRED"); err != nil {
				return err
			}
			return settle(ctx, tx, settlement{jobID: id, kind: j.kind, typ: j.typ, sid: j.sid,
				generation: j.generation, status: "SYSTEM_ERROR", errorCode: "LEASE_EXPIRED"})
		})
		if err != nil {
			return st, err
		}
		switch outcome {
		case StateQueued:
			st.Requeued++
			pools[pool] = true
		case StateFailed:
			st.Failed++
		}
	}
	for p := range pools {
		s.notify(p)
	}
	return st, nil
}
