package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ErrEventNotDead: only dead-lettered events can be redelivered. It matches
// ErrConflict too.
var ErrEventNotDead = &ConflictError{Reason: "the event is not dead-lettered"}

// EventFilter narrows ListEventsPage; zero fields match everything.
type EventFilter struct {
	State string
	// BeforeID pages backwards from an id (exclusive); 0 starts at the newest.
	BeforeID int64
	Limit    int
}

// EventView is the admin view of an event with its delivery timestamps.
type EventView struct {
	EventRecord
	NextAttemptAt time.Time
	DeliveredAt   *time.Time
}

const eventViewColumns = `id, job_id, event_type, submission_type, submission_id, generation, payload, attempts, created_at,
  state, COALESCE(consumer, ''), COALESCE(last_error, ''), next_attempt_at, delivered_at`

func scanEventView(sc interface{ Scan(...any) error }) (EventView, error) {
	var e EventView
	err := sc.Scan(&e.ID, &e.JobID, &e.EventType, &e.SubmissionType, &e.SubmissionID, &e.Generation, &e.Payload,
		&e.DeliveryAttempt, &e.CreatedAt, &e.State, &e.Consumer, &e.LastError, &e.NextAttemptAt, &e.DeliveredAt)
	return e, err
}

// ListEventsPage lists settlement events newest first.
func (s *Store) ListEventsPage(ctx context.Context, f EventFilter) ([]EventView, error) {
	q := `SELECT ` + eventViewColumns + ` FROM judge_settlement_event WHERE 1=1`
	var args []any
	if f.State != "" {
		q += ` AND state = ?`
		args = append(args, f.State)
	}
	if f.BeforeID > 0 {
		q += ` AND id < ?`
		args = append(args, f.BeforeID)
	}
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 100
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY id DESC LIMIT ?`, append(args, f.Limit)...)
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
func (s *Store) RedeliverEvent(ctx context.Context, eventID int64, actor, reason string) (EventView, error) {
	var out EventView
	err := s.inTx(ctx, func(tx *sql.Tx) error {
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
			`UPDATE judge_settlement_event SET state = 'PENDING', attempts = 0, consumer = NULL, next_attempt_at = NOW(6)
			 WHERE id = ?`, eventID); err != nil {
			return fmt.Errorf("store: redeliver: %w", err)
		}
		if err := audit(ctx, tx, actor, "event.redeliver", 0, jobID, reason, map[string]any{"eventId": eventID}); err != nil {
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
