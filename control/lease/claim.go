package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

// ClaimedJob is one job handed to a node with a fresh lease.
type ClaimedJob struct {
	JobID          int64
	LeaseEpoch     int64
	LeaseRemaining time.Duration
	Kind           jobdb.JobKind
	Pool           string
	SubmissionType string
	SubmissionID   string
	Generation     int
	Language       string
	ManifestID     int64
	Snapshot       []byte
	Attempt        int
	// Slots is how many of the node's slots the job holds while it runs
	// (its slot weight, slots.go).
	Slots int
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
// remember it, and the same request again from the same session answers
// the leases it granted that are still live (extended like a renewal)
// instead of new ones, so a claim answer lost on the way to the node costs
// nothing. A request id that was granted anything never takes new leases:
// once its leases have ended (the node ran them, or they were released or
// expired) it answers nothing, so a stale copy of the claim arriving late
// leases no job that no one waits for. The check runs under the node lock,
// so a retry racing its own original cannot take a second set of jobs.
func (s *Engine) claim(ctx context.Context, sess jobdb.NodeSession, freeSlots int, requestID string) ([]ClaimedJob, error) {
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
	return s.claimers.of(place.pool).Do(ctx, claimCall{sess: sess, free: freeSlots, requestID: requestID, group: place.group, pool: place.pool})
}

// claimCall is one node's claim as the claim batcher queues it; group and
// pool are the node's (cached, fixed at creation).
type claimCall struct {
	sess      jobdb.NodeSession
	free      int
	requestID string
	group     int64
	pool      string
	// results are fast results of the node's leases that commit in the
	// claim's transaction (a cycle, see CompleteClaim).
	results []fastResult
}

// claimBatchers holds one claim batcher per pool: claims of different pools
// never share a transaction (they share no rows). Each runs one batch at a
// time: a second batch of the same pool would queue on the same host-group
// locks, and the calls that arrive meanwhile make the next batch bigger.
// Two batches at once, a batcher per host-group partition, and two at once
// with the slot cycle's results written before the group locks all
// measured slower: docs/scheduling.md, "CPU per job and the machine's idle
// share" and "Three more levers on tmpfs", has the figures.
type claimBatchers struct {
	mu     sync.Mutex
	run    func(context.Context, []*jobdb.BatchCall[claimCall, []ClaimedJob])
	calls  int // Config.ClaimBatchCalls
	linger time.Duration
	m      map[string]*jobdb.Batcher[claimCall, []ClaimedJob]
}

func (c *claimBatchers) of(pool string) *jobdb.Batcher[claimCall, []ClaimedJob] {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[pool]
	if !ok {
		b = jobdb.NewBatcher(c.calls, 1, c.linger, c.run)
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
func (s *Engine) claimBatch(ctx context.Context, calls []*jobdb.BatchCall[claimCall, []ClaimedJob]) {
	type key struct {
		node int64
		req  string
	}
	seen := make(map[key]bool, len(calls))
	var batch, again []*jobdb.BatchCall[claimCall, []ClaimedJob]
	for _, c := range calls {
		k := key{c.Req.sess.NodeID, c.Req.requestID}
		switch {
		case c.Ctx.Err() != nil:
			// Its caller gave up: leasing it jobs now would only strand them.
			c.Err = c.Ctx.Err()
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
		s.claimBatch(ctx, []*jobdb.BatchCall[claimCall, []ClaimedJob]{c})
	}
}

// claimReady is step 1 of claimBatch, then step 2 for the calls that could
// take something.
func (s *Engine) claimReady(ctx context.Context, batch []*jobdb.BatchCall[claimCall, []ClaimedJob]) {
	if !slices.ContainsFunc(batch, func(c *jobdb.BatchCall[claimCall, []ClaimedJob]) bool { return len(c.Req.results) == 0 }) {
		// Every call commits results: the transaction runs whatever the
		// read would say, and checks the sessions under its locks.
		s.claimLocked(ctx, batch)
		return
	}
	ids := make([]int64, len(batch))
	var reqIDs []any
	for i, c := range batch {
		ids[i] = c.Req.sess.NodeID
		if c.Req.requestID != "" {
			reqIDs = append(reqIDs, c.Req.requestID)
		}
	}
	in, args := jobdb.InList(ids)
	replay := `FALSE`
	var replayArgs []any
	if len(reqIDs) > 0 {
		// Any of the batch's request ids at this node: request ids are
		// random per claim, and a false positive only costs the locked check.
		replay = `EXISTS (SELECT 1 FROM judge_job_attempt a
		            WHERE a.node_id = n.id AND a.claim_request_id IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(reqIDs)), ", ") + `)
		              AND a.outcome = 'RUNNING' AND a.started_at > NOW(6) - INTERVAL ? MICROSECOND)`
		replayArgs = append(reqIDs, jobdb.Micros(s.db.Cfg.LeaseTTL))
	}
	type readiness struct {
		id             int64
		epoch          int64
		revoked, ready bool
	}
	rows, err := jobdb.QueryAll(ctx, s.db.Pool, func(r jobdb.RowScanner) (readiness, error) {
		var v readiness
		return v, r.Scan(&v.id, &v.epoch, &v.revoked, &v.ready)
	}, `SELECT n.id, n.session_epoch, n.revoked_at IS NOT NULL,
	        n.pending_checks > 0
	        OR (n.desired_state = 'ENABLED' AND EXISTS (SELECT 1 FROM judge_job j FORCE INDEX (ix_job_claim)
	              WHERE j.pool = ? AND j.state = 'QUEUED' AND j.required_node_id = 0 AND j.available_at <= NOW(6)
	                AND j.required_caps & ~`+jobdb.NodeCapsSQL+` = 0))
	        OR `+replay+`
	 FROM judge_node n WHERE n.id IN (`+in+`)`, append(append([]any{batch[0].Req.pool}, replayArgs...), args...)...)
	if err != nil {
		err = fmt.Errorf("store: claim: ready: %w", jobdb.Classify(err))
		for _, c := range batch {
			c.Err = err
		}
		return
	}
	byNode := make(map[int64]readiness, len(rows))
	for _, r := range rows {
		byNode[r.id] = r
	}
	var ready []*jobdb.BatchCall[claimCall, []ClaimedJob]
	for _, c := range batch {
		r, ok := byNode[c.Req.sess.NodeID]
		if c.Err = jobdb.SessionError(c.Req.sess, ok, r.revoked, r.epoch); c.Err == nil && (r.ready || len(c.Req.results) > 0) {
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
func (s *Engine) claimLocked(ctx context.Context, ready []*jobdb.BatchCall[claimCall, []ClaimedJob]) {
	calls := make([]claimCall, len(ready))
	for i, c := range ready {
		calls[i] = c.Req
	}
	var out []claimAnswer
	err := s.db.InScripts(ctx, func(c *jobdb.ScriptConn) error {
		var err error
		out, err = s.claimTx(ctx, c, calls)
		return err
	})
	if err == nil && len(ready) > 1 {
		s.db.Stats.Batches.Add(1)
	}
	if err != nil && len(ready) > 1 {
		for _, c := range ready {
			s.claimLocked(ctx, []*jobdb.BatchCall[claimCall, []ClaimedJob]{c})
		}
		return
	}
	for i, c := range ready {
		if err != nil {
			c.Err = err
			continue
		}
		c.Resp, c.Err = out[i].jobs, out[i].err
		for _, j := range c.Resp {
			s.facts.Put(j.JobID, jobFacts{typ: j.SubmissionType, sid: j.SubmissionID, manifestID: j.ManifestID,
				kind: j.Kind, pool: j.Pool, generation: j.Generation})
		}
	}
}

// NextReady says how long until the soonest job of the pool that a claim
// could take becomes ready (its retry backoff ends); ok is false when no job
// waits. A long-poll that found nothing sleeps at most that long, so a retry
// is picked up when its backoff ends rather than at the next poll.
func (s *Engine) NextReady(ctx context.Context, pool string, nodeID int64) (d time.Duration, ok bool, err error) {
	var us sql.NullInt64
	err = s.db.Pool.QueryRowContext(ctx,
		`SELECT GREATEST(TIMESTAMPDIFF(MICROSECOND, NOW(6), MIN(j.available_at)), 0)
		 FROM judge_node n JOIN judge_job j ON j.pool = ? AND j.state = 'QUEUED' AND j.required_node_id IN (0, n.id)
		   AND j.required_caps & ~`+jobdb.NodeCapsSQL+` = 0
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

func (s *Engine) nodePlace(ctx context.Context, nodeID int64) (nodePlace, error) {
	if p, ok := s.groups.Get(nodeID); ok {
		return p, nil
	}
	var p nodePlace
	err := s.db.Pool.QueryRowContext(ctx, `SELECT host_group_id, pool FROM judge_node WHERE id = ?`, nodeID).Scan(&p.group, &p.pool)
	if errors.Is(err, sql.ErrNoRows) {
		return p, fmt.Errorf("node %d: %w", nodeID, jobdb.ErrUnauthenticated)
	}
	if err != nil {
		return p, fmt.Errorf("store: node place: %w", err)
	}
	s.groups.Put(nodeID, p)
	return p, nil
}

// Claim leases up to freeSlots ready jobs of the node's pool to the session;
// see claim.
func (s *Engine) Claim(ctx context.Context, sess jobdb.NodeSession, freeSlots int) ([]ClaimedJob, error) {
	return s.ClaimRequest(ctx, sess, freeSlots, "")
}

// ClaimRequest is Claim made idempotent by the node's claim request id: the
// same id again answers the leases it already granted (see claim).
func (s *Engine) ClaimRequest(ctx context.Context, sess jobdb.NodeSession, freeSlots int, requestID string) ([]ClaimedJob, error) {
	return s.claim(ctx, sess, freeSlots, requestID)
}
