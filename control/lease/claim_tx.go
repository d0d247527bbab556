package lease

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

// claimAnswer is one call's answer from claimTx.
type claimAnswer struct {
	jobs []ClaimedJob
	err  error
}

// claimTx is step 2 of claimBatch, a transaction on c for calls of one
// pool (a node may make several); it answers each call (a refused session
// is that call's error, not the batch's). Four round trips whatever the
// batch size: (begin, lock groups and nodes, complete the calls' results
// with their row counts, read earlier grants of the calls' request ids,
// count in-flight per group and node), the pick's candidates, their locks
// (pickReady), (lease, attempts, the results' events, commit). Replays,
// CHECK jobs and candidates another claimer took, all rare, add their own.
func (s *Engine) claimTx(ctx context.Context, c *jobdb.ScriptConn, calls []claimCall) ([]claimAnswer, error) {
	out := make([]claimAnswer, len(calls))
	sc := s.db.Begin(&jobdb.Script{})
	lock := lockGroupsAndNodes(sc, calls)
	// The cycles' results commit after the locks (the lock order, doc.go) and
	// before the count, which then no longer counts their jobs as busy.
	results := s.resultWrite(nil, cycleResults(calls))
	written := results.inClaim(sc)
	grants := s.readGrants(sc, calls)
	busy := countBusy(sc, lock.groups)
	if err := c.Send(ctx, sc, slices.Concat(lock.reads, written, grants.reads, busy.reads)...); err != nil {
		return nil, fmt.Errorf("store: claim: lock: %w", err)
	}
	if !results.held() {
		return nil, errFenced
	}
	live := make([]int, 0, len(calls)) // indexes of calls that may take work
	for i, call := range calls {
		n, ok := lock.nodes[call.sess.NodeID]
		if out[i].err = jobdb.SessionError(call.sess, ok, n.revoked, n.sessionEpoch); out[i].err == nil {
			live = append(live, i)
		}
	}
	live, err := s.replayClaims(ctx, c.Conn, calls, live, grants.byCall, out)
	if err != nil {
		return nil, err
	}
	// Each call's jobs come out of its own free slots, its node's room (a
	// node's calls share it) and its group's, by weight (slots.go). CHECK
	// jobs bound to a node come first and are picked per node, by its first
	// call (rare); pool work for all ENABLED nodes is picked at once.
	rooms := newSlotRooms(calls, lock, busy, s.db.Cfg.ClaimBatchMax)
	checked := make(map[int64]bool)
	var enabled []int
	for _, i := range live {
		call := calls[i]
		n := lock.nodes[call.sess.NodeID]
		if n.pendingChecks > 0 && !checked[call.sess.NodeID] && rooms.room(i, call) > 0 {
			checked[call.sess.NodeID] = true
			if err := s.pickChecks(ctx, c.Conn, calls, i, n, rooms, out); err != nil {
				return nil, err
			}
		}
		if n.state == jobdb.NodeEnabled {
			enabled = append(enabled, i)
		}
	}
	if want := rooms.sizing(calls, enabled); slices.ContainsFunc(want, func(w int) bool { return w > 0 }) {
		if err := pickPool(ctx, c.Conn, calls, enabled, want, lock.nodes, rooms, out); err != nil {
			return nil, err
		}
	}
	return out, s.leaseClaimed(ctx, c, calls, out, results)
}

// grantReads reads the attempts earlier tries of the calls' claim requests
// were granted (replayClaims answers them).
type grantReads struct {
	byCall map[int][]granted
	reads  []func(jobdb.RowScanner) error
}

// readGrants adds to sc the read of every attempt granted to the calls'
// claim request ids, finished ones too, without locks (attempts come after
// jobs in the lock order; the live ones' jobs are locked and checked again
// when replayed). A request id that has attempts never grants new leases
// (replayClaims), so a stale copy of a claim — one a proxy kept open after
// its node gave up on it and moved on — cannot lease jobs no one waits for.
// The read is a probe of ix_attempt_claim (node_id, claim_request_id): a
// fresh request id, the common case, finds nothing there. Nothing when no
// call has a request id.
func (s *Engine) readGrants(sc *jobdb.Script, calls []claimCall) *grantReads {
	g := &grantReads{byCall: make(map[int][]granted)}
	type key struct {
		node int64
		req  string
	}
	callOf := make(map[key]int)
	var nodes []int64
	var reqs []any
	for i, c := range calls {
		if c.requestID != "" {
			callOf[key{c.sess.NodeID, c.requestID}] = i
			nodes = append(nodes, c.sess.NodeID)
			reqs = append(reqs, c.requestID)
		}
	}
	if len(nodes) == 0 {
		return g
	}
	nin, nargs := jobdb.InList(nodes)
	sc.Rows(grantsRead(nin, len(reqs)), append(nargs, reqs...)...)
	g.reads = []func(jobdb.RowScanner) error{func(r jobdb.RowScanner) error {
		var k key
		var gr granted
		if err := r.Scan(&k.node, &k.req, &gr.jobID, &gr.epoch, &gr.live); err != nil {
			return err
		}
		if i, ok := callOf[k]; ok {
			g.byCall[i] = append(g.byCall[i], gr)
		}
		return nil
	}}
	return g
}

// grantsRead is readGrants' statement for the nodes in nodesIn (a
// placeholder list) and reqs request ids, through ix_attempt_claim.
func grantsRead(nodesIn string, reqs int) string {
	return `SELECT node_id, claim_request_id, job_id, lease_epoch, outcome = 'RUNNING'
	 FROM judge_job_attempt FORCE INDEX (ix_attempt_claim)
	 WHERE node_id IN (` + nodesIn + `) AND claim_request_id IN (` + strings.TrimSuffix(strings.Repeat("?, ", reqs), ", ") + `)
	 ORDER BY job_id`
}

// GrantsReadForExplain is the claim's read of earlier grants of one
// node's request id, for EXPLAIN in tests.
func GrantsReadForExplain() string { return grantsRead("?", 1) }

// busyCounts are the slots RUNNING jobs hold (their slot weights;
// expired-but-unreaped leases included) per host group and per node,
// counted after the locks.
type busyCounts struct {
	group, node map[int64]int
	reads       []func(jobdb.RowScanner) error
}

func countBusy(sc *jobdb.Script, groups []int64) *busyCounts {
	b := &busyCounts{group: make(map[int64]int), node: make(map[int64]int)}
	gin, gargs := jobdb.InList(groups)
	sc.Rows(busyCount(gin), gargs...)
	b.reads = []func(jobdb.RowScanner) error{func(r jobdb.RowScanner) error {
		var g, n int64
		var k int
		if err := r.Scan(&g, &n, &k); err != nil {
			return err
		}
		b.group[g] += k
		b.node[n] += k
		return nil
	}}
	return b
}

// busyCount sums the slot weights of the RUNNING jobs of the host groups in
// groupsIn (a placeholder list) per group and node, through ix_job_lease (its state
// leads it; running jobs are at most the fleet's slots). There is no key
// on host_group_id, which every state change of a job would rewrite; the
// index is forced, as the claim's candidate read forces its own, so a
// table whose statistics are stale or still small is not scanned whole.
func busyCount(groupsIn string) string {
	return `SELECT host_group_id, node_id, SUM(slot_weight) FROM judge_job FORCE INDEX (ix_job_lease)
	    WHERE host_group_id IN (` + groupsIn + `) AND state = 'RUNNING' GROUP BY host_group_id, node_id`
}

// BusyCountForExplain is the claim's in-flight count of two host groups, for
// EXPLAIN in tests.
func BusyCountForExplain() string { return busyCount("?, ?") }

// leaseClaimed leases every job picked for the calls: one UPDATE of the
// jobs (each to its call's node, group and session) and one INSERT of their
// attempts, and fills in the answers' lease fields.
func (s *Engine) leaseClaimed(ctx context.Context, conn *jobdb.ScriptConn, calls []claimCall, out []claimAnswer, results *resultWrite) error {
	var ids []int64
	var node, group, epoch, request strings.Builder
	var na, ga, ea, ra []any
	for i, c := range calls {
		for k := range out[i].jobs {
			j := &out[i].jobs[k]
			if j.Replayed {
				continue
			}
			ids = append(ids, j.JobID)
			j.LeaseEpoch++
			j.Attempt++
			j.LeaseRemaining = s.db.Cfg.LeaseTTL
			node.WriteString(" WHEN ? THEN ?")
			group.WriteString(" WHEN ? THEN ?")
			epoch.WriteString(" WHEN ? THEN ?")
			request.WriteString(" WHEN ? THEN ?")
			na = append(na, j.JobID, c.sess.NodeID)
			ga = append(ga, j.JobID, c.group)
			ea = append(ea, j.JobID, c.sess.SessionEpoch)
			ra = append(ra, j.JobID, c.requestID)
		}
	}
	sc := &jobdb.Script{}
	if len(ids) > 0 {
		in, args := jobdb.InList(ids)
		upd := append(append(append(append([]any{}, na...), ga...), ea...), jobdb.Micros(s.db.Cfg.LeaseTTL))
		sc.Exec(`UPDATE judge_job SET state = 'RUNNING', node_id = CASE id`+node.String()+` END,
		   host_group_id = CASE id`+group.String()+` END, session_epoch = CASE id`+epoch.String()+` END,
		   lease_epoch = lease_epoch + 1, lease_until = NOW(6) + INTERVAL ? MICROSECOND,
		   attempt_count = attempt_count + 1, started_at = COALESCE(started_at, NOW(6)),
		   status_version = status_version + 1, phase = NULL, progress_seq = 0, cases_done = 0,
		   updated_at = NOW(6)
		 WHERE id IN (`+in+`)`, append(upd, args...)...).
			Exec(`INSERT INTO judge_job_attempt (job_id, lease_epoch, node_id, host_group_id, session_epoch, started_at, claim_request_id)
		 SELECT id, lease_epoch, node_id, host_group_id, session_epoch, NOW(6), NULLIF(CASE id`+request.String()+` END, '')
		 FROM judge_job WHERE id IN (`+in+`)`, append(ra, args...)...)
	}
	if err := results.events(sc); err != nil {
		return err
	}
	if err := conn.Send(ctx, sc.Exec(`COMMIT`)); err != nil {
		return fmt.Errorf("store: claim: lease: %w", err)
	}
	return nil
}

// pickReady locks up to limit ready jobs of a pool (requiredNode 0 = pool
// work, else that node's CHECK jobs), skipping rows other claimers hold, and
// returns them as they are before leasing.
//
// Ready jobs go in (priority, enqueue time, id) order: created_at is set at
// enqueue and never changed, so a job retried after its node died keeps its
// place in the queue once its backoff (available_at, a filter only) has
// passed, instead of going behind everything enqueued meanwhile.
//
// Only jobs whose required capabilities are all in caps (the node's) are
// picked; skip lists jobs this transaction picked already.
//
// Two steps. The candidates are read without locks, a consistent read of
// ix_job_claim that serves both WHERE and ORDER BY; then they are locked by
// primary key with SKIP LOCKED, every condition checked again on each row's
// latest version, so a candidate another claimer took or holds meanwhile is
// passed over. A locking read of the index range itself visits, locks and
// releases each entry at the queue's head that purge has not removed yet
// (jobs leased moments ago), which a consistent read passes cheaply: the
// two steps cost the server about a tenth less CPU per job lifecycle
// (docs/scheduling.md, "Candidates read, then locked"). When candidates were
// passed over, the rest is picked by the locking scan, which passes over
// what others hold, so a claim under contention still fills its room.
func pickReady(ctx context.Context, q jobdb.Querier, pool string, requiredNode int64, caps uint64, limit int, skip []int64) ([]ClaimedJob, error) {
	from, args := readyFrom(pool, requiredNode, caps, skip)
	cand, err := jobdb.QueryAll(ctx, q, jobdb.ScanID, `SELECT id`+from+claimOrder, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("store: claim: candidates: %w", err)
	}
	if len(cand) == 0 {
		return nil, nil
	}
	in, ids := jobdb.InList(cand)
	got, err := jobdb.QueryAll(ctx, q, scanClaimed, `SELECT `+claimColumns+` FROM judge_job FORCE INDEX (PRIMARY)
 WHERE id IN (`+in+`) AND`+claimReady+` ORDER BY priority, created_at, id FOR UPDATE SKIP LOCKED`, append(ids, pool, requiredNode, ^caps)...)
	if err != nil {
		return nil, fmt.Errorf("store: claim: pick: %w", err)
	}
	if len(got) == len(cand) {
		return got, nil
	}
	from, args = readyFrom(pool, requiredNode, caps, slices.Concat(skip, jobIDs(got)))
	rest, err := jobdb.QueryAll(ctx, q, scanClaimed, `SELECT `+claimColumns+from+claimOrder+` FOR UPDATE SKIP LOCKED`,
		append(args, limit-len(got))...)
	if err != nil {
		return nil, fmt.Errorf("store: claim: pick: %w", err)
	}
	return append(got, rest...), nil
}

// readyFrom is the FROM and WHERE of a pool's ready jobs through
// ix_job_claim, leaving out skip, with its arguments.
func readyFrom(pool string, requiredNode int64, caps uint64, skip []int64) (string, []any) {
	notIn, ids := jobdb.NotIn(skip)
	return claimFrom + notIn, append([]any{pool, requiredNode, ^caps}, ids...)
}

// jobIDs lists the jobs' ids.
func jobIDs(jobs []ClaimedJob) []int64 {
	return jobdb.IDs(jobs, func(j ClaimedJob) int64 { return j.JobID })
}

// scanClaimed scans claimColumns.
func scanClaimed(r jobdb.RowScanner) (ClaimedJob, error) {
	var c ClaimedJob
	var waitedUs int64
	err := r.Scan(&c.JobID, &c.LeaseEpoch, &c.Kind, &c.Pool, &c.SubmissionType, &c.SubmissionID,
		&c.Generation, &c.Language, &c.ManifestID, &c.Snapshot, &c.Attempt, &waitedUs, &c.Slots)
	c.ReadyWait = time.Duration(waitedUs) * time.Microsecond
	return c, err
}

const claimColumns = `id, lease_epoch, kind, pool, submission_type, submission_id, generation, runtime_spec, manifest_id,
 request_snapshot, attempt_count, TIMESTAMPDIFF(MICROSECOND, available_at, NOW(6)), slot_weight`

const (
	// claimReady is what makes a job claimable (arguments: pool, required
	// node, the complement of the node's capabilities).
	claimReady = ` pool = ? AND state = 'QUEUED' AND required_node_id = ? AND available_at <= NOW(6) AND required_caps & ? = 0`
	claimFrom  = ` FROM judge_job FORCE INDEX (ix_job_claim) WHERE` + claimReady
	claimOrder = ` ORDER BY priority, created_at, id LIMIT ?`
	claimWhere = claimFrom + claimOrder
)

// ClaimQueryForExplain is the claim's candidate read, for EXPLAIN in tests and docs.
func ClaimQueryForExplain() string { return `SELECT id` + claimWhere }

type lockedNode struct {
	hostGroupID   int64
	pool          string
	state         jobdb.NodeState
	slots         int
	sessionEpoch  int64
	revoked       bool
	pendingChecks int
	caps          uint64 // what it can run (nodeCaps)
}

// groupNodeLocks is what lockGroupsAndNodes reads: each locked group's
// slot capacity and each locked node.
type groupNodeLocks struct {
	groups   []int64
	capacity map[int64]int
	nodes    map[int64]lockedNode
	reads    []func(jobdb.RowScanner) error
}

// lockGroupsAndNodes adds to sc the locks of the calls' host groups and
// then their nodes, each in ascending id order (the lock order, doc.go, so claims of one or many nodes never wait on each other in a
// cycle). A node missing from the answer is gone. Calls of a single group
// lock it with its nodes in one statement (STRAIGHT_JOIN fixes the order).
func lockGroupsAndNodes(sc *jobdb.Script, calls []claimCall) *groupNodeLocks {
	groupSet := make(map[int64]bool, len(calls))
	nodeIDs := make([]int64, len(calls))
	for i, c := range calls {
		groupSet[c.group] = true
		nodeIDs[i] = c.sess.NodeID
	}
	l := &groupNodeLocks{groups: slices.Sorted(maps.Keys(groupSet)), capacity: make(map[int64]int),
		nodes: make(map[int64]lockedNode, len(calls))}
	slices.Sort(nodeIDs)
	nin, nargs := jobdb.InList(nodeIDs)
	const nodeCols = `n.id, n.host_group_id, n.pool, n.desired_state, n.slots, n.session_epoch, n.revoked_at IS NOT NULL, n.pending_checks,
		n.caps_languages, n.caps_features`
	readNode := func(r jobdb.RowScanner) error {
		var groupCap int
		var id int64
		var n lockedNode
		var langs *uint64
		var feats uint64
		if err := r.Scan(&groupCap, &id, &n.hostGroupID, &n.pool, &n.state, &n.slots, &n.sessionEpoch,
			&n.revoked, &n.pendingChecks, &langs, &feats); err != nil {
			return err
		}
		n.caps = jobdb.NodeCaps(langs, feats)
		if len(l.groups) == 1 {
			l.capacity[n.hostGroupID] = groupCap
		}
		l.nodes[id] = n
		return nil
	}
	if len(l.groups) == 1 {
		sc.Rows(`SELECT g.slot_capacity, `+nodeCols+`
			 FROM judge_host_group g STRAIGHT_JOIN judge_node n ON n.host_group_id = g.id AND n.id IN (`+nin+`)
			 WHERE g.id = ? ORDER BY n.id FOR UPDATE`, append(nargs, l.groups[0])...)
		l.reads = []func(jobdb.RowScanner) error{readNode}
		return l
	}
	gin, gargs := jobdb.InList(l.groups)
	sc.Rows(`SELECT id, slot_capacity FROM judge_host_group WHERE id IN (`+gin+`) ORDER BY id FOR UPDATE`, gargs...)
	sc.Rows(`SELECT 0, `+nodeCols+` FROM judge_node n WHERE n.id IN (`+nin+`) ORDER BY n.id FOR UPDATE`, nargs...)
	l.reads = []func(jobdb.RowScanner) error{func(r jobdb.RowScanner) error {
		var id int64
		var capacity int
		if err := r.Scan(&id, &capacity); err != nil {
			return err
		}
		l.capacity[id] = capacity
		return nil
	}, readNode}
	return l
}

// claimRequestRE is the shape of a claim request id (the machine contract's
// pattern).
var claimRequestRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{7,63}$`)

func checkClaimRequestID(id string) error {
	if id != "" && !claimRequestRE.MatchString(id) {
		return jobdb.Invalid("requestId", "must match %s", claimRequestRE)
	}
	return nil
}

// replayClaims answers the calls (indexes live, nodes locked by the claim)
// whose claim request already granted leases (byCall, read after the locks
// by readGrants): with the ones still live (replayGranted), and with
// nothing once they have all ended. It returns the live calls left to take
// new work: only those whose request id was never granted anything.
func (s *Engine) replayClaims(ctx context.Context, q execQuerier, calls []claimCall, live []int, byCall map[int][]granted, out []claimAnswer) ([]int, error) {
	if len(byCall) == 0 {
		return live, nil
	}
	rest := live[:0:0]
	for _, i := range live {
		g := byCall[i]
		if len(g) == 0 {
			rest = append(rest, i)
			continue
		}
		g = slices.DeleteFunc(g, func(x granted) bool { return !x.live })
		if len(g) == 0 {
			continue // every lease it granted has ended: an empty answer
		}
		jobs, err := s.replayGranted(ctx, q, calls[i].sess, g)
		if err != nil {
			return nil, err
		}
		out[i].jobs = jobs
	}
	return rest, nil
}

// execQuerier runs statements inside a transaction: a *sql.Tx, or the
// *sql.Conn of a transaction made of scripts.
type execQuerier interface {
	jobdb.Querier
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// granted is a lease an earlier try of a claim request was given; live
// while its attempt is open.
type granted struct {
	jobID, epoch int64
	live         bool
}

// replayGranted answers a claim request that already granted leases: the
// ones still live and held by this session are extended (the node is alive
// and about to run them) and returned as they were granted. Called with the
// node locked, so no claim of this node runs meanwhile; the jobs are locked
// and re-checked here.
func (s *Engine) replayGranted(ctx context.Context, tx execQuerier, sess jobdb.NodeSession, prior []granted) ([]ClaimedJob, error) {
	ids := make([]int64, len(prior))
	epochs := make(map[int64]int64, len(prior))
	for i, g := range prior {
		ids[i], epochs[g.jobID] = g.jobID, g.epoch
	}
	in, args := jobdb.InList(ids)
	rows, err := jobdb.QueryAll(ctx, tx, scanClaimed,
		`SELECT `+claimColumns+` FROM judge_job
		 WHERE id IN (`+in+`) AND state = 'RUNNING' AND node_id = ? AND session_epoch = ? AND lease_until > NOW(6)
		 ORDER BY id FOR UPDATE`, append(args, sess.NodeID, sess.SessionEpoch)...)
	if err != nil {
		return nil, fmt.Errorf("store: claim: replay: %w", err)
	}
	out := rows[:0]
	for _, c := range rows {
		if epochs[c.JobID] == c.LeaseEpoch {
			c.Replayed, c.ReadyWait, c.LeaseRemaining = true, 0, s.db.Cfg.LeaseTTL
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	live := make([]int64, len(out))
	for i, c := range out {
		live[i] = c.JobID
	}
	in, args = jobdb.InList(live)
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_job SET lease_until = NOW(6) + INTERVAL ? MICROSECOND, updated_at = NOW(6) WHERE id IN (`+in+`)`,
		append([]any{jobdb.Micros(s.db.Cfg.LeaseTTL)}, args...)...); err != nil {
		return nil, fmt.Errorf("store: claim: replay: %w", err)
	}
	return out, nil
}

// pickPool picks the pool work of the live calls, want[i] slots at most
// for call i (the candidates' count), each only jobs its node can run,
// handed out by rooms (slots.go: by weight, in queue order). Nodes that
// support the same capabilities (a pool's nodes, as a rule) share one
// pick; each further set of capabilities in the batch costs one more,
// which skips the jobs already picked (this transaction holds their locks,
// which SKIP LOCKED does not skip). A picked job no call takes stays
// queued; its lock ends with the transaction.
func pickPool(ctx context.Context, q jobdb.Querier, calls []claimCall, live, want []int,
	nodes map[int64]lockedNode, rooms *slotRooms, out []claimAnswer) error {
	var order []uint64
	wantOf := map[uint64]int{}
	at := map[uint64][]int{}
	for _, i := range live {
		if want[i] <= 0 {
			continue
		}
		caps := nodes[calls[i].sess.NodeID].caps
		if _, ok := wantOf[caps]; !ok {
			order = append(order, caps)
		}
		wantOf[caps] += want[i]
		at[caps] = append(at[caps], i)
	}
	var picked []int64
	for _, caps := range order {
		more, err := pickReady(ctx, q, calls[0].pool, 0, caps, wantOf[caps], picked)
		if err != nil {
			return err
		}
		picked = append(picked, jobIDs(more)...)
		rooms.assign(calls, at[caps], more, out)
	}
	return nil
}

// pickChecks leases call i's node the CHECK jobs bound to it that fit
// (rooms), and keeps its count of pending checks: what is left when the
// read found fewer than it asked for, else one less per check leased.
func (s *Engine) pickChecks(ctx context.Context, conn execQuerier, calls []claimCall, i int, n lockedNode, rooms *slotRooms, out []claimAnswer) error {
	call := calls[i]
	limit := rooms.room(i, call)
	checks, err := pickReady(ctx, conn, n.pool, call.sess.NodeID, n.caps, limit, nil)
	if err != nil {
		return err
	}
	leased := rooms.assign(calls, []int{i}, checks, out)
	if _, err := conn.ExecContext(ctx,
		`UPDATE judge_node SET pending_checks = IF(? < ?, ?, GREATEST(pending_checks - ?, 0)) WHERE id = ?`,
		len(checks), limit, len(checks)-leased, leased, call.sess.NodeID); err != nil {
		return fmt.Errorf("store: claim: pending checks: %w", err)
	}
	return nil
}
