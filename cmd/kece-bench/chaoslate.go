package main

// Stale claim copies (issue 47, item 3): the replicas' fault proxies keep a
// request open after its node gave up, as load balancers do, and the
// late_claims fault holds a few claims back and sends them on once their
// node has claimed again elsewhere with the same request id. A request id
// that was granted leases must never take new ones: the run counts the
// leases a reused request id was granted after its first grant.

import (
	"context"
	"database/sql"
	"time"

	"github.com/kece-oj/kece/worker/faultproxy"
)

// lateClaims makes the proxy of the replica most nodes use hold the next
// 1–3 claims — the claim loop's, or the claim a result carries — for
// 6–12 s before sending them on. Each node gives up on its claim at the
// claim's deadline (a few seconds), claims again on the other replica with
// the same request id and judges what it gets; the held copy reaches the
// replica after that, when the leases its request id was granted have
// ended. The fault lasts until the held claims were sent on (or 20 s
// without such a call).
func (r *chaosRun) lateClaims(ctx context.Context) error {
	rep := r.busiestReplica(ctx)
	path := []string{"/jobs/claim", "/result"}[r.pick(2)]
	times := 1 + r.pick(3)
	hold := time.Duration(6000+r.pick(6000)) * time.Millisecond
	h := rep.proxy.Add(faultproxy.Rule{Method: "POST", PathContains: path, Action: faultproxy.HoldRequest, Times: times, Delay: hold})
	defer rep.proxy.Remove(h)
	select {
	case <-h.Fired():
	case <-time.After(20 * time.Second):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	for end := time.Now().Add(20 * time.Second); h.Hits() < times && time.Now().Before(end) && ctx.Err() == nil; {
		sleepCtx(ctx, 100*time.Millisecond)
	}
	sleepCtx(ctx, hold)
	return nil
}

// lateAnswers sums, over the replicas' proxies, the answers that came
// back after their node had left: requests the replicas handled for no one.
func (r *chaosRun) lateAnswers() int {
	n := 0
	for _, rep := range r.replicas {
		n += rep.proxy.Late()
	}
	return n
}

// staleClaimLeases counts the leases granted to a claim request id after
// its first grant: attempts whose (node, request id) had an attempt that
// started earlier. One grant's attempts share their start (one INSERT, one
// NOW(6)), and a node sends a new request id after every answer it
// receives, so each such lease went to a copy of a claim no one waited for.
func staleClaimLeases(ctx context.Context, db *sql.DB) (n int, err error) {
	err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM judge_job_attempt a
		WHERE a.claim_request_id IS NOT NULL AND EXISTS (SELECT 1 FROM judge_job_attempt b
		  WHERE b.node_id = a.node_id AND b.claim_request_id = a.claim_request_id AND b.started_at < a.started_at)`).Scan(&n)
	return n, err
}
