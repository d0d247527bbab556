package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/kece-oj/kece/control/manifest"
)

// Observer is told what the store did, after the fact, so the control
// plane's metrics can count it without the store knowing about Prometheus.
// Calls happen on the caller's goroutine with the caller's context (the
// HTTP request's, when there is one) and must not block.
type Observer interface {
	// JobsEnqueued: n new jobs of pool were written (kind: submission,
	// rejudge). For EnqueueTx it is counted when the caller's transaction
	// accepted the rows, before the caller commits.
	JobsEnqueued(ctx context.Context, pool, kind string, n int)
	// ClaimTransaction: one claim transaction of a node of pool ended after
	// d, leasing claimed jobs (err non-nil: it failed).
	ClaimTransaction(ctx context.Context, pool string, claimed int, d time.Duration, err error)
	// JobPickedUp: a job of pool and kind (SUBMISSION, CHECK) was leased
	// after waiting ready for wait (retry backoff not included).
	JobPickedUp(ctx context.Context, pool, kind string, wait time.Duration)
	// ResultRecorded: a result was accepted for a job of pool. outcome is
	// the verdict (AC, WA, …), SYSTEM_ERROR when attempts are exhausted,
	// RETRY when an infrastructure error requeued the job, or
	// ALREADY_COMMITTED for a resent result; code is the infrastructure
	// error code for RETRY and SYSTEM_ERROR.
	ResultRecorded(ctx context.Context, pool, outcome, code string)
	// ResultRefused: a result was refused; reason is a RefusalReason.
	ResultRefused(ctx context.Context, reason string)
	// LeasesExpired: one reaper pass took back expired leases.
	LeasesExpired(ctx context.Context, requeued, failed int, err error)
	// EventsDelivered: n settlement events were acknowledged.
	EventsDelivered(ctx context.Context, n int)
	// EventDeliveryFailed: a push delivery failed; dead when it was the last
	// attempt and the event is now dead-lettered.
	EventDeliveryFailed(ctx context.Context, dead bool)
	// TxRetried: a transaction is retried after a deadlock or lock-wait
	// timeout; code is "deadlock" or "lock_wait_timeout".
	TxRetried(ctx context.Context, code string)
	// DBError: a statement or transaction failed for a database reason
	// (server error, lost connection), not for a business rule.
	DBError(ctx context.Context, op string)
}

// WithObserver returns a copy of s that reports to o.
func (s *Store) WithObserver(o Observer) *Store {
	c := *s
	c.obs = o
	return c.withBatchers()
}

// nopObserver is the default: nothing is counted.
type nopObserver struct{}

func (nopObserver) JobsEnqueued(context.Context, string, string, int)                   {}
func (nopObserver) ClaimTransaction(context.Context, string, int, time.Duration, error) {}
func (nopObserver) JobPickedUp(context.Context, string, string, time.Duration)          {}
func (nopObserver) ResultRecorded(context.Context, string, string, string)              {}
func (nopObserver) ResultRefused(context.Context, string)                               {}
func (nopObserver) LeasesExpired(context.Context, int, int, error)                      {}
func (nopObserver) EventsDelivered(context.Context, int)                                {}
func (nopObserver) EventDeliveryFailed(context.Context, bool)                           {}
func (nopObserver) TxRetried(context.Context, string)                                   {}
func (nopObserver) DBError(context.Context, string)                                     {}

// observer returns the store's observer (never nil).
func (s *Store) observer() Observer {
	if s.obs == nil {
		return nopObserver{}
	}
	return s.obs
}

// isDBError says whether err is the database's fault rather than a business
// rule's: a server error other than the ones the store handles (duplicate
// keys, retried deadlocks are counted apart), a broken connection, a
// network failure.
func isDBError(err error) bool {
	if err == nil {
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number != 1062
	}
	var ne net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, sql.ErrConnDone) || errors.As(err, &ne)
}

// txRetryCode names a retried MySQL error for TxRetried.
func txRetryCode(err error) string {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1205 {
		return "lock_wait_timeout"
	}
	return "deadlock"
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

// RefusalReason classifies why Complete refused a result (a stale or fenced
// result, or an invalid one).
func RefusalReason(err error) string {
	switch {
	case errors.Is(err, ErrResultConflict):
		return RefusedConflict
	case errors.Is(err, ErrLeaseLost):
		return RefusedLeaseLost
	case errors.Is(err, ErrJobCancelled):
		return RefusedCancelled
	case errors.Is(err, ErrSuperseded):
		return RefusedSuperseded
	case errors.Is(err, ErrSessionSuperseded):
		return RefusedSessionSuperseded
	case errors.Is(err, ErrNodeRevoked):
		return RefusedRevoked
	case errors.Is(err, ErrValidation):
		return RefusedInvalid
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrUnauthenticated):
		return RefusedNotFound
	}
	return RefusedOther
}

// observeClaim reports a claim that started at start — the pickups it
// granted and its transaction — to the observer.
func (s *Store) observeClaim(ctx context.Context, jobs []ClaimedJob, start time.Time, err error) {
	o := s.observer()
	pool, granted := "", 0
	for _, j := range jobs {
		pool = j.Pool
		if !j.Replayed { // a replay answers leases granted (and counted) before
			granted++
			o.JobPickedUp(ctx, j.Pool, string(j.Kind), j.ReadyWait)
		}
	}
	o.ClaimTransaction(ctx, pool, granted, time.Since(start), err)
	if isDBError(err) {
		o.DBError(ctx, "claim")
	}
}

// observeResult reports a result's outcome, or why it was refused, to the
// observer.
func (s *Store) observeResult(ctx context.Context, jobID int64, res Result, out CompleteResponse, err error) {
	o := s.observer()
	if err != nil {
		if isDBError(err) {
			o.DBError(ctx, "complete")
		} else {
			o.ResultRefused(ctx, RefusalReason(err))
		}
		return
	}
	pool := ""
	if f, ok := s.facts.get(jobID); ok {
		pool = f.pool
	}
	outcome, code := "", ""
	switch {
	case out.Disposition == AlreadyCommitted:
		outcome = "ALREADY_COMMITTED"
	case out.JobState == StateQueued:
		outcome = "RETRY"
	case out.JobState == StateFailed:
		outcome = "SYSTEM_ERROR"
	case res.Verdict != nil:
		outcome = res.Verdict.Status
	}
	if res.Error != nil && outcome != "ALREADY_COMMITTED" {
		code = res.Error.Code
	}
	o.ResultRecorded(ctx, pool, outcome, code)
}

func (s *Store) observeEnqueueMany(ctx context.Context, reqs []EnqueueRequest, out []EnqueueResult, err error) {
	if isDBError(err) {
		s.observer().DBError(ctx, "enqueue")
	}
	if err != nil {
		return
	}
	pools := map[string]int{}
	for i, r := range out {
		if r.Created {
			pool, _ := manifest.PoolForLanguage(reqs[i].Language)
			pools[pool]++
		}
	}
	for pool, n := range pools {
		s.observer().JobsEnqueued(ctx, pool, "submission", n)
	}
}

func (s *Store) observeEnqueue(ctx context.Context, req EnqueueRequest, res EnqueueResult, err error, kind string) {
	if isDBError(err) {
		s.observer().DBError(ctx, "enqueue")
	}
	if err != nil || !res.Created {
		return
	}
	pool, _ := manifest.PoolForLanguage(req.Language)
	s.observer().JobsEnqueued(ctx, pool, kind, 1)
}
