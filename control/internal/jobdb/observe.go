package jobdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"net"
	"time"

	"github.com/go-sql-driver/mysql"
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

// Observer returns the store's observer (never nil).
func (s *Core) Observer() Observer {
	if s.Obs == nil {
		return nopObserver{}
	}
	return s.Obs
}

// IsDBError says whether err is the database's fault rather than a business
// rule's: a server error other than the ones the store handles (duplicate
// keys, retried deadlocks are counted apart), a broken connection, a
// network failure.
func IsDBError(err error) bool {
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
