package store

import (
	"context"
	"fmt"
	"time"

	"github.com/kece-oj/kece/contracts"
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
	var head struct {
		AsOf    time.Time `db:"as_of"`
		FreshUS *int64    `db:"fresh_us"`
	}
	if err := s.db.GetContext(ctx, &head,
		`SELECT NOW(6) AS as_of, TIMESTAMPDIFF(MICROSECOND, MAX(last_heartbeat_at), NOW(6)) AS fresh_us FROM judge_node`); err != nil {
		return sum, fmt.Errorf("store: summary: %w", err)
	}
	sum.AsOf = head.AsOf
	if head.FreshUS != nil {
		d := time.Duration(*head.FreshUS) * time.Microsecond
		sum.Freshness = &d
	}
	byPool := map[string]*PoolSummary{}
	for _, p := range contracts.Pools() {
		byPool[p] = &PoolSummary{Pool: p}
	}
	var ready []struct {
		Pool  string `db:"pool"`
		Nodes int    `db:"nodes"`
	}
	if err := s.db.SelectContext(ctx, &ready,
		`SELECT pool, COUNT(*) AS nodes FROM judge_node
		 WHERE desired_state = 'ENABLED' AND revoked_at IS NULL AND last_heartbeat_at > NOW(6) - INTERVAL ? MICROSECOND
		 GROUP BY pool`, micros(s.cfg.OfflineAfter)); err != nil {
		return sum, fmt.Errorf("store: summary: %w", err)
	}
	for _, r := range ready {
		if ps := byPool[r.Pool]; ps != nil {
			ps.ReadyNodes = r.Nodes
		}
	}
	// One statement per pool: each is an index range on (pool, state, …),
	// which a single GROUP BY over every queued job would not be.
	for _, p := range contracts.Pools() {
		var q struct {
			Queued   int    `db:"queued"`
			OldestUS *int64 `db:"oldest_us"`
		}
		if err := s.db.GetContext(ctx, &q,
			`SELECT COUNT(*) AS queued, TIMESTAMPDIFF(MICROSECOND, MIN(created_at), NOW(6)) AS oldest_us FROM judge_job
			 WHERE pool = ? AND state = 'QUEUED' AND required_node_id = 0`, p); err != nil {
			return sum, fmt.Errorf("store: summary: %w", err)
		}
		byPool[p].QueuedSubmissions = q.Queued
		if q.OldestUS != nil {
			byPool[p].OldestWait = time.Duration(*q.OldestUS) * time.Microsecond
		}
	}
	for _, p := range contracts.Pools() {
		ps := *byPool[p]
		if ps.ReadyNodes > 0 {
			sum.ReadyPools++
		}
		sum.Pools = append(sum.Pools, ps)
	}
	sum.TotalPools = len(sum.Pools)
	return sum, nil
}
