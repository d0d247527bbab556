package store

import (
	"context"
	"fmt"
	"time"

	"github.com/kece-oj/kece/control/manifest"
)

// PoolSummary is the public view of one pool.
type PoolSummary struct {
	Pool              string
	ReadyNodes        int
	QueuedSubmissions int
	OldestWait        time.Duration
}

// Summary is the public snapshot: pool counts and node counts are never
// mixed in one ratio.
type Summary struct {
	AsOf       time.Time
	Freshness  *time.Duration // age of the newest heartbeat; nil when none
	ReadyPools int
	TotalPools int
	Pools      []PoolSummary
}

// Summary reads the public snapshot with the database clock. A node is ready
// when ENABLED, not revoked and online.
func (s *Store) Summary(ctx context.Context) (Summary, error) {
	var sum Summary
	var fresh *int64
	if err := s.db.QueryRowContext(ctx,
		`SELECT NOW(6), TIMESTAMPDIFF(MICROSECOND, MAX(last_heartbeat_at), NOW(6)) FROM judge_node`).Scan(&sum.AsOf, &fresh); err != nil {
		return sum, fmt.Errorf("store: summary: %w", err)
	}
	if fresh != nil {
		d := time.Duration(*fresh) * time.Microsecond
		sum.Freshness = &d
	}
	byPool := map[string]*PoolSummary{}
	for _, p := range manifest.Pools() {
		byPool[p] = &PoolSummary{Pool: p}
	}
	rows, err := s.db.QueryContext(ctx,
		`SELECT pool, COUNT(*) FROM judge_node
		 WHERE desired_state = 'ENABLED' AND revoked_at IS NULL AND last_heartbeat_at > NOW(6) - INTERVAL ? MICROSECOND
		 GROUP BY pool`, micros(s.cfg.OfflineAfter))
	if err != nil {
		return sum, fmt.Errorf("store: summary: %w", err)
	}
	for rows.Next() {
		var p string
		var n int
		if err := rows.Scan(&p, &n); err != nil {
			rows.Close()
			return sum, fmt.Errorf("store: summary: %w", err)
		}
		if ps := byPool[p]; ps != nil {
			ps.ReadyNodes = n
		}
	}
	rows.Close()
	for _, p := range manifest.Pools() {
		var n int
		var oldest *int64
		if err := s.db.QueryRowContext(ctx,
			`SELECT COUNT(*), TIMESTAMPDIFF(MICROSECOND, MIN(created_at), NOW(6)) FROM judge_job
			 WHERE pool = ? AND state = 'QUEUED' AND required_node_id = 0`, p).Scan(&n, &oldest); err != nil {
			return sum, fmt.Errorf("store: summary: %w", err)
		}
		byPool[p].QueuedSubmissions = n
		if oldest != nil {
			byPool[p].OldestWait = time.Duration(*oldest) * time.Microsecond
		}
	}
	for _, p := range manifest.Pools() {
		ps := *byPool[p]
		if ps.ReadyNodes > 0 {
			sum.ReadyPools++
		}
		sum.Pools = append(sum.Pools, ps)
	}
	sum.TotalPools = len(sum.Pools)
	return sum, nil
}
