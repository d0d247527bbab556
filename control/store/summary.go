package store

import (
	"context"
	"database/sql"
	"fmt"
	"math/bits"
	"slices"
	"time"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/internal/jobdb"
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
	if err := s.db.Pool.GetContext(ctx, &head,
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
	if err := s.db.Pool.SelectContext(ctx, &ready,
		`SELECT n.pool, `+jobdb.NodeCapsSQL+` AS caps FROM judge_node n
		 WHERE n.desired_state = 'ENABLED' AND n.revoked_at IS NULL AND n.last_heartbeat_at > NOW(6) - INTERVAL ? MICROSECOND`,
		jobdb.Micros(s.db.Cfg.OfflineAfter)); err != nil {
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
		if err := s.db.Pool.SelectContext(ctx, &groups,
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

// QueueStat is one pool's queue as the metrics see it.
type QueueStat struct {
	Pool string
	// Queued counts QUEUED business jobs (ready or in retry backoff).
	Queued int
	// OldestReadyWait is how long the longest-waiting ready job has been
	// ready (now − available_at); zero when none is ready. Retry backoff is
	// not waiting for a worker, so it does not count.
	OldestReadyWait time.Duration
	// Running counts RUNNING jobs (expired but unreaped leases included).
	Running int
}

// NodeStat is a count of nodes of one pool in one configured state, split
// by whether they heartbeat recently.
type NodeStat struct {
	Pool   string
	State  NodeState
	Online bool
	Nodes  int
	// Slots is the sum of the nodes' admin slots.
	Slots int
}

// FleetStats is what one metrics scrape reads from the database.
type FleetStats struct {
	Queues []QueueStat
	Nodes  []NodeStat
	// EventsPending and EventsDead count settlement events not yet
	// delivered and dead-lettered.
	EventsPending, EventsDead int
}

// FleetStats reads the gauges of the metrics endpoint. Every query walks an
// index range, never the job table: per pool the QUEUED rows of ix_job_claim
// (count and the earliest available_at of business jobs), the RUNNING rows
// of ix_job_lease, the node table (one row per node process), and the
// PENDING/DEAD rows of ix_event_ready. Callers cache the answer for a few
// seconds (control/metrics does), so a scrape storm costs one read.
func (s *Store) FleetStats(ctx context.Context) (FleetStats, error) {
	var fs FleetStats
	for _, p := range contracts.Pools() {
		q := QueueStat{Pool: p}
		var wait sql.NullInt64
		if err := s.db.Pool.QueryRowContext(ctx,
			fleetQueueQuery, p).Scan(&q.Queued, &wait); err != nil {
			s.db.Observer().DBError(ctx, "fleet_stats")
			return fs, fmt.Errorf("store: fleet stats: queue: %w", err)
		}
		if wait.Valid && wait.Int64 > 0 {
			q.OldestReadyWait = time.Duration(wait.Int64) * time.Microsecond
		}
		fs.Queues = append(fs.Queues, q)
	}
	running, err := jobdb.QueryAll(ctx, s.db.Pool, func(r jobdb.RowScanner) (QueueStat, error) {
		var q QueueStat
		err := r.Scan(&q.Pool, &q.Running)
		return q, err
	}, fleetRunningQuery)
	if err != nil {
		s.db.Observer().DBError(ctx, "fleet_stats")
		return fs, fmt.Errorf("store: fleet stats: running: %w", err)
	}
	for _, r := range running {
		for i := range fs.Queues {
			if fs.Queues[i].Pool == r.Pool {
				fs.Queues[i].Running = r.Running
			}
		}
	}
	fs.Nodes, err = jobdb.QueryAll(ctx, s.db.Pool, func(r jobdb.RowScanner) (NodeStat, error) {
		var n NodeStat
		err := r.Scan(&n.Pool, &n.State, &n.Online, &n.Nodes, &n.Slots)
		return n, err
	}, fleetNodesQuery, jobdb.Micros(s.db.Cfg.OfflineAfter))
	if err != nil {
		s.db.Observer().DBError(ctx, "fleet_stats")
		return fs, fmt.Errorf("store: fleet stats: nodes: %w", err)
	}
	if err := s.db.Pool.QueryRowContext(ctx,
		fleetEventsQuery).Scan(&fs.EventsPending, &fs.EventsDead); err != nil {
		s.db.Observer().DBError(ctx, "fleet_stats")
		return fs, fmt.Errorf("store: fleet stats: events: %w", err)
	}
	return fs, nil
}

// The fleet gauges' statements, and the host groups' view's count of
// running jobs. Each names the index whose range it walks, so a small table
// in a test and a large one in production get the same plan
// (TestFleetStatsWalkIndexRanges checks it with EXPLAIN).
const (
	fleetQueueQuery = `SELECT COUNT(*), TIMESTAMPDIFF(MICROSECOND, MIN(IF(available_at <= NOW(6), available_at, NULL)), NOW(6))
	 FROM judge_job FORCE INDEX (ix_job_claim) WHERE pool = ? AND state = 'QUEUED' AND required_node_id = 0`
	fleetRunningQuery  = `SELECT pool, COUNT(*) FROM judge_job FORCE INDEX (ix_job_lease) WHERE state = 'RUNNING' GROUP BY pool`
	groupsRunningQuery = `SELECT host_group_id, SUM(slot_weight) AS busy FROM judge_job FORCE INDEX (ix_job_lease) WHERE state = 'RUNNING' GROUP BY host_group_id`
	fleetNodesQuery    = `SELECT pool, desired_state, COALESCE(last_heartbeat_at > NOW(6) - INTERVAL ? MICROSECOND, FALSE) AS online,
	   COUNT(*), COALESCE(SUM(slots), 0)
	 FROM judge_node WHERE revoked_at IS NULL GROUP BY pool, desired_state, online`
	fleetEventsQuery = `SELECT COALESCE(SUM(state = 'PENDING'), 0), COALESCE(SUM(state = 'DEAD'), 0)
	 FROM judge_settlement_event FORCE INDEX (ix_event_ready) WHERE state IN ('PENDING', 'DEAD')`
)

// FleetQueryForExplain is one fleet-gauge statement over the job or event
// table, its arguments and the index it must use, for EXPLAIN in tests.
type FleetQueryForExplain struct {
	Name, Query, Index string
	Args               []any
}

// FleetQueriesForExplain lists the statements FleetStats and the host
// groups' view run over the large tables (the node and host group tables
// have one row per node process and per group).
func FleetQueriesForExplain() []FleetQueryForExplain {
	return []FleetQueryForExplain{
		{Name: "queue", Query: fleetQueueQuery, Index: "ix_job_claim", Args: []any{string(machineapi.PoolCpp)}},
		{Name: "running", Query: fleetRunningQuery, Index: "ix_job_lease"},
		{Name: "running per host group", Query: groupsRunningQuery, Index: "ix_job_lease"},
		{Name: "events", Query: fleetEventsQuery, Index: "ix_event_ready"},
	}
}
