package store

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"time"

	"github.com/kece-oj/kece/contracts"
)

// PoolSummary is the public view of one pool.
type PoolSummary struct {
	Pool              string
	ReadyNodes        int
	QueuedSubmissions int
	OldestWait        time.Duration
	// WaitReason is contracts.WaitNoReadyNode or WaitNoCapableNode when
	// queued submissions wait for that; empty otherwise.
	WaitReason string
	// Unrunnable counts the queued submissions no ready node can run, and
	// Missing names what they need that no ready node reported.
	Unrunnable int
	Missing    []string
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
		Pool string `db:"pool"`
		Caps uint64 `db:"caps"`
	}
	if err := s.db.SelectContext(ctx, &ready,
		`SELECT n.pool, `+nodeCapsSQL+` AS caps FROM judge_node n
		 WHERE n.desired_state = 'ENABLED' AND n.revoked_at IS NULL AND n.last_heartbeat_at > NOW(6) - INTERVAL ? MICROSECOND`,
		micros(s.cfg.OfflineAfter)); err != nil {
		return sum, fmt.Errorf("store: summary: %w", err)
	}
	nodeCaps := map[string][]uint64{}
	for _, r := range ready {
		if ps := byPool[r.Pool]; ps != nil {
			ps.ReadyNodes++
			nodeCaps[r.Pool] = append(nodeCaps[r.Pool], r.Caps)
		}
	}
	// One statement per pool: each is an index range on (pool, state, …),
	// which a single GROUP BY over every queued job would not be.
	for _, p := range contracts.Pools() {
		// Grouped by required capabilities: still the same index range
		// (required_caps is in ix_job_claim), a few groups at most.
		var groups []queuedCaps
		if err := s.db.SelectContext(ctx, &groups,
			`SELECT required_caps AS caps, COUNT(*) AS queued,
			        TIMESTAMPDIFF(MICROSECOND, MIN(created_at), NOW(6)) AS oldest_us FROM judge_job
			 WHERE pool = ? AND state = 'QUEUED' AND required_node_id = 0 GROUP BY required_caps`, p); err != nil {
			return sum, fmt.Errorf("store: summary: %w", err)
		}
		waitReasons(byPool[p], groups, nodeCaps[p])
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

// queuedCaps is the queued submissions of a pool that require the same
// capabilities.
type queuedCaps struct {
	Caps     uint64 `db:"caps"`
	Queued   int    `db:"queued"`
	OldestUS *int64 `db:"oldest_us"`
}

// waitReasons fills a pool's queue figures and why they wait from its
// queued groups and its ready nodes' capabilities.
func waitReasons(ps *PoolSummary, groups []queuedCaps, nodes []uint64) {
	var missing uint64
	for _, g := range groups {
		ps.QueuedSubmissions += g.Queued
		if g.OldestUS != nil {
			ps.OldestWait = max(ps.OldestWait, time.Duration(*g.OldestUS)*time.Microsecond)
		}
		if len(nodes) == 0 || slices.ContainsFunc(nodes, func(n uint64) bool { return g.Caps&^n == 0 }) {
			continue
		}
		ps.Unrunnable += g.Queued
		// What the closest node lacks: with no node lacking a single bit,
		// that is the combination nobody offers.
		best := g.Caps
		for _, n := range nodes {
			if lack := g.Caps &^ n; bits.OnesCount64(lack) < bits.OnesCount64(best) {
				best = lack
			}
		}
		missing |= best
	}
	ps.Missing = contracts.CapNames(missing)
	switch {
	case ps.QueuedSubmissions > 0 && len(nodes) == 0:
		ps.WaitReason = contracts.WaitNoReadyNode
	case ps.Unrunnable > 0:
		ps.WaitReason = contracts.WaitNoCapableNode
	}
}
