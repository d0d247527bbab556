package lease

import (
	"context"
	"errors"
	"time"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

// Observed is the lease engine as a control-plane replica runs it: a
// decorator that passes each call to the Engine and then reports what it
// did — to the handle's Observer (metrics: claims, pickups, results,
// refusals, reaper passes) and to the handle's Notifier (wake-ups: the
// claim waiters of a pool whose slot came free or that got work back, the
// status waiters of a job that settled). The Engine neither counts nor
// wakes; database faults (retried transactions, a DB error the engine
// swallows) are counted where they happen, in jobdb.
//
// Wake-ups have one owner, the after-commit notifier of the job database
// handle: this decorator for what the lease engine did, the store's
// aggregates for their own commits (an enqueue, a rejudge, a cancel, a new
// boot's session); the HTTP layer wakes no one. The replica
// (control/replica) hands the handle its Notifier, which fans out to the
// long-poll hub and the settlement waiters. Other replicas learn the same
// facts from the pool signal (jobdb.BumpPool) and the settled-jobs poll.
type Observed struct{ *Engine }

// Observe returns e decorated with its handle's observer and notifier.
func Observe(e *Engine) *Observed { return &Observed{e} }

// ClaimRequest is Engine.ClaimRequest, then the transaction's latency and
// the pickups it granted are reported.
func (o *Observed) ClaimRequest(ctx context.Context, sess jobdb.NodeSession, freeSlots int, requestID string) ([]ClaimedJob, error) {
	start := time.Now()
	jobs, err := o.Engine.ClaimRequest(ctx, sess, freeSlots, requestID)
	if freeSlots > 0 {
		o.observeClaim(ctx, jobs, start, err)
	}
	return jobs, err
}

// Claim is ClaimRequest without a request id.
func (o *Observed) Claim(ctx context.Context, sess jobdb.NodeSession, freeSlots int) ([]ClaimedJob, error) {
	return o.ClaimRequest(ctx, sess, freeSlots, "")
}

// Complete is Engine.Complete, then the outcome (or why the result was
// refused) is reported and the waiters it concerns are woken.
func (o *Observed) Complete(ctx context.Context, sess jobdb.NodeSession, jobID, leaseEpoch int64, res Result) (CompleteResponse, error) {
	out, err := o.Engine.Complete(ctx, sess, jobID, leaseEpoch, res)
	o.observeResult(ctx, jobID, res, out, err)
	if err == nil {
		o.notifyResult(ctx, sess, jobID, out, false)
	}
	return out, err
}

// CompleteClaim is Engine.CompleteClaim, then each result and the claim
// are reported as Complete and ClaimRequest report them, and the node's
// pool is woken if a slot came free that the claim did not take again.
func (o *Observed) CompleteClaim(ctx context.Context, sess jobdb.NodeSession, results []CycleResult, freeSlots int, requestID string) (outs []CycleOutcome, jobs []ClaimedJob, err error) {
	start := time.Now()
	outs, jobs, err = o.Engine.CompleteClaim(ctx, sess, results, freeSlots, requestID)
	freed := false
	for i, r := range outs {
		o.observeResult(ctx, results[i].JobID, results[i].Result, r.Response, r.Err)
		if r.Err == nil {
			o.notifyResult(ctx, sess, results[i].JobID, r.Response, true)
			freed = true
		}
	}
	if freed && len(jobs) == 0 {
		// A slot came free and the result's own claim did not take it again.
		o.notifyFreed(ctx, sess.NodeID)
	}
	if freeSlots > 0 {
		o.observeClaim(ctx, jobs, start, err)
	}
	return outs, jobs, err
}

// Release is Engine.Release, then the node's pool is woken: released
// leases free capacity whether or not their jobs were requeued (a requeued
// job is of its node's pool).
func (o *Observed) Release(ctx context.Context, sess jobdb.NodeSession, items []ReleaseItem, reason string) ([]ReleaseResult, error) {
	out, err := o.Engine.Release(ctx, sess, items, reason)
	if err == nil {
		o.notifyFreed(ctx, sess.NodeID)
	}
	return out, err
}

// Reap is Engine.Reap, then the pass is reported and the pools that got
// work back are woken.
func (o *Observed) Reap(ctx context.Context) (ReapStats, error) {
	st, err := o.Engine.Reap(ctx)
	obs := o.db.Observer()
	obs.LeasesExpired(ctx, st.Requeued, st.Failed, err)
	if jobdb.IsDBError(err) {
		obs.DBError(ctx, "reap")
	}
	o.notifyPools(st.Pools)
	return st, err
}

// ExpireDrainDeadlines is Engine.ExpireDrainDeadlines, then the pools that
// got work back are woken.
func (o *Observed) ExpireDrainDeadlines(ctx context.Context) (DrainExpiry, error) {
	st, err := o.Engine.ExpireDrainDeadlines(ctx)
	o.notifyPools(st.Pools)
	return st, err
}

// notifyPools wakes the claim waiters of each pool.
func (o *Observed) notifyPools(pools []string) {
	for _, p := range pools {
		o.db.Notify(p)
	}
}

// Refusal reasons of ResultRefused.
const (
	RefusedLeaseLost         = "lease_lost"
	RefusedConflict          = "result_conflict"
	RefusedCancelled         = "cancelled"
	RefusedSuperseded        = "superseded"
	RefusedSessionSuperseded = "session_superseded"
	RefusedRevoked           = "node_revoked"
	RefusedInvalid           = "invalid"
	RefusedNotFound          = "not_found"
	RefusedOther             = "other"
)

// observeClaim reports a claim that started at start — the pickups it
// granted and its transaction — to the observer.
func (o *Observed) observeClaim(ctx context.Context, jobs []ClaimedJob, start time.Time, err error) {
	obs := o.db.Observer()
	pool, granted := "", 0
	for _, j := range jobs {
		pool = j.Pool
		if !j.Replayed { // a replay answers leases granted (and counted) before
			granted++
			obs.JobPickedUp(ctx, j.Pool, string(j.Kind), j.ReadyWait)
		}
	}
	obs.ClaimTransaction(ctx, pool, granted, time.Since(start), err)
	if jobdb.IsDBError(err) {
		obs.DBError(ctx, "claim")
	}
}

// observeResult reports a result's outcome, or why it was refused, to the
// observer.
func (o *Observed) observeResult(ctx context.Context, jobID int64, res Result, out CompleteResponse, err error) {
	obs := o.db.Observer()
	if err != nil {
		if jobdb.IsDBError(err) {
			obs.DBError(ctx, "complete")
		} else {
			obs.ResultRefused(ctx, RefusalReason(err))
		}
		return
	}
	pool := ""
	if f, ok := o.facts.Get(jobID); ok {
		pool = f.pool
	}
	outcome, code := "", ""
	switch {
	case out.Disposition == AlreadyCommitted:
		outcome = "ALREADY_COMMITTED"
	case out.JobState == jobdb.StateQueued:
		outcome = "RETRY"
	case out.JobState == jobdb.StateFailed:
		outcome = "SYSTEM_ERROR"
	case res.Verdict != nil:
		outcome = res.Verdict.Status
	}
	if res.Error != nil && outcome != "ALREADY_COMMITTED" {
		code = res.Error.Code
	}
	obs.ResultRecorded(ctx, pool, outcome, code)
}

// RefusalReason classifies why Complete refused a result (a stale or fenced
// result, or an invalid one).
func RefusalReason(err error) string {
	switch {
	case errors.Is(err, jobdb.ErrResultConflict):
		return RefusedConflict
	case errors.Is(err, jobdb.ErrLeaseLost):
		return RefusedLeaseLost
	case errors.Is(err, jobdb.ErrJobCancelled):
		return RefusedCancelled
	case errors.Is(err, jobdb.ErrSuperseded):
		return RefusedSuperseded
	case errors.Is(err, jobdb.ErrSessionSuperseded):
		return RefusedSessionSuperseded
	case errors.Is(err, jobdb.ErrNodeRevoked):
		return RefusedRevoked
	case errors.Is(err, jobdb.ErrValidation):
		return RefusedInvalid
	case errors.Is(err, jobdb.ErrNotFound), errors.Is(err, jobdb.ErrUnauthenticated):
		return RefusedNotFound
	}
	return RefusedOther
}

// notifyFreed tells this replica's claim waiters of the node's pool that a
// slot of the node came free (a result, a release). The node's pool is
// cached from its claims; an unknown node wakes no one (its waiters retry
// on their own timer).
func (o *Observed) notifyFreed(ctx context.Context, nodeID int64) {
	if o.db.Notifier == nil {
		return
	}
	if p, err := o.nodePlace(ctx, nodeID); err == nil {
		o.db.Notify(p.pool)
	}
}

// notifyResult wakes after an accepted result: the node's pool — a slot
// came free, unless the result's own claim took it again (claimedAgain),
// or the job went back to the queue (its pool is its node's) — and the
// job's status waiters when it settled.
func (o *Observed) notifyResult(ctx context.Context, sess jobdb.NodeSession, jobID int64, r CompleteResponse, claimedAgain bool) {
	if !claimedAgain || r.JobState == jobdb.StateQueued {
		o.notifyFreed(ctx, sess.NodeID)
	}
	if r.JobState == jobdb.StateCompleted || r.JobState == jobdb.StateFailed {
		o.db.NotifySettled(jobID)
	}
}
