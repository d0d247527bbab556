package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
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

// Claim leases up to freeSlots ready jobs of the node's pool to the session;
// see claim. It reports the transaction's latency to the observer.
func (s *Store) Claim(ctx context.Context, sess NodeSession, freeSlots int) ([]ClaimedJob, error) {
	return s.ClaimRequest(ctx, sess, freeSlots, "")
}

// ClaimRequest is Claim made idempotent by the node's claim request id: the
// same id again answers the leases it already granted (see claim).
func (s *Store) ClaimRequest(ctx context.Context, sess NodeSession, freeSlots int, requestID string) ([]ClaimedJob, error) {
	start := time.Now()
	jobs, err := s.claim(ctx, sess, freeSlots, requestID)
	if freeSlots > 0 {
		s.observeClaim(ctx, jobs, start, err)
	}
	return jobs, err
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

// Complete records the result of a lease; see complete. It reports the
// outcome, or why the result was refused, to the observer, and wakes the
// waiters it concerns (wakeups.go).
func (s *Store) Complete(ctx context.Context, sess NodeSession, jobID, leaseEpoch int64, res Result) (CompleteResponse, error) {
	out, err := s.complete(ctx, sess, jobID, leaseEpoch, res)
	s.observeResult(ctx, jobID, res, out, err)
	if err == nil {
		s.notifyResult(ctx, sess, jobID, out, false)
	}
	return out, err
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

// Reap returns expired leases to QUEUED or FAILED; see reap. It reports the
// pass to the observer.
func (s *Store) Reap(ctx context.Context) (ReapStats, error) {
	st, err := s.reap(ctx)
	s.observer().LeasesExpired(ctx, st.Requeued, st.Failed, err)
	if isDBError(err) {
		s.observer().DBError(ctx, "reap")
	}
	return st, err
}

// Enqueue accepts a submission; see enqueue.
func (s *Store) Enqueue(ctx context.Context, req EnqueueRequest) (EnqueueResult, error) {
	res, err := s.enqueue(ctx, req)
	s.observeEnqueue(ctx, req, res, err, "submission")
	return res, err
}

// EnqueueTx enqueues inside the caller's transaction; see enqueueTxPublic.
func (s *Store) EnqueueTx(ctx context.Context, tx *sql.Tx, req EnqueueRequest) (EnqueueResult, error) {
	res, err := s.enqueueTxPublic(ctx, tx, req)
	s.observeEnqueue(ctx, req, res, err, "submission")
	return res, err
}

// EnqueueIdempotent enqueues with an Idempotency-Key; see enqueueIdempotent.
func (s *Store) EnqueueIdempotent(ctx context.Context, tokenID int64, key string, req EnqueueRequest) (EnqueueResult, error) {
	if key == "" {
		return s.Enqueue(ctx, req) // counted there
	}
	res, err := s.enqueueIdempotent(ctx, tokenID, key, req)
	s.observeEnqueue(ctx, req, res, err, "submission")
	return res, err
}

// EnqueueMany accepts many submissions in one transaction; see enqueueMany.
// Created jobs are counted per pool.
func (s *Store) EnqueueMany(ctx context.Context, reqs []EnqueueRequest) ([]EnqueueResult, error) {
	out, err := s.enqueueMany(ctx, reqs)
	s.observeEnqueueMany(ctx, reqs, out, err)
	return out, err
}

// EnqueueManyIdempotent is EnqueueMany behind an Idempotency-Key; see
// enqueueManyIdempotent.
func (s *Store) EnqueueManyIdempotent(ctx context.Context, tokenID int64, key string, reqs []EnqueueRequest) ([]EnqueueResult, error) {
	if key == "" {
		return s.EnqueueMany(ctx, reqs) // counted there
	}
	out, err := s.enqueueManyIdempotent(ctx, tokenID, key, reqs)
	s.observeEnqueueMany(ctx, reqs, out, err)
	return out, err
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

// AckEvents marks events delivered; see ackEvents.
func (s *Store) AckEvents(ctx context.Context, scope EventScope, consumer string, ids []int64) (int, error) {
	n, err := s.ackEvents(ctx, scope, consumer, ids)
	if n > 0 {
		s.observer().EventsDelivered(ctx, n)
	}
	if isDBError(err) {
		s.observer().DBError(ctx, "ack_events")
	}
	return n, err
}

// FailEventDelivery records a failed push delivery; see failEventDelivery.
func (s *Store) FailEventDelivery(ctx context.Context, scope EventScope, consumer string, id int64, reason string, retryIn time.Duration, maxAttempts int) error {
	err := s.failEventDelivery(ctx, scope, consumer, id, reason, retryIn, maxAttempts)
	if err != nil {
		if isDBError(err) {
			s.observer().DBError(ctx, "fail_event")
		}
		return err
	}
	// Failed deliveries are rare: one primary-key read says whether this was
	// the last attempt.
	var state string
	if qerr := s.db.QueryRowContext(ctx, `SELECT state FROM judge_settlement_event WHERE id = ?`, id).Scan(&state); qerr == nil {
		s.observer().EventDeliveryFailed(ctx, state == EventDead)
	}
	return nil
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
		if err := s.db.QueryRowContext(ctx,
			fleetQueueQuery, p).Scan(&q.Queued, &wait); err != nil {
			s.observer().DBError(ctx, "fleet_stats")
			return fs, fmt.Errorf("store: fleet stats: queue: %w", err)
		}
		if wait.Valid && wait.Int64 > 0 {
			q.OldestReadyWait = time.Duration(wait.Int64) * time.Microsecond
		}
		fs.Queues = append(fs.Queues, q)
	}
	running, err := queryAll(ctx, s.db, func(r rowScanner) (QueueStat, error) {
		var q QueueStat
		err := r.Scan(&q.Pool, &q.Running)
		return q, err
	}, fleetRunningQuery)
	if err != nil {
		s.observer().DBError(ctx, "fleet_stats")
		return fs, fmt.Errorf("store: fleet stats: running: %w", err)
	}
	for _, r := range running {
		for i := range fs.Queues {
			if fs.Queues[i].Pool == r.Pool {
				fs.Queues[i].Running = r.Running
			}
		}
	}
	fs.Nodes, err = queryAll(ctx, s.db, func(r rowScanner) (NodeStat, error) {
		var n NodeStat
		err := r.Scan(&n.Pool, &n.State, &n.Online, &n.Nodes, &n.Slots)
		return n, err
	}, fleetNodesQuery, micros(s.cfg.OfflineAfter))
	if err != nil {
		s.observer().DBError(ctx, "fleet_stats")
		return fs, fmt.Errorf("store: fleet stats: nodes: %w", err)
	}
	if err := s.db.QueryRowContext(ctx,
		fleetEventsQuery).Scan(&fs.EventsPending, &fs.EventsDead); err != nil {
		s.observer().DBError(ctx, "fleet_stats")
		return fs, fmt.Errorf("store: fleet stats: events: %w", err)
	}
	return fs, nil
}

// The fleet gauges' statements. Each names the index whose range it walks,
// so a small table in a test and a large one in production get the same
// plan (TestFleetStatsWalkIndexRanges checks it with EXPLAIN).
const (
	fleetQueueQuery = `SELECT COUNT(*), TIMESTAMPDIFF(MICROSECOND, MIN(IF(available_at <= NOW(6), available_at, NULL)), NOW(6))
	 FROM judge_job FORCE INDEX (ix_job_claim) WHERE pool = ? AND state = 'QUEUED' AND required_node_id = 0`
	fleetRunningQuery = `SELECT pool, COUNT(*) FROM judge_job FORCE INDEX (ix_job_lease) WHERE state = 'RUNNING' GROUP BY pool`
	fleetNodesQuery   = `SELECT pool, desired_state, COALESCE(last_heartbeat_at > NOW(6) - INTERVAL ? MICROSECOND, FALSE) AS online,
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

// FleetQueriesForExplain lists the statements FleetStats runs over the large
// tables (the node table has one row per node process).
func FleetQueriesForExplain() []FleetQueryForExplain {
	return []FleetQueryForExplain{
		{Name: "queue", Query: fleetQueueQuery, Index: "ix_job_claim", Args: []any{string(machineapi.PoolCpp)}},
		{Name: "running", Query: fleetRunningQuery, Index: "ix_job_lease"},
		{Name: "events", Query: fleetEventsQuery, Index: "ix_event_ready"},
	}
}
