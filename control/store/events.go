package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

// Event is one settlement event leased to a consumer: one consumer group's
// row of a settlement (every group has its own row, id and delivery state).
type Event struct {
	ID             int64
	JobID          int64
	EventType      string
	ConsumerGroup  string
	SubmissionType string
	SubmissionID   string
	Generation     int
	Payload        []byte
	// DeliveryAttempt counts claims of this event, this one included.
	DeliveryAttempt int
	CreatedAt       time.Time
}

// Event delivery states.
const (
	EventPending   = "PENDING"
	EventDelivered = "DELIVERED"
	EventDead      = "DEAD"
)

// eventDue is the condition of a pending event that may be delivered now:
// its next attempt has come and it holds no unexpired consumer lease. The
// lease is kept in lease_until, outside ix_event_ready, so leasing an event
// rewrites no index entry (migration 00016); the index range still ends at
// next_attempt_at, and leased rows inside it are passed over.
const eventDue = ` AND next_attempt_at <= NOW(6) AND (lease_until IS NULL OR lease_until <= NOW(6))`

// ClaimEvents leases up to max pending events of scope (one consumer
// group, the types its caller may see) to consumer for lease. Rows are taken
// with SKIP LOCKED in (next attempt, id) order, not after an id cursor, so an
// event whose id committed late is still delivered; an event whose consumer
// lease runs out without an ack is delivered again. Other groups' rows of the
// same settlements are untouched.
func (s *Events) ClaimEvents(ctx context.Context, scope EventScope, consumer string, max int, lease time.Duration) ([]Event, error) {
	if consumer == "" || len(consumer) > 128 {
		return nil, jobdb.Invalid("consumer", "must be 1..128 characters")
	}
	if max < 1 || max > 100 {
		return nil, jobdb.Invalid("max", "must be 1..100")
	}
	if lease < time.Second || lease > time.Hour {
		return nil, jobdb.Invalid("leaseMs", "must be 1000..3600000")
	}
	where, wargs := scope.where()
	// The candidates are read without locks, in (next attempt, id) order: a
	// consumer that polls an empty outbox costs this one plain read, not a
	// transaction. They are then locked by primary key with SKIP LOCKED and
	// checked again on their latest versions. A locking read of the ready
	// index's range would visit, lock and release each entry purge has not
	// removed yet (events acknowledged moments ago), which the plain read
	// passes cheaply (docs/scheduling.md, "Candidates read, then locked").
	cand, err := jobdb.QueryAll(ctx, s.db.Pool, jobdb.ScanID,
		`SELECT id FROM judge_settlement_event
		  WHERE state = 'PENDING' AND`+where+eventDue+` ORDER BY next_attempt_at, id LIMIT ?`, append(wargs, max)...)
	if err != nil {
		return nil, fmt.Errorf("store: claim events: %w", err)
	}
	if len(cand) == 0 {
		return nil, nil
	}
	const columns = `SELECT id, job_id, event_type, consumer_group, submission_type, submission_id, generation, payload, attempts, created_at
		 FROM judge_settlement_event`
	// Two round trips: (begin, the candidates locked with SKIP LOCKED, read
	// whole), then (their lease, commit). A row is locked from the read to
	// the commit, so the attempt it is given is its stored count plus one.
	// Candidates another consumer took or holds meanwhile are passed over,
	// and the rest is then taken by the locking scan (a third round trip,
	// only then).
	var out []Event
	err = s.db.InScripts(ctx, func(c *jobdb.ScriptConn) error {
		out = nil
		read := func(r jobdb.RowScanner) error {
			var e Event
			if err := r.Scan(&e.ID, &e.JobID, &e.EventType, &e.ConsumerGroup, &e.SubmissionType, &e.SubmissionID, &e.Generation,
				&e.Payload, &e.DeliveryAttempt, &e.CreatedAt); err != nil {
				return err
			}
			e.DeliveryAttempt++
			out = append(out, e)
			return nil
		}
		in, args := jobdb.InList(cand)
		sc := s.db.Begin(&jobdb.Script{}).Rows(columns+` FORCE INDEX (PRIMARY)
			 WHERE id IN (`+in+`) AND state = 'PENDING' AND`+where+eventDue+` FOR UPDATE SKIP LOCKED`, append(args, wargs...)...)
		if err := c.Send(ctx, sc, read); err != nil {
			return fmt.Errorf("store: claim events: %w", err)
		}
		if len(out) < len(cand) {
			notIn, nargs := jobdb.NotIn(eventIDs(out))
			scan := (&jobdb.Script{}).Rows(columns+`
				 WHERE state = 'PENDING' AND`+where+eventDue+notIn+`
				 ORDER BY next_attempt_at, id LIMIT ? FOR UPDATE SKIP LOCKED`, slices.Concat(wargs, nargs, []any{max - len(out)})...)
			if err := c.Send(ctx, scan, read); err != nil {
				return fmt.Errorf("store: claim events: %w", err)
			}
		}
		ids := eventIDs(out)
		rest := &jobdb.Script{}
		if len(ids) > 0 {
			in, args := jobdb.InList(ids)
			rest.Exec(`UPDATE judge_settlement_event SET consumer = ?, attempts = attempts + 1,
			   lease_until = NOW(6) + INTERVAL ? MICROSECOND
			 WHERE id IN (`+in+`)`, append([]any{consumer, jobdb.Micros(lease)}, args...)...)
		}
		if err := c.Send(ctx, rest.Exec(`COMMIT`)); err != nil {
			return fmt.Errorf("store: claim events: %w", err)
		}
		slices.SortFunc(out, func(a, b Event) int { return cmp.Compare(a.ID, b.ID) })
		return nil
	})
	return out, err
}

// eventIDs lists the events' ids.
func eventIDs(evs []Event) []int64 {
	return jobdb.IDs(evs, func(e Event) int64 { return e.ID })
}

// ackEvents marks events delivered. Only the consumer that holds the current
// lease of an event in scope may acknowledge it; the count of acknowledged
// events is returned (an event re-leased to another consumer, or another
// group's row, is not counted).
func (s *core) ackEvents(ctx context.Context, scope EventScope, consumer string, ids []int64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	if len(ids) > 100 {
		return 0, jobdb.Invalid("eventIds", "at most 100 per call")
	}
	in, args := jobdb.InList(ids)
	where, wargs := scope.where()
	r, err := s.db.Pool.ExecContext(ctx,
		`UPDATE judge_settlement_event SET state = 'DELIVERED', delivered_at = NOW(6)
		 WHERE id IN (`+in+`) AND state = 'PENDING' AND consumer = ? AND`+where,
		append(append(args, consumer), wargs...)...)
	if err != nil {
		return 0, fmt.Errorf("store: ack events: %w", err)
	}
	n, _ := r.RowsAffected()
	return int(n), nil
}

// AckOutcome says, per event id, whether an acknowledgement took effect.
type AckOutcome struct {
	// Acked: delivered and last leased to this consumer (now or by an
	// earlier acknowledgement — acknowledging is idempotent).
	Acked []int64
	// NotHeld: unknown ids, events leased to another consumer or dead, and
	// rows outside the caller's scope (another group's, another type's).
	NotHeld []int64
}

// AckEventsFor acknowledges events like AckEvents and reports each id.
func (s *Events) AckEventsFor(ctx context.Context, scope EventScope, consumer string, ids []int64) (AckOutcome, error) {
	var out AckOutcome
	if len(ids) == 0 {
		return out, nil
	}
	if _, err := s.AckEvents(ctx, scope, consumer, ids); err != nil {
		return out, err
	}
	in, args := jobdb.InList(ids)
	where, wargs := scope.where()
	rows, err := s.db.Pool.QueryContext(ctx,
		`SELECT id FROM judge_settlement_event WHERE id IN (`+in+`) AND state = 'DELIVERED' AND consumer = ? AND`+where,
		append(append(args, consumer), wargs...)...)
	if err != nil {
		return out, fmt.Errorf("store: ack events: %w", err)
	}
	defer rows.Close()
	acked := make(map[int64]bool, len(ids))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return out, fmt.Errorf("store: ack events: %w", err)
		}
		acked[id] = true
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("store: ack events: %w", err)
	}
	seen := make(map[int64]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if acked[id] {
			out.Acked = append(out.Acked, id)
		} else {
			out.NotHeld = append(out.NotHeld, id)
		}
	}
	return out, nil
}

// failEventDelivery records a failed push delivery of a row in scope: retry
// after backoff, or DEAD once maxAttempts deliveries failed (visible to
// admins). Other groups' rows of the settlement keep their own state.
func (s *core) failEventDelivery(ctx context.Context, scope EventScope, consumer string, id int64, reason string, retryIn time.Duration, maxAttempts int) error {
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	where, wargs := scope.where()
	_, err := s.db.Pool.ExecContext(ctx,
		`UPDATE judge_settlement_event
		 SET state = IF(attempts >= ?, 'DEAD', 'PENDING'), last_error = ?,
		     next_attempt_at = NOW(6) + INTERVAL ? MICROSECOND, lease_until = NULL
		 WHERE id = ? AND state = 'PENDING' AND consumer = ? AND`+where,
		append([]any{maxAttempts, reason, jobdb.Micros(retryIn), id, consumer}, wargs...)...)
	if err != nil {
		return fmt.Errorf("store: fail event delivery: %w", err)
	}
	return nil
}

// EventRecord is an admin view of one event.
type EventRecord struct {
	Event
	State     string
	Consumer  string
	LastError string
}

// ListEvents lists events in a state, newest first.
func (s *Events) ListEvents(ctx context.Context, state string, limit int) ([]EventRecord, error) {
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	out, err := jobdb.QueryAll(ctx, s.db.Pool, func(r jobdb.RowScanner) (EventRecord, error) {
		var e EventRecord
		err := r.Scan(&e.ID, &e.JobID, &e.EventType, &e.ConsumerGroup, &e.SubmissionType, &e.SubmissionID, &e.Generation,
			&e.Payload, &e.DeliveryAttempt, &e.CreatedAt, &e.State, &e.Consumer, &e.LastError)
		return e, err
	}, `SELECT id, job_id, event_type, consumer_group, submission_type, submission_id, generation, payload, attempts, created_at,
	           state, COALESCE(consumer, ''), COALESCE(last_error, '')
	    FROM judge_settlement_event WHERE state = ? ORDER BY id DESC LIMIT ?`, state, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list events: %w", err)
	}
	return out, nil
}

// ErrEventNotDead: only dead-lettered events can be redelivered. It matches
// ErrConflict too.
var ErrEventNotDead = &ConflictError{Reason: "the event is not dead-lettered"}

// EventFilter narrows ListEventsPage; zero fields match everything.
type EventFilter struct {
	State string
	// ConsumerGroup narrows to one group's rows.
	ConsumerGroup string
	// BeforeID pages backwards from an id (exclusive); 0 starts at the newest.
	BeforeID int64
	Limit    int
}

// EventView is the admin view of an event with its delivery timestamps.
type EventView struct {
	EventRecord
	// NextAttemptAt is when the event is next due: a leased event's lease
	// end, else its next attempt (after a failed push, its backoff).
	NextAttemptAt time.Time
	DeliveredAt   *time.Time
}

const eventViewColumns = `id, job_id, event_type, consumer_group, submission_type, submission_id, generation, payload, attempts, created_at,
  state, COALESCE(consumer, ''), COALESCE(last_error, ''), IF(lease_until > next_attempt_at, lease_until, next_attempt_at), delivered_at`

func scanEventView(sc interface{ Scan(...any) error }) (EventView, error) {
	var e EventView
	err := sc.Scan(&e.ID, &e.JobID, &e.EventType, &e.ConsumerGroup, &e.SubmissionType, &e.SubmissionID, &e.Generation, &e.Payload,
		&e.DeliveryAttempt, &e.CreatedAt, &e.State, &e.Consumer, &e.LastError, &e.NextAttemptAt, &e.DeliveredAt)
	return e, err
}

// ListEventsPage lists settlement events newest first.
func (s *Events) ListEventsPage(ctx context.Context, f EventFilter) ([]EventView, error) {
	q := `SELECT ` + eventViewColumns + ` FROM judge_settlement_event WHERE 1=1`
	var args []any
	if f.State != "" {
		q += ` AND state = ?`
		args = append(args, f.State)
	}
	if f.ConsumerGroup != "" {
		q += ` AND consumer_group = ?`
		args = append(args, f.ConsumerGroup)
	}
	if f.BeforeID > 0 {
		q += ` AND id < ?`
		args = append(args, f.BeforeID)
	}
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 100
	}
	rows, err := s.db.Pool.QueryContext(ctx, q+` ORDER BY id DESC LIMIT ?`, append(args, f.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("store: list events: %w", err)
	}
	defer rows.Close()
	var out []EventView
	for rows.Next() {
		e, err := scanEventView(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list events: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// RedeliverEvent puts a dead-lettered event back into delivery: PENDING, its
// attempt counter cleared, due now. Anything but DEAD is ErrEventNotDead.
func (s *Events) RedeliverEvent(ctx context.Context, eventID int64, actor, reason string) (EventView, error) {
	var out EventView
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var state string
		var jobID int64
		err := tx.QueryRowContext(ctx, `SELECT state, job_id FROM judge_settlement_event WHERE id = ? FOR UPDATE`, eventID).Scan(&state, &jobID)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("event %d: %w", eventID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: redeliver: %w", err)
		}
		if state != EventDead {
			return fmt.Errorf("event %d is %s: %w", eventID, state, ErrEventNotDead)
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_settlement_event SET state = 'PENDING', attempts = 0, consumer = NULL, next_attempt_at = NOW(6),
			   lease_until = NULL
			 WHERE id = ?`, eventID); err != nil {
			return fmt.Errorf("store: redeliver: %w", err)
		}
		if err := jobdb.Audit(ctx, tx, actor, "event.redeliver", 0, jobID, reason, map[string]any{"eventId": eventID}); err != nil {
			return err
		}
		out, err = scanEventView(tx.QueryRowContext(ctx, `SELECT `+eventViewColumns+` FROM judge_settlement_event WHERE id = ?`, eventID))
		if err != nil {
			return fmt.Errorf("store: redeliver: %w", err)
		}
		return nil
	})
	return out, err
}

// AckEvents marks events delivered; see ackEvents.
func (s *Events) AckEvents(ctx context.Context, scope EventScope, consumer string, ids []int64) (int, error) {
	n, err := s.ackEvents(ctx, scope, consumer, ids)
	if n > 0 {
		s.db.Observer().EventsDelivered(ctx, n)
	}
	if jobdb.IsDBError(err) {
		s.db.Observer().DBError(ctx, "ack_events")
	}
	return n, err
}

// FailEventDelivery records a failed push delivery; see failEventDelivery.
func (s *Events) FailEventDelivery(ctx context.Context, scope EventScope, consumer string, id int64, reason string, retryIn time.Duration, maxAttempts int) error {
	err := s.failEventDelivery(ctx, scope, consumer, id, reason, retryIn, maxAttempts)
	if err != nil {
		if jobdb.IsDBError(err) {
			s.db.Observer().DBError(ctx, "fail_event")
		}
		return err
	}
	// Failed deliveries are rare: one primary-key read says whether this was
	// the last attempt.
	var state string
	if qerr := s.db.Pool.QueryRowContext(ctx, `SELECT state FROM judge_settlement_event WHERE id = ?`, id).Scan(&state); qerr == nil {
		s.db.Observer().EventDeliveryFailed(ctx, state == EventDead)
	}
	return nil
}
