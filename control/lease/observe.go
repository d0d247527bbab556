package lease

import (
	"context"
	"errors"
	"time"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

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
func (s *Engine) observeClaim(ctx context.Context, jobs []ClaimedJob, start time.Time, err error) {
	o := s.db.Observer()
	pool, granted := "", 0
	for _, j := range jobs {
		pool = j.Pool
		if !j.Replayed { // a replay answers leases granted (and counted) before
			granted++
			o.JobPickedUp(ctx, j.Pool, string(j.Kind), j.ReadyWait)
		}
	}
	o.ClaimTransaction(ctx, pool, granted, time.Since(start), err)
	if jobdb.IsDBError(err) {
		o.DBError(ctx, "claim")
	}
}

// observeResult reports a result's outcome, or why it was refused, to the
// observer.
func (s *Engine) observeResult(ctx context.Context, jobID int64, res Result, out CompleteResponse, err error) {
	o := s.db.Observer()
	if err != nil {
		if jobdb.IsDBError(err) {
			o.DBError(ctx, "complete")
		} else {
			o.ResultRefused(ctx, RefusalReason(err))
		}
		return
	}
	pool := ""
	if f, ok := s.facts.Get(jobID); ok {
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
	o.ResultRecorded(ctx, pool, outcome, code)
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
