package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Event is one settlement event leased to a consumer.
type Event struct {
	ID             int64
	JobID          int64
	EventType      string
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

// ClaimEvents leases up to max pending events to consumer for lease. Rows are
// taken with SKIP LOCKED in (next attempt, id) order, not after an id cursor,
// so an event whose id committed late is still delivered; an event whose
// consumer lease runs out without an ack is delivered again.
func (s *Store) ClaimEvents(ctx context.Context, consumer string, max int, lease time.Duration) ([]Event, error) {
	if consumer == "" || len(consumer) > 128 {
		return nil, invalid("consumer", "must be 1..128 characters")
	}
	if max < 1 || max > 100 {
		return nil, invalid("max", "must be 1..100")
	}
	if lease < time.Second || lease > time.Hour {
		return nil, invalid("leaseMs", "must be 1000..3600000")
	}
	var out []Event
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		out = nil
		ids, err := queryAll(ctx, tx, scanID,
			`SELECT id FROM judge_settlement_event
			 WHERE state = 'PENDING' AND next_attempt_at <= NOW(6)
			 ORDER BY next_attempt_at, id LIMIT ? FOR UPDATE SKIP LOCKED`, max)
		if err != nil {
			return fmt.Errorf("store: claim events: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		in, args := inList(ids)
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_settlement_event SET consumer = ?, attempts = attempts + 1,
			   next_attempt_at = NOW(6) + INTERVAL ? MICROSECOND
			 WHERE id IN (`+in+`)`, append([]any{consumer, micros(lease)}, args...)...); err != nil {
			return fmt.Errorf("store: claim events: %w", err)
		}
		out, err = queryAll(ctx, tx, func(r rowScanner) (Event, error) {
			var e Event
			err := r.Scan(&e.ID, &e.JobID, &e.EventType, &e.SubmissionType, &e.SubmissionID, &e.Generation,
				&e.Payload, &e.DeliveryAttempt, &e.CreatedAt)
			return e, err
		}, `SELECT id, job_id, event_type, submission_type, submission_id, generation, payload, attempts, created_at
		    FROM judge_settlement_event WHERE id IN (`+in+`) ORDER BY id`, args...)
		if err != nil {
			return fmt.Errorf("store: claim events: %w", err)
		}
		return nil
	})
	return out, err
}

// ackEvents marks events delivered. Only the consumer that holds the current
// lease of an event may acknowledge it; the count of acknowledged events is
// returned (an event re-leased to another consumer is not counted).
func (s *Store) ackEvents(ctx context.Context, consumer string, ids []int64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	if len(ids) > 100 {
		return 0, invalid("eventIds", "at most 100 per call")
	}
	in, args := inList(ids)
	r, err := s.db.ExecContext(ctx,
		`UPDATE judge_settlement_event SET state = 'DELIVERED', delivered_at = NOW(6)
		 WHERE id IN (`+in+`) AND state = 'PENDING' AND consumer = ?`, append(args, consumer)...)
	if err != nil {
		return 0, fmt.Errorf("store: ack events: %w", err)
	}
	n, _ := r.RowsAffected()
	return int(n), nil
}

// failEventDelivery records a failed push delivery: retry after backoff, or
// DEAD once maxAttempts deliveries failed (visible to admins).
func (s *Store) failEventDelivery(ctx context.Context, consumer string, id int64, reason string, retryIn time.Duration, maxAttempts int) error {
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	_, err := s.db.ExecContext(ctx,
		`UPDATE judge_settlement_event
		 SET state = IF(attempts >= ?, 'DEAD', 'PENDING'), last_error = ?,
		     next_attempt_at = NOW(6) + INTERVAL ? MICROSECOND
		 WHERE id = ? AND state = 'PENDING' AND consumer = ?`, maxAttempts, reason, micros(retryIn), id, consumer)
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
func (s *Store) ListEvents(ctx context.Context, state string, limit int) ([]EventRecord, error) {
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	out, err := queryAll(ctx, s.db, func(r rowScanner) (EventRecord, error) {
		var e EventRecord
		err := r.Scan(&e.ID, &e.JobID, &e.EventType, &e.SubmissionType, &e.SubmissionID, &e.Generation,
			&e.Payload, &e.DeliveryAttempt, &e.CreatedAt, &e.State, &e.Consumer, &e.LastError)
		return e, err
	}, `SELECT id, job_id, event_type, submission_type, submission_id, generation, payload, attempts, created_at,
	           state, COALESCE(consumer, ''), COALESCE(last_error, '')
	    FROM judge_settlement_event WHERE state = ? ORDER BY id DESC LIMIT ?`, state, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list events: %w", err)
	}
	return out, nil
}
