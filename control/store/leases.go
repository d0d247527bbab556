package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kece-oj/kece/control/manifest"
)

// ClaimedJob is one job handed to a node with a fresh lease.
type ClaimedJob struct {
	JobID          int64
	LeaseEpoch     int64
	LeaseRemaining time.Duration
	Kind           JobKind
	Pool           string
	SubmissionType string
	SubmissionID   string
	Generation     int
	Language       string
	ManifestID     int64
	Snapshot       []byte
	Attempt        int
	// ReadyWait is how long the job had been ready (now − available_at)
	// when it was claimed: the pickup latency metrics report it.
	ReadyWait time.Duration
	// Replayed: the lease was granted earlier to the same claim request
	// and is answered again (its first answer was lost), not a new pickup.
	Replayed bool
}

// claim leases up to freeSlots ready jobs of the node's pool to the session.
// Capacity = min(freeSlots, node slots − node in-flight, group capacity −
// group in-flight, batch cap); in-flight counts RUNNING jobs, expired-but-
// unreaped leases included. CHECK jobs bound to the node come first and may
// be claimed in any state; pool work needs ENABLED.
//
// Concurrent claims of one pool on this replica share one transaction (the
// claim batcher, see claimBatch): a busy pool's claims then cost a fixed
// handful of statements per batch instead of per node, and a lone claim runs
// at once as a batch of one.
//
// requestID (optional) makes the claim idempotent: the attempts it grants
// remember it, and the same request again from the same session within a
// lease TTL answers the leases it granted that are still live (extended
// like a renewal) instead of new ones, so a claim answer lost on the way to
// the node costs nothing. The check runs under the node lock, so a retry
// racing its own original cannot take a second set of jobs.
func (s *Store) claim(ctx context.Context, sess NodeSession, freeSlots int, requestID string) ([]ClaimedJob, error) {
	if freeSlots <= 0 {
		return nil, nil
	}
	if err := checkClaimRequestID(requestID); err != nil {
		return nil, err
	}
	place, err := s.nodePlace(ctx, sess.NodeID)
	if err != nil {
		return nil, err
	}
	return s.claimers.of(place.pool).do(ctx, claimCall{sess: sess, free: freeSlots, requestID: requestID, group: place.group, pool: place.pool})
}

// claimCall is one node's claim as the claim batcher queues it; group and
// pool are the node's (cached, fixed at creation).
type claimCall struct {
	sess      NodeSession
	free      int
	requestID string
	group     int64
	pool      string
	// results are fast results of the node's leases that commit in the
	// claim's transaction (a cycle, see CompleteClaim).
	results []fastResult
}

// claimBatchCalls caps how many nodes' claims share one transaction.
const claimBatchCalls = 64

// claimBatchers holds one claim batcher per pool: claims of different pools
// never share a transaction (they share no rows). Each runs one batch at a
// time: a second batch of the same pool would queue on the same host-group
// locks, and the calls that arrive meanwhile make the next batch bigger.
type claimBatchers struct {
	mu     sync.Mutex
	run    func(context.Context, []*batchCall[claimCall, []ClaimedJob])
	linger time.Duration
	m      map[string]*batcher[claimCall, []ClaimedJob]
}

func (c *claimBatchers) of(pool string) *batcher[claimCall, []ClaimedJob] {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[pool]
	if !ok {
		b = newBatcher(claimBatchCalls, 1, c.linger, c.run)
		c.m[pool] = b
	}
	return b
}

// claimBatch answers concurrent claims of one pool (a node may appear more
// than once, as its slots' cycles do; a claim request id that appears twice
// — a retry racing its original — goes again in a batch of its own, after
// the first has committed its grants):
//
//  1. one plain read (no transaction, no lock) checks every session and
//     whether each node could take anything — pool work if it is ENABLED,
//     its pending CHECK jobs, leases an earlier try of the same claim
//     request granted. Most claims that find nothing are long-polls woken
//     with the rest of a pool's waiters; this read is their whole claim. A
//     job that commits after this read wakes the waiter again.
//  2. the rest share one transaction (claimTx): lock host groups then nodes
//     (the documented order, ascending ids), replay earlier grants, count
//     in-flight per group and node, pick all the batch's pool work in one
//     SKIP LOCKED read, lease it in one UPDATE and one attempts INSERT.
//
// A batch whose transaction fails runs again call by call, so each caller
// gets exactly the answer it would get alone.
func (s *Store) claimBatch(ctx context.Context, calls []*batchCall[claimCall, []ClaimedJob]) {
	type key struct {
		node int64
		req  string
	}
	seen := make(map[key]bool, len(calls))
	var batch, again []*batchCall[claimCall, []ClaimedJob]
	for _, c := range calls {
		k := key{c.req.sess.NodeID, c.req.requestID}
		switch {
		case c.ctx.Err() != nil:
			// Its caller gave up: leasing it jobs now would only strand them.
			c.err = c.ctx.Err()
		case k.req != "" && seen[k]:
			again = append(again, c)
		default:
			seen[k] = true
			batch = append(batch, c)
		}
	}
	if len(batch) > 0 {
		s.claimReady(ctx, batch)
	}
	for _, c := range again {
		s.claimBatch(ctx, []*batchCall[claimCall, []ClaimedJob]{c})
	}
}

// claimReady is step 1 of claimBatch, then step 2 for the calls that could
// take something.
func (s *Store) claimReady(ctx context.Context, batch []*batchCall[claimCall, []ClaimedJob]) {
	if !slices.ContainsFunc(batch, func(c *batchCall[claimCall, []ClaimedJob]) bool { return len(c.req.results) == 0 }) {
		// Every call commits results: the transaction runs whatever the
		// read would say, and checks the sessions under its locks.
		s.claimLocked(ctx, batch)
		return
	}
	ids := make([]int64, len(batch))
	var reqIDs []any
	for i, c := range batch {
		ids[i] = c.req.sess.NodeID
		if c.req.requestID != "" {
			reqIDs = append(reqIDs, c.req.requestID)
		}
	}
	in, args := inList(ids)
	replay := `FALSE`
	var replayArgs []any
	if len(reqIDs) > 0 {
		// Any of the batch's request ids at this node: request ids are
		// random per claim, and a false positive only costs the locked check.
		replay = `EXISTS (SELECT 1 FROM judge_job_attempt a
		            WHERE a.node_id = n.id AND a.claim_request_id IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(reqIDs)), ", ") + `)
		              AND a.outcome = 'RUNNING' AND a.started_at > NOW(6) - INTERVAL ? MICROSECOND)`
		replayArgs = append(reqIDs, micros(s.cfg.LeaseTTL))
	}
	type readiness struct {
		id             int64
		epoch          int64
		revoked, ready bool
	}
	rows, err := queryAll(ctx, s.db, func(r rowScanner) (readiness, error) {
		var v readiness
		return v, r.Scan(&v.id, &v.epoch, &v.revoked, &v.ready)
	}, `SELECT n.id, n.session_epoch, n.revoked_at IS NOT NULL,
	        n.pending_checks > 0
	        OR (n.desired_state = 'ENABLED' AND EXISTS (SELECT 1 FROM judge_job j FORCE INDEX (ix_job_claim)
	              WHERE j.pool = ? AND j.state = 'QUEUED' AND j.required_node_id = 0 AND j.available_at <= NOW(6)
	                AND j.required_caps & ~`+nodeCapsSQL+` = 0))
	        OR `+replay+`
	 FROM judge_node n WHERE n.id IN (`+in+`)`, append(append([]any{batch[0].req.pool}, replayArgs...), args...)...)
	if err != nil {
		err = fmt.Errorf("store: claim: ready: %w", Classify(err))
		for _, c := range batch {
			c.err = err
		}
		return
	}
	byNode := make(map[int64]readiness, len(rows))
	for _, r := range rows {
		byNode[r.id] = r
	}
	var ready []*batchCall[claimCall, []ClaimedJob]
	for _, c := range batch {
		r, ok := byNode[c.req.sess.NodeID]
		if c.err = sessionError(c.req.sess, ok, r.revoked, r.epoch); c.err == nil && (r.ready || len(c.req.results) > 0) {
			ready = append(ready, c)
		}
	}
	if len(ready) > 0 {
		s.claimLocked(ctx, ready)
	}
}

// claimLocked is step 2 of claimBatch for ready: one transaction
// (claimTx), or, when it fails and there are several calls, each again on
// its own, so each caller gets exactly the answer it would get alone.
func (s *Store) claimLocked(ctx context.Context, ready []*batchCall[claimCall, []ClaimedJob]) {
	calls := make([]claimCall, len(ready))
	for i, c := range ready {
		calls[i] = c.req
	}
	var out []claimAnswer
	err := s.inScripts(ctx, func(c *scriptConn) error {
		var err error
		out, err = s.claimTx(ctx, c, calls)
		return err
	})
	if err == nil && len(ready) > 1 {
		s.stats.batches.Add(1)
	}
	if err != nil && len(ready) > 1 {
		for _, c := range ready {
			s.claimLocked(ctx, []*batchCall[claimCall, []ClaimedJob]{c})
		}
		return
	}
	for i, c := range ready {
		if err != nil {
			c.err = err
			continue
		}
		c.resp, c.err = out[i].jobs, out[i].err
		for _, j := range c.resp {
			s.facts.put(j.JobID, jobFacts{typ: j.SubmissionType, sid: j.SubmissionID, manifestID: j.ManifestID,
				kind: j.Kind, pool: j.Pool, generation: j.Generation})
		}
	}
}

// sessionError is why a claim by sess is refused (nil: it is not): the node
// is gone (found false), revoked, or has a newer session.
func sessionError(sess NodeSession, found, revoked bool, epoch int64) error {
	switch {
	case !found:
		return fmt.Errorf("node %d: %w", sess.NodeID, ErrUnauthenticated)
	case revoked:
		return fmt.Errorf("node %d: %w", sess.NodeID, ErrNodeRevoked)
	case epoch != sess.SessionEpoch:
		return fmt.Errorf("node %d session %d (current %d): %w", sess.NodeID, sess.SessionEpoch, epoch, ErrSessionSuperseded)
	}
	return nil
}

// claimAnswer is one call's answer from claimTx.
type claimAnswer struct {
	jobs []ClaimedJob
	err  error
}

// claimTx is step 2 of claimBatch, a transaction on c for calls of one
// pool (a node may make several); it answers each call (a refused session
// is that call's error, not the batch's). Three round trips whatever the
// batch size: (begin, lock groups and nodes, complete the calls' results
// with their row counts, read earlier grants of the calls' request ids,
// count in-flight per group and node), the pick, (lease, attempts, the
// results' events, commit). Replays and CHECK jobs, both rare, add their
// own.
func (s *Store) claimTx(ctx context.Context, c *scriptConn, calls []claimCall) ([]claimAnswer, error) {
	out := make([]claimAnswer, len(calls))
	sc := s.begin(&script{})
	lock := lockGroupsAndNodes(sc, calls)
	// The cycles' results commit after the locks (group → node → job) and
	// before the count, which then no longer counts their jobs as busy.
	results := cycleResults(calls)
	fence := s.completeInClaim(sc, results)
	grants := s.readGrants(sc, calls)
	busy := countBusy(sc, lock.groups)
	if err := c.send(ctx, sc, slices.Concat(lock.reads, fence.reads, grants.reads, busy.reads)...); err != nil {
		return nil, fmt.Errorf("store: claim: lock: %w", err)
	}
	if !fence.held() {
		return nil, errFenced
	}
	live := make([]int, 0, len(calls)) // indexes of calls that may take work
	for i, call := range calls {
		n, ok := lock.nodes[call.sess.NodeID]
		if out[i].err = sessionError(call.sess, ok, n.revoked, n.sessionEpoch); out[i].err == nil {
			live = append(live, i)
		}
	}
	live, err := s.replayClaims(ctx, c.conn, calls, live, grants.byCall, out)
	if err != nil {
		return nil, err
	}
	groupFree := make(map[int64]int, len(lock.capacity))
	for g, n := range lock.capacity {
		groupFree[g] = n - busy.group[g]
	}
	// Capacities in call order; each call's jobs come out of its node's and
	// its group's room (a node's calls share its room). CHECK jobs bound to
	// a node come first and are picked per node, by its first call (rare);
	// pool work for all ENABLED nodes is picked at once.
	capacity := make([]int, len(calls))
	nodeFree := make(map[int64]int, len(calls))
	checked := make(map[int64]bool)
	poolWant := 0
	for _, i := range live {
		call := calls[i]
		n := lock.nodes[call.sess.NodeID]
		free, ok := nodeFree[call.sess.NodeID]
		if !ok {
			free = n.slots - busy.node[call.sess.NodeID]
		}
		room := min(call.free, free, groupFree[call.group], s.cfg.ClaimBatchMax)
		if room <= 0 {
			nodeFree[call.sess.NodeID] = free
			continue
		}
		if n.pendingChecks > 0 && !checked[call.sess.NodeID] {
			checked[call.sess.NodeID] = true
			checks, err := pickReady(ctx, c.conn, n.pool, call.sess.NodeID, n.caps, room, nil)
			if err != nil {
				return nil, err
			}
			if _, err := c.conn.ExecContext(ctx,
				`UPDATE judge_node SET pending_checks = IF(? < ?, 0, GREATEST(pending_checks - ?, 0)) WHERE id = ?`,
				len(checks), room, len(checks), call.sess.NodeID); err != nil {
				return nil, fmt.Errorf("store: claim: pending checks: %w", err)
			}
			out[i].jobs = checks
		}
		if n.state == NodeEnabled {
			capacity[i] = room - len(out[i].jobs)
		}
		// Reserved for this call; what the pick does not fill was not
		// there for later calls either (they pick from the same queue).
		groupFree[call.group] -= len(out[i].jobs) + capacity[i]
		nodeFree[call.sess.NodeID] = free - len(out[i].jobs) - capacity[i]
		poolWant += capacity[i]
	}
	if poolWant > 0 {
		if err := pickPool(ctx, c.conn, calls, live, capacity, lock.nodes, out); err != nil {
			return nil, err
		}
	}
	return out, s.leaseClaimed(ctx, c, calls, out, results)
}

// grantReads reads the attempts earlier tries of the calls' claim requests
// were granted (replayClaims answers them).
type grantReads struct {
	byCall map[int][]granted
	reads  []func(rowScanner) error
}

// readGrants adds to sc the read of the live leases granted to the calls'
// claim request ids, without locks (job → attempt is the lock order; the
// jobs are locked and checked again when replayed). Nothing when no call
// has a request id.
func (s *Store) readGrants(sc *script, calls []claimCall) *grantReads {
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
	nin, nargs := inList(nodes)
	sc.rows(`SELECT node_id, claim_request_id, job_id, lease_epoch FROM judge_job_attempt
	    WHERE node_id IN (`+nin+`) AND claim_request_id IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(reqs)), ", ")+`)
	      AND outcome = 'RUNNING' AND started_at > NOW(6) - INTERVAL ? MICROSECOND
	    ORDER BY job_id`, append(append(nargs, reqs...), micros(s.cfg.LeaseTTL))...)
	g.reads = []func(rowScanner) error{func(r rowScanner) error {
		var k key
		var gr granted
		if err := r.Scan(&k.node, &k.req, &gr.jobID, &gr.epoch); err != nil {
			return err
		}
		if i, ok := callOf[k]; ok {
			g.byCall[i] = append(g.byCall[i], gr)
		}
		return nil
	}}
	return g
}

// busyCounts are the RUNNING jobs (expired-but-unreaped leases included)
// per host group and per node, counted after the locks.
type busyCounts struct {
	group, node map[int64]int
	reads       []func(rowScanner) error
}

func countBusy(sc *script, groups []int64) *busyCounts {
	b := &busyCounts{group: make(map[int64]int), node: make(map[int64]int)}
	gin, gargs := inList(groups)
	sc.rows(`SELECT host_group_id, node_id, COUNT(*) FROM judge_job
	    WHERE host_group_id IN (`+gin+`) AND state = 'RUNNING' GROUP BY host_group_id, node_id`, gargs...)
	b.reads = []func(rowScanner) error{func(r rowScanner) error {
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

// leaseClaimed leases every job picked for the calls: one UPDATE of the
// jobs (each to its call's node, group and session) and one INSERT of their
// attempts, and fills in the answers' lease fields.
func (s *Store) leaseClaimed(ctx context.Context, conn *scriptConn, calls []claimCall, out []claimAnswer, results []fastResult) error {
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
			j.LeaseRemaining = s.cfg.LeaseTTL
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
	sc := &script{}
	if len(ids) > 0 {
		in, args := inList(ids)
		upd := append(append(append(append([]any{}, na...), ga...), ea...), micros(s.cfg.LeaseTTL))
		sc.exec(`UPDATE judge_job SET state = 'RUNNING', node_id = CASE id`+node.String()+` END,
		   host_group_id = CASE id`+group.String()+` END, session_epoch = CASE id`+epoch.String()+` END,
		   lease_epoch = lease_epoch + 1, lease_until = NOW(6) + INTERVAL ? MICROSECOND,
		   attempt_count = attempt_count + 1, started_at = COALESCE(started_at, NOW(6)),
		   status_version = status_version + 1, phase = NULL, progress_seq = 0, cases_done = 0,
		   updated_at = NOW(6)
		 WHERE id IN (`+in+`)`, append(upd, args...)...).
			exec(`INSERT INTO judge_job_attempt (job_id, lease_epoch, node_id, host_group_id, session_epoch, started_at, claim_request_id)
		 SELECT id, lease_epoch, node_id, host_group_id, session_epoch, NOW(6), NULLIF(CASE id`+request.String()+` END, '')
		 FROM judge_job WHERE id IN (`+in+`)`, append(ra, args...)...)
	}
	if len(results) > 0 {
		q, qargs, err := settlementSQL(settlementRows(results))
		if err != nil {
			return err
		}
		sc.exec(q, qargs...)
	}
	if err := conn.send(ctx, sc.exec(`COMMIT`)); err != nil {
		return fmt.Errorf("store: claim: lease: %w", err)
	}
	return nil
}

// NextReady says how long until the soonest job of the pool that a claim
// could take becomes ready (its retry backoff ends); ok is false when no job
// waits. A long-poll that found nothing sleeps at most that long, so a retry
// is picked up when its backoff ends rather than at the next poll.
func (s *Store) NextReady(ctx context.Context, pool string, nodeID int64) (d time.Duration, ok bool, err error) {
	var us sql.NullInt64
	err = s.db.QueryRowContext(ctx,
		`SELECT GREATEST(TIMESTAMPDIFF(MICROSECOND, NOW(6), MIN(j.available_at)), 0)
		 FROM judge_node n JOIN judge_job j ON j.pool = ? AND j.state = 'QUEUED' AND j.required_node_id IN (0, n.id)
		   AND j.required_caps & ~`+nodeCapsSQL+` = 0
		 WHERE n.id = ?`, pool, nodeID).Scan(&us)
	if err != nil {
		return 0, false, fmt.Errorf("store: next ready: %w", err)
	}
	if !us.Valid {
		return 0, false, nil
	}
	return time.Duration(us.Int64) * time.Microsecond, true, nil
}

// nodePlace is a node's pool and host group, fixed at creation (so nodePlace
// caches it).
type nodePlace struct {
	group int64
	pool  string
}

func (s *Store) nodePlace(ctx context.Context, nodeID int64) (nodePlace, error) {
	if p, ok := s.groups.get(nodeID); ok {
		return p, nil
	}
	var p nodePlace
	err := s.db.QueryRowContext(ctx, `SELECT host_group_id, pool FROM judge_node WHERE id = ?`, nodeID).Scan(&p.group, &p.pool)
	if errors.Is(err, sql.ErrNoRows) {
		return p, fmt.Errorf("node %d: %w", nodeID, ErrUnauthenticated)
	}
	if err != nil {
		return p, fmt.Errorf("store: node place: %w", err)
	}
	s.groups.put(nodeID, p)
	return p, nil
}

// pickReady locks up to limit ready jobs of a pool (requiredNode 0 = pool
// work, else that node's CHECK jobs), skipping rows other claimers hold, and
// returns them as they are before leasing. The query is served by
// ix_job_claim for both WHERE and ORDER BY.
//
// Ready jobs go in (priority, enqueue time, id) order: created_at is set at
// enqueue and never changed, so a job retried after its node died keeps its
// place in the queue once its backoff (available_at, a filter only) has
// passed, instead of going behind everything enqueued meanwhile.
//
// Only jobs whose required capabilities are all in caps (the node's) are
// picked; skip lists jobs this transaction picked already.
func pickReady(ctx context.Context, q querier, pool string, requiredNode int64, caps uint64, limit int, skip []int64) ([]ClaimedJob, error) {
	query, args := claimQuery, []any{pool, requiredNode, ^caps, limit}
	if len(skip) > 0 {
		in, ids := inList(skip)
		query = `SELECT ` + claimColumns + claimFrom + ` AND id NOT IN (` + in + `)` + claimOrder + ` FOR UPDATE SKIP LOCKED`
		args = slices.Concat([]any{pool, requiredNode, ^caps}, ids, []any{limit})
	}
	out, err := queryAll(ctx, q, scanClaimed, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: claim: pick: %w", err)
	}
	return out, nil
}

// scanClaimed scans claimColumns.
func scanClaimed(r rowScanner) (ClaimedJob, error) {
	var c ClaimedJob
	var waitedUs int64
	err := r.Scan(&c.JobID, &c.LeaseEpoch, &c.Kind, &c.Pool, &c.SubmissionType, &c.SubmissionID,
		&c.Generation, &c.Language, &c.ManifestID, &c.Snapshot, &c.Attempt, &waitedUs)
	c.ReadyWait = time.Duration(waitedUs) * time.Microsecond
	return c, err
}

const claimColumns = `id, lease_epoch, kind, pool, submission_type, submission_id, generation, runtime_spec, manifest_id,
 request_snapshot, attempt_count, TIMESTAMPDIFF(MICROSECOND, available_at, NOW(6))`

const (
	claimFrom = ` FROM judge_job FORCE INDEX (ix_job_claim)
 WHERE pool = ? AND state = 'QUEUED' AND required_node_id = ? AND available_at <= NOW(6) AND required_caps & ? = 0`
	claimOrder = ` ORDER BY priority, created_at, id LIMIT ?`
	claimWhere = claimFrom + claimOrder
)

const claimQuery = `SELECT ` + claimColumns + claimWhere + ` FOR UPDATE SKIP LOCKED`

// ClaimQueryForExplain is the claim's pick statement, for EXPLAIN in tests and docs.
func ClaimQueryForExplain() string { return `SELECT id` + claimWhere }

type lockedNode struct {
	hostGroupID   int64
	pool          string
	state         NodeState
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
	reads    []func(rowScanner) error
}

// lockGroupsAndNodes adds to sc the locks of the calls' host groups and
// then their nodes, each in ascending id order (the documented order, group
// → node, so claims of one or many nodes never wait on each other in a
// cycle). A node missing from the answer is gone. Calls of a single group
// lock it with its nodes in one statement (STRAIGHT_JOIN fixes the order).
func lockGroupsAndNodes(sc *script, calls []claimCall) *groupNodeLocks {
	groupSet := make(map[int64]bool, len(calls))
	nodeIDs := make([]int64, len(calls))
	for i, c := range calls {
		groupSet[c.group] = true
		nodeIDs[i] = c.sess.NodeID
	}
	l := &groupNodeLocks{groups: slices.Sorted(maps.Keys(groupSet)), capacity: make(map[int64]int),
		nodes: make(map[int64]lockedNode, len(calls))}
	slices.Sort(nodeIDs)
	nin, nargs := inList(nodeIDs)
	const nodeCols = `n.id, n.host_group_id, n.pool, n.desired_state, n.slots, n.session_epoch, n.revoked_at IS NOT NULL, n.pending_checks,
		n.caps_languages, n.caps_features`
	readNode := func(r rowScanner) error {
		var groupCap int
		var id int64
		var n lockedNode
		var langs *uint64
		var feats uint64
		if err := r.Scan(&groupCap, &id, &n.hostGroupID, &n.pool, &n.state, &n.slots, &n.sessionEpoch,
			&n.revoked, &n.pendingChecks, &langs, &feats); err != nil {
			return err
		}
		n.caps = nodeCaps(langs, feats)
		if len(l.groups) == 1 {
			l.capacity[n.hostGroupID] = groupCap
		}
		l.nodes[id] = n
		return nil
	}
	if len(l.groups) == 1 {
		sc.rows(`SELECT g.slot_capacity, `+nodeCols+`
			 FROM judge_host_group g STRAIGHT_JOIN judge_node n ON n.host_group_id = g.id AND n.id IN (`+nin+`)
			 WHERE g.id = ? ORDER BY n.id FOR UPDATE`, append(nargs, l.groups[0])...)
		l.reads = []func(rowScanner) error{readNode}
		return l
	}
	gin, gargs := inList(l.groups)
	sc.rows(`SELECT id, slot_capacity FROM judge_host_group WHERE id IN (`+gin+`) ORDER BY id FOR UPDATE`, gargs...)
	sc.rows(`SELECT 0, `+nodeCols+` FROM judge_node n WHERE n.id IN (`+nin+`) ORDER BY n.id FOR UPDATE`, nargs...)
	l.reads = []func(rowScanner) error{func(r rowScanner) error {
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

// RenewItem is one lease a node wants extended, with its progress.
type RenewItem struct {
	JobID       int64
	LeaseEpoch  int64
	ProgressSeq int64
	Phase       string // COMPILING or JUDGING; empty keeps the current one
	CasesDone   int
	CasesTotal  int
}

// RenewState answers one renew item.
type RenewState string

// Renew answers.
const (
	RenewOK        RenewState = "OK"
	RenewLost      RenewState = "LOST"
	RenewCancelled RenewState = "CANCELLED"
)

// RenewResult answers one RenewItem.
type RenewResult struct {
	JobID      int64
	LeaseEpoch int64
	State      RenewState
	Remaining  time.Duration
}

// Renew extends the session's live leases in one transaction. An expired
// lease is LOST even if not yet reaped; progress only moves forward.
func (s *Store) Renew(ctx context.Context, sess NodeSession, items []RenewItem) ([]RenewResult, error) {
	if len(items) == 0 {
		return nil, nil
	}
	for _, it := range items {
		if it.Phase != "" && it.Phase != "COMPILING" && it.Phase != "JUDGING" {
			return nil, invalid("phase", "must be COMPILING or JUDGING, got %q", it.Phase)
		}
	}
	sorted := append([]RenewItem(nil), items...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].JobID < sorted[j].JobID })
	if ok, err := s.writer.do(ctx, leaseWrite{renew: &renewCall{sess: sess, items: sorted}}); err != nil || ok {
		if err != nil {
			return nil, err
		}
		out := make([]RenewResult, len(items))
		for i, it := range items {
			out[i] = RenewResult{JobID: it.JobID, LeaseEpoch: it.LeaseEpoch, State: RenewOK, Remaining: s.cfg.LeaseTTL}
		}
		return out, nil
	}
	// Some lease did not renew: work out each answer item by item. Repeating
	// a renewal that did commit above is harmless (the lease is extended
	// again; progress only moves forward).
	results := make(map[[2]int64]RenewResult, len(items))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		clear(results)
		for _, it := range sorted {
			// Assignments run left to right: progress_seq is updated last so
			// the IF()s compare against the stored value, and status_version
			// (the business sees COMPILING → JUDGING as a status change)
			// before phase.
			r, err := tx.ExecContext(ctx,
				`UPDATE judge_job SET lease_until = NOW(6) + INTERVAL ? MICROSECOND,
				   status_version = status_version + IF(? > progress_seq AND ? <> '' AND ? <> COALESCE(phase, 'COMPILING'), 1, 0),
				   phase = IF(? > progress_seq AND ? <> '', ?, phase),
				   cases_done = IF(? > progress_seq, GREATEST(cases_done, ?), cases_done),
				   cases_total = IF(? > progress_seq, ?, cases_total),
				   progress_seq = GREATEST(progress_seq, ?), updated_at = NOW(6)
				 WHERE id = ? AND state = 'RUNNING' AND node_id = ? AND session_epoch = ? AND lease_epoch = ?
				   AND lease_until > NOW(6)
				   AND EXISTS (SELECT 1 FROM judge_node n WHERE n.id = ? AND n.session_epoch = ? AND n.revoked_at IS NULL)`,
				micros(s.cfg.LeaseTTL),
				it.ProgressSeq, it.Phase, it.Phase,
				it.ProgressSeq, it.Phase, it.Phase,
				it.ProgressSeq, it.CasesDone,
				it.ProgressSeq, it.CasesTotal,
				it.ProgressSeq,
				it.JobID, sess.NodeID, sess.SessionEpoch, it.LeaseEpoch, sess.NodeID, sess.SessionEpoch)
			if err != nil {
				return fmt.Errorf("store: renew: %w", err)
			}
			key := [2]int64{it.JobID, it.LeaseEpoch}
			if n, _ := r.RowsAffected(); n == 1 {
				results[key] = RenewResult{JobID: it.JobID, LeaseEpoch: it.LeaseEpoch, State: RenewOK, Remaining: s.cfg.LeaseTTL}
				continue
			}
			var state JobState
			var epoch int64
			err = tx.QueryRowContext(ctx, `SELECT state, lease_epoch FROM judge_job WHERE id = ?`, it.JobID).Scan(&state, &epoch)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				results[key] = RenewResult{JobID: it.JobID, LeaseEpoch: it.LeaseEpoch, State: RenewLost}
			case err != nil:
				return fmt.Errorf("store: renew: %w", err)
			case state == StateCancelled && epoch == it.LeaseEpoch:
				results[key] = RenewResult{JobID: it.JobID, LeaseEpoch: it.LeaseEpoch, State: RenewCancelled}
			default:
				results[key] = RenewResult{JobID: it.JobID, LeaseEpoch: it.LeaseEpoch, State: RenewLost}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]RenewResult, 0, len(items))
	for _, it := range items {
		out = append(out, results[[2]int64{it.JobID, it.LeaseEpoch}])
	}
	return out, nil
}

// renewCall is one node's renewal as the renew batcher queues it (items in
// ascending job id).
type renewCall struct {
	sess  NodeSession
	items []RenewItem
}

// leaseWrite is one call the lease writer queues: a node's renewal or a
// fast result, never both.
type leaseWrite struct {
	renew  *renewCall
	result *fastResult
}

// writeBatch answers concurrent renewals and fast results. When both kinds
// are queued (distinct jobs) they share one transaction: one UPDATE of
// judge_job renews and completes, fenced alike, then the results' attempts
// and events (leaseScripts) — a renewal costs no commit of its own. If any
// item of it fails its fence, nothing is written and each kind goes its own
// way below, so every call gets exactly the answer it would get alone.
func (s *Store) writeBatch(ctx context.Context, calls []*batchCall[leaseWrite, bool]) {
	var renews, results []*batchCall[leaseWrite, bool]
	seen := make(map[int64]bool)
	dup := false
	for _, c := range calls {
		if c.req.renew != nil {
			renews = append(renews, c)
			for _, it := range c.req.renew.items {
				dup = dup || seen[it.JobID]
				seen[it.JobID] = true
			}
			continue
		}
		results = append(results, c)
		dup = dup || seen[c.req.result.jobID]
		seen[c.req.result.jobID] = true
	}
	if len(renews) > 0 && len(results) > 0 && !dup {
		rs := make([]renewCall, len(renews))
		for i, c := range renews {
			rs[i] = *c.req.renew
		}
		items := make([]fastResult, len(results))
		for i, c := range results {
			items[i] = *c.req.result
		}
		slices.SortFunc(items, byJobID)
		if err := s.inScripts(ctx, func(c *scriptConn) error { return s.leaseScripts(ctx, c, rs, items) }); err == nil {
			s.stats.batches.Add(1)
			for _, c := range calls {
				c.resp = true
			}
			return
		}
	}
	if len(renews) > 0 {
		s.renewBatch(ctx, renews)
	}
	if len(results) > 0 {
		s.completeBatch(ctx, results)
	}
}

// renewBatch extends the leases of concurrent renewals (of any nodes) in one
// autocommit UPDATE: one commit for all of them. When some lease of the
// batch did not renew, each call runs again alone, so each gets the answer
// it would get by itself (renewing again is harmless: the lease is extended
// again, progress only moves forward).
func (s *Store) renewBatch(ctx context.Context, calls []*batchCall[leaseWrite, bool]) {
	seen := make(map[int64]bool)
	dup := false
	for _, c := range calls {
		for _, it := range c.req.renew.items {
			dup = dup || seen[it.JobID]
			seen[it.JobID] = true
		}
	}
	if len(calls) > 1 && !dup {
		reqs := make([]renewCall, len(calls))
		for i, c := range calls {
			reqs[i] = *c.req.renew
		}
		if ok, err := s.renewAll(ctx, reqs); err == nil && ok {
			s.stats.batches.Add(1)
			for _, c := range calls {
				c.resp = true
			}
			return
		}
	}
	for _, c := range calls {
		c.resp, c.err = s.renewAll(ctx, []renewCall{*c.req.renew})
	}
}

// renewAll extends every item's lease in one autocommit statement — the
// common case, where all of them are live. It reports false when some item
// did not renew (lost, cancelled, a stale session); what did renew stays
// renewed, and Renew answers item by item.
func (s *Store) renewAll(ctx context.Context, calls []renewCall) (bool, error) {
	q, args, n := leaseUpdate(s.cfg.LeaseTTL, calls, nil)
	r, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		if retryable(err) {
			return false, nil
		}
		return false, fmt.Errorf("store: renew: %w", err)
	}
	got, _ := r.RowsAffected()
	return got == int64(n), nil
}

// caseColumn builds `col = CASE id WHEN ? THEN … ELSE col END`, one WHEN per
// job.
type caseColumn struct {
	text strings.Builder
	args []any
}

func (c *caseColumn) when(id int64, then string, args ...any) {
	c.text.WriteString(" WHEN ? THEN " + then)
	c.args = append(append(c.args, id), args...)
}

// set appends the assignment (none when no job has a WHEN) to sets/args.
func (c *caseColumn) set(col string, sets *[]string, args *[]any) {
	if len(c.args) == 0 {
		return
	}
	*sets = append(*sets, col+" = CASE id"+c.text.String()+" ELSE "+col+" END")
	*args = append(*args, c.args...)
}

// leaseUpdate is the one UPDATE of judge_job that extends the leases of
// renews (with their progress) and completes the jobs of results; n is how
// many rows it changes when every item's fence holds. The jobs must be
// distinct. Every item is fenced alike: its (job, lease epoch, node,
// session) in the row constructor, RUNNING, unexpired, and its node's
// session current and not revoked. The node fence is a single-table
// subquery on purpose: under READ COMMITTED InnoDB reads it without locks,
// where a multi-table UPDATE would share-lock every node row of the batch
// and queue behind those nodes' claims. No fence reads the submission: a
// job that is not its submission's current one is never RUNNING (a
// rejudge cancels the job it supersedes in the transaction that makes the
// new generation, under that job's lock), so state = 'RUNNING' covers it.
//
// Single-table UPDATE assignments run left to right, so progress_seq is set
// after the renewals' IF()s that compare against the stored value, and
// status_version (the business sees COMPILING → JUDGING as a status change)
// before phase. id IN (…) in ascending order lets the optimizer use the
// primary key whatever it does with the row constructor, and locks the rows
// in one order.
func leaseUpdate(ttl time.Duration, renews []renewCall, results []fastResult) (q string, args []any, n int) {
	var state, verdict, result, digest, version, phase, done, total, seq, finished, lease caseColumn
	var fence strings.Builder
	var fa []any
	var ids []int64
	guard := func(id, epoch int64, sess NodeSession) {
		if len(ids) > 0 {
			fence.WriteString(", ")
		}
		fence.WriteString("(?, ?, ?, ?)")
		fa = append(fa, id, epoch, sess.NodeID, sess.SessionEpoch)
		ids = append(ids, id)
	}
	for _, r := range results {
		state.when(r.jobID, "'COMPLETED'")
		verdict.when(r.jobID, "?", r.status)
		result.when(r.jobID, "?", r.body)
		digest.when(r.jobID, "?", r.digest)
		version.when(r.jobID, "status_version + 1")
		done.when(r.jobID, "?", r.cases.done)
		total.when(r.jobID, "?", r.cases.total)
		finished.when(r.jobID, "NOW(6)")
		lease.when(r.jobID, "NULL")
		guard(r.jobID, r.leaseEpoch, r.sess)
	}
	for _, c := range renews {
		for _, it := range c.items {
			version.when(it.JobID, "status_version + IF(? > progress_seq AND ? <> '' AND ? <> COALESCE(phase, 'COMPILING'), 1, 0)",
				it.ProgressSeq, it.Phase, it.Phase)
			phase.when(it.JobID, "IF(? > progress_seq AND ? <> '', ?, phase)", it.ProgressSeq, it.Phase, it.Phase)
			done.when(it.JobID, "IF(? > progress_seq, GREATEST(cases_done, ?), cases_done)", it.ProgressSeq, it.CasesDone)
			total.when(it.JobID, "IF(? > progress_seq, ?, cases_total)", it.ProgressSeq, it.CasesTotal)
			seq.when(it.JobID, "GREATEST(progress_seq, ?)", it.ProgressSeq)
			guard(it.JobID, it.LeaseEpoch, c.sess)
		}
	}
	var sets []string
	state.set("state", &sets, &args)
	verdict.set("verdict", &sets, &args)
	result.set("result", &sets, &args)
	digest.set("result_digest", &sets, &args)
	version.set("status_version", &sets, &args)
	phase.set("phase", &sets, &args)
	done.set("cases_done", &sets, &args)
	total.set("cases_total", &sets, &args)
	seq.set("progress_seq", &sets, &args)
	finished.set("finished_at", &sets, &args)
	switch {
	case len(renews) == 0:
		sets = append(sets, "lease_until = NULL")
	case len(results) == 0:
		sets = append(sets, "lease_until = NOW(6) + INTERVAL ? MICROSECOND")
		args = append(args, micros(ttl))
	default:
		sets = append(sets, "lease_until = CASE id"+lease.text.String()+" ELSE NOW(6) + INTERVAL ? MICROSECOND END")
		args = append(append(args, lease.args...), micros(ttl))
	}
	sets = append(sets, "updated_at = NOW(6)")
	slices.Sort(ids)
	idList, idArgs := inList(ids)
	q = `UPDATE judge_job SET ` + strings.Join(sets, ",\n   ") + `
	 WHERE id IN (` + idList + `) AND (id, lease_epoch, node_id, session_epoch) IN (` + fence.String() + `)
	   AND state = 'RUNNING' AND lease_until > NOW(6)
	   AND EXISTS (SELECT 1 FROM judge_node n
	               WHERE n.id = judge_job.node_id AND n.session_epoch = judge_job.session_epoch AND n.revoked_at IS NULL)`
	return q, append(append(args, idArgs...), fa...), len(ids)
}

// inList renders "?, ?, …" and its arguments.
func inList(ids []int64) (string, []any) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", "), args
}

// complete records the result of a lease. Fencing (DESIGN §5): if this
// (job, lease epoch) already has a receipt, the same digest answers
// ALREADY_COMMITTED and a different one ErrResultConflict — checked before
// anything about expiry. Otherwise the lease must still own a RUNNING job that
// is its submission's current job. Result, job state, attempt receipt and
// settlement event commit together.
func (s *Store) complete(ctx context.Context, sess NodeSession, jobID, leaseEpoch int64, res Result) (CompleteResponse, error) {
	p, err := s.prepareResult(ctx, sess, jobID, leaseEpoch, res)
	if err != nil {
		return CompleteResponse{}, err
	}
	return s.completePrepared(ctx, sess, jobID, leaseEpoch, res, p)
}

// completePrepared is complete after prepareResult: the lease writer for a
// fast result, completeSlow for the rest and for a fast one fenced out.
func (s *Store) completePrepared(ctx context.Context, sess NodeSession, jobID, leaseEpoch int64, res Result, p preparedResult) (CompleteResponse, error) {
	if p.fast != nil {
		done, err := s.writer.do(ctx, leaseWrite{result: p.fast})
		if err != nil {
			return CompleteResponse{}, err
		}
		if done {
			return CompleteResponse{Disposition: Accepted, JobState: StateCompleted}, nil
		}
	}
	return s.completeSlow(ctx, sess, jobID, leaseEpoch, res, p.cases, p.body, p.digest)
}

// preparedResult is a result checked before anything is written: its
// normalized body and digest, its case counts, and, for a verdict of a
// business job (the common case), the fast completion that commits it
// without completeSlow's locking reads when its fence holds.
type preparedResult struct {
	body   []byte
	digest string
	cases  caseCounts
	fast   *fastResult
}

func (s *Store) prepareResult(ctx context.Context, sess NodeSession, jobID, leaseEpoch int64, res Result) (preparedResult, error) {
	var p preparedResult
	if err := res.validateShape(); err != nil {
		return p, err
	}
	var err error
	if p.body, p.digest, err = res.Normalize(); err != nil {
		return p, err
	}
	if len(p.body) > s.cfg.MaxResultBytes {
		return p, invalid("result", "is %d bytes, above %d", len(p.body), s.cfg.MaxResultBytes)
	}
	facts, err := s.jobFacts(ctx, jobID)
	if err != nil {
		return p, err
	}
	if res.Outcome != OutcomeVerdict {
		return p, nil
	}
	// Validate before anything is written (manifests are immutable).
	m, err := s.Manifest(ctx, facts.manifestID)
	if err != nil {
		return p, err
	}
	if err := checkAgainst(m, *res.Verdict); err != nil {
		return p, err
	}
	p.cases = countCases(m, *res.Verdict)
	if facts.kind != KindSubmission {
		return p, nil
	}
	payload, err := json.Marshal(SettlementPayload{JobID: strconv.FormatInt(jobID, 10), SubmissionType: facts.typ,
		SubmissionID: facts.sid, Generation: facts.generation, Status: res.Verdict.Status, Result: p.body})
	if err != nil {
		return p, fmt.Errorf("store: settle: %w", err)
	}
	p.fast = &fastResult{sess: sess, jobID: jobID, leaseEpoch: leaseEpoch, f: facts,
		status: res.Verdict.Status, cases: p.cases, body: p.body, digest: p.digest, payload: payload}
	return p, nil
}

// caseCounts are what a finished job reports as casesDone/casesTotal.
type caseCounts struct{ done, total int }

// countCases: done is the number of cases the verdict judged (a verdict may
// stop at the first failing case), total the manifest's (at least done).
func countCases(m manifest.Manifest, v VerdictResult) caseCounts {
	return caseCounts{done: len(v.Cases), total: max(len(m.Cases), len(v.Cases))}
}

// jobFacts are the fields of a job that never change after enqueue.
type jobFacts struct {
	typ, sid   string
	manifestID int64
	kind       JobKind
	pool       string
	generation int
}

func (s *Store) jobFacts(ctx context.Context, jobID int64) (jobFacts, error) {
	if f, ok := s.facts.get(jobID); ok {
		return f, nil
	}
	var f jobFacts
	err := s.db.QueryRowContext(ctx,
		`SELECT submission_type, submission_id, manifest_id, kind, pool, generation FROM judge_job WHERE id = ?`, jobID).Scan(
		&f.typ, &f.sid, &f.manifestID, &f.kind, &f.pool, &f.generation)
	if errors.Is(err, sql.ErrNoRows) {
		return f, fmt.Errorf("job %d: %w", jobID, ErrNotFound)
	}
	if err != nil {
		return f, fmt.Errorf("store: complete: %w", err)
	}
	s.facts.put(jobID, f)
	return f, nil
}

// fastResult is a verdict for a live lease of a business job: the common
// case, committed without the locking reads of completeSlow.
type fastResult struct {
	sess              NodeSession
	jobID, leaseEpoch int64
	f                 jobFacts
	status            string
	cases             caseCounts
	body              []byte
	digest            string
	payload           []byte
}

// byJobID orders fast results by job id: the lock order of leaseUpdate.
func byJobID(a, b fastResult) int { return cmp.Compare(a.jobID, b.jobID) }

// errFenced says a fast completion's fencing did not hold for some item;
// nothing was written, and the slow path works out the answer.
var errFenced = errors.New("fast completion fenced out")

// completeFast commits one verdict alone; done is false when its fencing did
// not hold (nothing written).
func (s *Store) completeFast(ctx context.Context, r fastResult) (done bool, err error) {
	err = s.inScripts(ctx, func(c *scriptConn) error { return s.leaseScripts(ctx, c, nil, []fastResult{r}) })
	if errors.Is(err, errFenced) {
		return false, nil
	}
	return err == nil, err
}

// completeBatch commits concurrent fast completions in one transaction: one
// fenced UPDATE of all their jobs and attempts, one multi-row event INSERT,
// one commit. If any item's fencing fails the whole batch rolls back and each
// item is retried alone, so every item gets exactly the answer it would get
// by itself. A job that appears twice in a batch goes alone.
func (s *Store) completeBatch(ctx context.Context, calls []*batchCall[leaseWrite, bool]) {
	seen := make(map[int64]bool, len(calls))
	var batch, alone []*batchCall[leaseWrite, bool]
	for _, c := range calls {
		if seen[c.req.result.jobID] {
			alone = append(alone, c)
			continue
		}
		seen[c.req.result.jobID] = true
		batch = append(batch, c)
	}
	if len(batch) > 1 {
		// Job-id order: batches lock their rows in one order.
		slices.SortFunc(batch, func(a, b *batchCall[leaseWrite, bool]) int {
			return cmp.Compare(a.req.result.jobID, b.req.result.jobID)
		})
		items := make([]fastResult, len(batch))
		for i, c := range batch {
			items[i] = *c.req.result
		}
		if err := s.inScripts(ctx, func(c *scriptConn) error { return s.leaseScripts(ctx, c, nil, items) }); err == nil {
			s.stats.batches.Add(1)
			for _, c := range batch {
				c.resp = true
			}
			batch = nil
		}
	}
	for _, c := range append(batch, alone...) {
		c.resp, c.err = s.completeFast(ctx, *c.req.result)
	}
}

// leaseScripts renews renews and completes items (distinct jobs, items in
// job-id order, at least one) on c, in two round trips: (begin, the
// leaseUpdate of all their jobs, one UPDATE of the items' attempts) with
// each statement's row count, then (one event INSERT, commit). Unless the
// job UPDATE changed every job (and the attempts UPDATE every attempt) it
// returns errFenced and inScripts rolls back.
func (s *Store) leaseScripts(ctx context.Context, c *scriptConn, renews []renewCall, items []fastResult) error {
	jobs, jargs, want := leaseUpdate(s.cfg.LeaseTTL, renews, items)
	aq, aargs := attemptReceipts(items)
	sc := s.begin(&script{}).exec(jobs, jargs...).exec(aq, aargs...)
	n, err := c.counts(ctx, sc)
	if err != nil {
		return fmt.Errorf("store: complete: %w", err)
	}
	if len(n) < 2 || n[len(n)-2] != int64(want) || n[len(n)-1] != int64(len(items)) {
		return errFenced
	}
	q, qargs, err := settlementSQL(settlementRows(items))
	if err != nil {
		return err
	}
	if err := c.send(ctx, (&script{}).exec(q, qargs...).exec(`COMMIT`)); err != nil {
		return fmt.Errorf("store: complete: settle: %w", err)
	}
	return nil
}

// fenceFacts is what completeSlow read under its locks about one result.
type fenceFacts struct {
	jobID, leaseEpoch int64
	sess              NodeSession
	digest            string
	// The attempt row of (job, lease epoch), if the lease was ever granted.
	attemptGranted bool
	attemptNode    int64
	hasReceipt     bool
	receipt        string
	// The node now.
	nodeRevoked bool
	nodeEpoch   int64
	// The submission's current job.
	current int64
	// The job now.
	state         JobState
	jobLeaseEpoch int64
	jobNode       sql.NullInt64
	jobSession    sql.NullInt64
	live          bool
}

// fenceResult is the fencing decision for a result (DESIGN §5), apart from
// the SQL so it can be tested as a table: nil and committed=false accept it;
// committed=true answers ALREADY_COMMITTED; otherwise the error says why it
// is refused. The receipt is checked before anything about expiry or
// ownership now, so a resent result of a committed lease always gets the
// same answer.
func fenceResult(f fenceFacts) (committed bool, err error) {
	switch {
	case !f.attemptGranted:
		return false, fmt.Errorf("job %d lease %d was never granted: %w", f.jobID, f.leaseEpoch, ErrLeaseLost)
	case f.attemptNode != f.sess.NodeID:
		return false, fmt.Errorf("job %d lease %d belongs to another node: %w", f.jobID, f.leaseEpoch, ErrLeaseLost)
	case f.hasReceipt && f.receipt == f.digest:
		return true, nil
	case f.hasReceipt:
		return false, fmt.Errorf("job %d lease %d: %w", f.jobID, f.leaseEpoch, ErrResultConflict)
	case f.nodeRevoked:
		return false, fmt.Errorf("node %d: %w", f.sess.NodeID, ErrNodeRevoked)
	case f.nodeEpoch != f.sess.SessionEpoch:
		return false, fmt.Errorf("node %d: %w", f.sess.NodeID, ErrSessionSuperseded)
	case f.state == StateCancelled && f.jobLeaseEpoch == f.leaseEpoch && f.current == f.jobID:
		return false, fmt.Errorf("job %d: %w", f.jobID, ErrJobCancelled)
	case f.current != f.jobID:
		return false, fmt.Errorf("job %d: %w", f.jobID, ErrSuperseded)
	case f.state != StateRunning || f.jobLeaseEpoch != f.leaseEpoch || !f.jobNode.Valid || f.jobNode.Int64 != f.sess.NodeID ||
		f.jobSession.Int64 != f.sess.SessionEpoch || !f.live:
		return false, fmt.Errorf("job %d lease %d: %w", f.jobID, f.leaseEpoch, ErrLeaseLost)
	}
	return false, nil
}

// completeSlow takes the locks one by one in the documented order and
// answers every case: already committed, conflict, lost, cancelled,
// superseded, infrastructure errors, CHECK jobs.
func (s *Store) completeSlow(ctx context.Context, sess NodeSession, jobID, leaseEpoch int64, res Result, cases caseCounts, body []byte, digest string) (CompleteResponse, error) {
	var out CompleteResponse
	var requeuedPool string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		requeuedPool = ""
		var typ, sid string
		var manifestID int64
		err := tx.QueryRowContext(ctx,
			`SELECT submission_type, submission_id, manifest_id FROM judge_job WHERE id = ?`, jobID).Scan(&typ, &sid, &manifestID)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("job %d: %w", jobID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: complete: %w", err)
		}
		// Lock order: node → job → attempt (the pointer, which comes between
		// them, is not needed here). The node is locked in share mode: it
		// only has to hold still against a new session or a revoke (which
		// take it exclusively); results of one node don't exclude each other.
		var nodeEpoch int64
		var revoked bool
		err = tx.QueryRowContext(ctx,
			`SELECT session_epoch, revoked_at IS NOT NULL FROM judge_node WHERE id = ? LOCK IN SHARE MODE`, sess.NodeID).Scan(&nodeEpoch, &revoked)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("node %d: %w", sess.NodeID, ErrUnauthenticated)
		}
		if err != nil {
			return fmt.Errorf("store: complete: node: %w", err)
		}
		var j struct {
			state        JobState
			nodeID       sql.NullInt64
			sessionEpoch sql.NullInt64
			leaseEpoch   int64
			live         bool
			kind         JobKind
			pool         string
			generation   int
			attempts     int
			maxAttempts  int
			started      bool
		}
		// Job, then its attempt for this lease epoch, in one locking read
		// (job → attempt is the lock order).
		var receipt sql.NullString
		var attemptNode sql.NullInt64
		if err := tx.QueryRowContext(ctx,
			`SELECT j.state, j.node_id, j.session_epoch, j.lease_epoch, COALESCE(j.lease_until > NOW(6), FALSE), j.kind,
			        j.pool, j.generation, j.attempt_count, j.max_attempts, j.phase IS NOT NULL, a.receipt_digest, a.node_id
			 FROM judge_job j LEFT JOIN judge_job_attempt a ON a.job_id = j.id AND a.lease_epoch = ?
			 WHERE j.id = ? FOR UPDATE`, leaseEpoch, jobID).Scan(
			&j.state, &j.nodeID, &j.sessionEpoch, &j.leaseEpoch, &j.live, &j.kind, &j.pool,
			&j.generation, &j.attempts, &j.maxAttempts, &j.started, &receipt, &attemptNode); err != nil {
			return fmt.Errorf("store: complete: job: %w", err)
		}
		// The submission's current job is its highest generation. A rejudge
		// locks the job it supersedes before it writes the next generation,
		// so with this job locked the answer cannot change under us.
		var current int64
		if err := tx.QueryRowContext(ctx,
			`SELECT id FROM judge_job WHERE submission_type = ? AND submission_id = ? ORDER BY generation DESC LIMIT 1`,
			typ, sid).Scan(&current); err != nil {
			return fmt.Errorf("store: complete: current generation: %w", err)
		}
		committed, err := fenceResult(fenceFacts{
			jobID: jobID, leaseEpoch: leaseEpoch, sess: sess, digest: digest,
			attemptGranted: attemptNode.Valid, attemptNode: attemptNode.Int64,
			hasReceipt: receipt.Valid, receipt: receipt.String,
			nodeRevoked: revoked, nodeEpoch: nodeEpoch, current: current,
			state: j.state, jobLeaseEpoch: j.leaseEpoch, jobNode: j.nodeID, jobSession: j.sessionEpoch, live: j.live,
		})
		if err != nil {
			return err
		}
		if committed {
			out = CompleteResponse{Disposition: AlreadyCommitted, JobState: j.state}
			return nil
		}
		if res.Outcome == OutcomeVerdict {
			// Job and attempt receipt in one statement.
			if _, err := tx.ExecContext(ctx,
				`UPDATE judge_job j JOIN judge_job_attempt a ON a.job_id = j.id AND a.lease_epoch = ?
				 SET j.state = 'COMPLETED', j.verdict = ?, j.result = ?, j.result_digest = ?, j.cases_done = ?, j.cases_total = ?,
				     j.status_version = j.status_version + 1, j.finished_at = NOW(6), j.updated_at = NOW(6),
				     j.lease_until = NULL,
				     a.outcome = 'COMPLETED', a.receipt_digest = ?, a.ended_at = NOW(6), a.judging_started = TRUE
				 WHERE j.id = ?`, leaseEpoch, res.Verdict.Status, body, digest, cases.done, cases.total, digest, jobID); err != nil {
				return fmt.Errorf("store: complete: job: %w", err)
			}
			out = CompleteResponse{Disposition: Accepted, JobState: StateCompleted}
			return settle(ctx, tx, settlement{jobID: jobID, kind: j.kind, typ: typ, sid: sid, generation: j.generation,
				status: res.Verdict.Status, result: body, nodeID: sess.NodeID})
		}
		// Infrastructure error: retry with backoff while attempts remain. A
		// result counts as an attempt whether or not judging started (the
		// node judged the job's inputs unusable, say); a node that only
		// cannot run it releases the lease instead.
		if err := closeAttempt(ctx, tx, jobID, leaseEpoch, "INFRA_ERROR", res.Error.Code, digest, j.started); err != nil {
			return err
		}
		if j.attempts < j.maxAttempts {
			if err := s.requeueLocked(ctx, tx, jobID, j.attempts, res.Error.Code); err != nil {
				return err
			}
			out = CompleteResponse{Disposition: Accepted, JobState: StateQueued}
			requeuedPool = j.pool
			return bumpPool(ctx, tx, j.pool)
		}
		if err := failLocked(ctx, tx, jobID, res.Error.Code); err != nil {
			return err
		}
		out = CompleteResponse{Disposition: Accepted, JobState: StateFailed}
		return settle(ctx, tx, settlement{jobID: jobID, kind: j.kind, typ: typ, sid: sid, generation: j.generation,
			status: "SYSTEM_ERROR", errorCode: res.Error.Code, nodeID: sess.NodeID})
	})
	if err == nil {
		s.notify(requeuedPool)
	}
	return out, err
}

func closeAttempt(ctx context.Context, tx *sql.Tx, jobID, leaseEpoch int64, outcome, errClass, digest string, started bool) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_job_attempt SET outcome = ?, error_class = NULLIF(?, ''), receipt_digest = NULLIF(?, ''),
		   judging_started = ?, ended_at = NOW(6)
		 WHERE job_id = ? AND lease_epoch = ?`, outcome, errClass, digest, started, jobID, leaseEpoch); err != nil {
		return fmt.Errorf("store: close attempt: %w", err)
	}
	return nil
}

// requeueLocked returns a locked RUNNING job to QUEUED after a backoff.
func (s *Store) requeueLocked(ctx context.Context, tx *sql.Tx, jobID int64, attempts int, errCode string) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_job SET state = 'QUEUED', available_at = NOW(6) + INTERVAL ? MICROSECOND,
		   node_id = NULL, host_group_id = NULL, session_epoch = NULL, lease_until = NULL,
		   last_error_code = ?, status_version = status_version + 1, updated_at = NOW(6)
		 WHERE id = ?`, micros(s.backoff(attempts)), errCode, jobID); err != nil {
		return fmt.Errorf("store: requeue: %w", err)
	}
	return nil
}

func failLocked(ctx context.Context, tx *sql.Tx, jobID int64, errCode string) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_job SET state = 'FAILED', last_error_code = ?, lease_until = NULL,
		   status_version = status_version + 1, finished_at = NOW(6), updated_at = NOW(6)
		 WHERE id = ?`, errCode, jobID); err != nil {
		return fmt.Errorf("store: fail: %w", err)
	}
	return nil
}

// ReapStats counts what one Reap pass did.
type ReapStats struct {
	Requeued int
	Failed   int
	// Silent counts the leases (among Requeued and Failed) taken from nodes
	// that missed their heartbeats before the leases ran out.
	Silent int
}

// reap ends expired leases, and the leases of nodes silent for
// HeartbeatTTL (so a dead node's jobs run again long before their leases
// would run out): each goes back to QUEUED with backoff, or to FAILED when
// its attempts are used up (endLeaseLocked). Candidates are read without
// locks, then each job is re-checked under its lock in its own short
// transaction, skipping rows another replica holds; running it in every
// replica at once is safe. A reaped lease is fenced as always: its node's
// renew answers LOST and its result is refused.
func (s *Store) reap(ctx context.Context) (ReapStats, error) {
	var st ReapStats
	cands, err := s.reapCandidates(ctx)
	if err != nil {
		return st, err
	}
	pools := map[string]bool{}
	for _, c := range cands {
		outcome, pool, err := s.reapOne(ctx, c)
		if err != nil {
			return st, err
		}
		if outcome != "" && c.silent {
			st.Silent++
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

// auditActorControl is the audit actor of what the control plane does by
// itself (a deadline passing), not on an admin's request.
const auditActorControl = "control-plane"

// DrainDeadlineErrorCode is the error code a job taken back at a drain
// deadline carries (last_error_code) and its attempt's error class.
const DrainDeadlineErrorCode = "DRAIN_DEADLINE"

// DrainExpiry counts what one ExpireDrainDeadlines pass did.
type DrainExpiry struct {
	// Nodes disabled because their drain deadline passed.
	Nodes int
	// Requeued leases taken back from them.
	Requeued int
}

// ExpireDrainDeadlines enforces drain deadlines (admin API `deadlineSeconds`,
// like `nomad node drain -deadline`): a DRAINING node whose deadline has
// passed loses its remaining leases — each attempt is closed as REVOKED, the
// job goes back to QUEUED at once with its attempt not counted toward
// max_attempts — and becomes DISABLED; each step is audited. The lease epoch
// stays, so the next claim bumps it and the old lease's renew and result are
// refused (fencing). Candidates are read without locks, then each node is
// re-checked under the lock order host group → node → job; running it in
// every replica at once is safe.
func (s *Store) ExpireDrainDeadlines(ctx context.Context) (DrainExpiry, error) {
	var st DrainExpiry
	ids, err := queryAll(ctx, s.db, scanID,
		`SELECT id FROM judge_node WHERE desired_state = 'DRAINING' AND drain_deadline_at <= NOW(6)
		 ORDER BY drain_deadline_at, id LIMIT ?`, s.cfg.ReapBatch)
	if err != nil {
		return st, fmt.Errorf("store: drain deadlines: candidates: %w", err)
	}
	pools := map[string]bool{}
	for _, nodeID := range ids {
		var requeued []int64
		var pool string
		var disabled bool
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			requeued, disabled = nil, false
			var groupID int64
			if err := tx.QueryRowContext(ctx, `SELECT host_group_id FROM judge_node WHERE id = ?`, nodeID).Scan(&groupID); err != nil {
				return fmt.Errorf("store: drain deadline: node %d: %w", nodeID, err)
			}
			if err := tx.QueryRowContext(ctx, `SELECT id FROM judge_host_group WHERE id = ? FOR UPDATE`, groupID).Scan(&groupID); err != nil {
				return fmt.Errorf("store: drain deadline: lock host group: %w", err)
			}
			err := tx.QueryRowContext(ctx,
				`SELECT pool FROM judge_node
				 WHERE id = ? AND desired_state = 'DRAINING' AND drain_deadline_at <= NOW(6) FOR UPDATE`, nodeID).Scan(&pool)
			if errors.Is(err, sql.ErrNoRows) {
				return nil // re-enabled, re-drained or disabled meanwhile
			}
			if err != nil {
				return fmt.Errorf("store: drain deadline: lock node: %w", err)
			}
			type lease struct {
				jobID, epoch int64
				pool         string
				started      bool
			}
			leases, err := queryAll(ctx, tx, func(sc rowScanner) (lease, error) {
				var l lease
				return l, sc.Scan(&l.jobID, &l.epoch, &l.pool, &l.started)
			}, `SELECT id, lease_epoch, pool, phase IS NOT NULL FROM judge_job WHERE node_id = ? AND state = 'RUNNING' ORDER BY id FOR UPDATE`, nodeID)
			if err != nil {
				return fmt.Errorf("store: drain deadline: leases: %w", err)
			}
			nodePools := map[string]bool{}
			for _, l := range leases {
				if err := closeAttempt(ctx, tx, l.jobID, l.epoch, "REVOKED", DrainDeadlineErrorCode, "", l.started); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx,
					`UPDATE judge_job SET state = 'QUEUED', available_at = NOW(6),
					   node_id = NULL, host_group_id = NULL, session_epoch = NULL, lease_until = NULL,
					   attempt_count = GREATEST(attempt_count - 1, 0), last_error_code = ?,
					   status_version = status_version + 1, updated_at = NOW(6)
					 WHERE id = ?`, DrainDeadlineErrorCode, l.jobID); err != nil {
					return fmt.Errorf("store: drain deadline: requeue job %d: %w", l.jobID, err)
				}
				if err := audit(ctx, tx, auditActorControl, "job.lease_revoked", nodeID, l.jobID, "drain deadline passed",
					map[string]any{"leaseEpoch": l.epoch, "counted": false}); err != nil {
					return err
				}
				requeued = append(requeued, l.jobID)
				pools[l.pool], nodePools[l.pool] = true, true
			}
			if _, err := tx.ExecContext(ctx,
				`UPDATE judge_node SET desired_state = 'DISABLED', drain_deadline_at = NULL, revision = revision + 1,
				   updated_at = NOW(6) WHERE id = ?`, nodeID); err != nil {
				return fmt.Errorf("store: drain deadline: disable: %w", err)
			}
			disabled = true
			if err := audit(ctx, tx, auditActorControl, "node.drain_deadline", nodeID, 0,
				"drain deadline passed: remaining leases requeued, node disabled", map[string]any{"requeuedJobs": len(requeued)}); err != nil {
				return err
			}
			return bumpPools(ctx, tx, nodePools)
		})
		if err != nil {
			return st, err
		}
		if disabled {
			st.Nodes++
			st.Requeued += len(requeued)
		}
	}
	for p := range pools {
		s.notify(p)
	}
	return st, nil
}
