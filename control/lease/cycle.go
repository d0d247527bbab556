package lease

import (
	"context"
	"fmt"
	"slices"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

// A node's slot cycle is: claim a job, judge it, post its result, claim
// the next. CompleteClaim makes the last two one call and, in the common
// case, one transaction: the claim batch of the node's pool stages the
// cycles' results through the one result writer (resultWrite, complete.go)
// after its host-group and node locks (the lock order, doc.go) and before
// it counts busy slots, so the slots the results free are leased again at
// once. The results are fenced exactly as the lease writer fences them; if
// any result of the batch fails its fence nothing is written and every
// call goes its own way: each result through complete (the writer, then
// its fallback completeSlow, which answers lost, cancelled, conflicting
// and repeated results), then the claim alone.

// CycleResult is one result a node posts with its next claim.
type CycleResult struct {
	JobID      int64
	LeaseEpoch int64
	Result     Result
}

// CycleOutcome answers one CycleResult: its disposition, or why it was
// refused.
type CycleOutcome struct {
	Response CompleteResponse
	Err      error
}

// CycleMax caps the results of one cycle call (a node posts at most one
// per slot).
const CycleMax = 64

// CompleteClaim records results of the session's leases and then, only if
// every result was accepted, leases the node up to freeSlots more jobs, as
// Complete and ClaimRequest would one after the other (requestID makes the
// claim idempotent the same way) — in one transaction when it can. Each
// result is answered in outs, in order; err is bad input to the call as a
// whole (nothing written). A refused result claims nothing: the node learns
// something is off and its claim loop decides. A claim that fails after the
// results committed (the database) answers no jobs; the node claims again.
func (s *Engine) CompleteClaim(ctx context.Context, sess jobdb.NodeSession, results []CycleResult, freeSlots int, requestID string) (outs []CycleOutcome, jobs []ClaimedJob, err error) {
	return s.completeClaim(ctx, sess, results, freeSlots, requestID)
}

func (s *Engine) completeClaim(ctx context.Context, sess jobdb.NodeSession, results []CycleResult, freeSlots int, requestID string) ([]CycleOutcome, []ClaimedJob, error) {
	if len(results) > CycleMax {
		return nil, nil, jobdb.Invalid("results", "%d results in one call, above %d", len(results), CycleMax)
	}
	if err := checkClaimRequestID(requestID); err != nil {
		return nil, nil, err
	}
	seen := make(map[int64]bool, len(results))
	for _, r := range results {
		if seen[r.JobID] {
			return nil, nil, jobdb.Invalid("results", "job %d appears twice", r.JobID)
		}
		seen[r.JobID] = true
	}
	outs := make([]CycleOutcome, len(results))
	prepared := make([]preparedResult, len(results))
	// alone completes results[i] for each i in at on its own (as Complete)
	// and reports whether any was refused.
	alone := func(at []int) (refused bool) {
		for _, i := range at {
			r := results[i]
			outs[i].Response, outs[i].Err = s.completePrepared(ctx, sess, r.JobID, r.LeaseEpoch, r.Result, prepared[i])
			refused = refused || outs[i].Err != nil
		}
		return refused
	}
	// Results that cannot commit in the claim (refused before anything is
	// written, or not the fast kind) are answered first, so the slots they
	// free count for the claim.
	var fast []fastResult
	var fastAt, slowAt []int
	refused := false
	for i, r := range results {
		var err error
		prepared[i], err = s.prepareResult(ctx, sess, r.JobID, r.LeaseEpoch, r.Result)
		switch {
		case err != nil:
			outs[i].Err, refused = err, true
		case prepared[i].fast == nil || freeSlots <= 0:
			slowAt = append(slowAt, i)
		default:
			fast = append(fast, *prepared[i].fast)
			fastAt = append(fastAt, i)
		}
	}
	if alone(slowAt) || refused || freeSlots <= 0 {
		alone(fastAt)
		return outs, nil, nil
	}
	if len(fast) > 0 {
		place, err := s.nodePlace(ctx, sess.NodeID)
		if err != nil {
			return nil, nil, err
		}
		jobs, err := s.claimers.of(place.pool).Do(ctx, claimCall{sess: sess, free: freeSlots, requestID: requestID,
			group: place.group, pool: place.pool, results: fast})
		if err == nil {
			for _, i := range fastAt {
				outs[i].Response = CompleteResponse{Disposition: Accepted, JobState: jobdb.StateCompleted}
			}
			return outs, jobs, nil
		}
		if ctx.Err() != nil {
			// The caller is gone (a node that moved to another replica
			// abandons its calls here): say so, not what the transaction
			// was cut off with, which would read as a server fault (500).
			return nil, nil, fmt.Errorf("store: result and claim: %w", ctx.Err())
		}
		// Fenced out, a stale session, or a failed transaction whose commit
		// may or may not have happened: each result on its own says which
		// (a committed one answers ALREADY_COMMITTED), then the claim.
		if alone(fastAt) {
			return outs, nil, nil
		}
	}
	jobs, err := s.claim(ctx, sess, freeSlots, requestID)
	if err != nil {
		// The results are committed; the node's claim loop claims again.
		if jobdb.IsDBError(err) {
			s.db.Observer().DBError(ctx, "claim")
		}
		return outs, nil, nil
	}
	return outs, jobs, nil
}

// cycleResults are the results of all calls, in job-id order (the lock
// order of leaseUpdate).
func cycleResults(calls []claimCall) []fastResult {
	var out []fastResult
	for _, c := range calls {
		out = append(out, c.results...)
	}
	slices.SortFunc(out, byJobID)
	return out
}
