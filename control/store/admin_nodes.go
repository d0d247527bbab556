package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Admin node errors with their own API codes. They match ErrConflict too.
var (
	// ErrNodeAlreadyJoined: the node holds a credential; rotate it instead
	// of issuing a join code.
	ErrNodeAlreadyJoined = &ConflictError{Reason: "node already joined; rotate its credential instead"}
	// ErrCheckInProgress: a self-check of the node is still queued or running.
	ErrCheckInProgress = &ConflictError{Reason: "a self-check of this node is still queued or running"}
)

// IssueJoinCode issues a fresh join code for a node that has not joined yet
// (earlier unused codes stop working). A joined node is ErrNodeAlreadyJoined,
// a revoked one ErrNodeRevoked.
func (s *Store) IssueJoinCode(ctx context.Context, nodeID int64, actor, reason string) (JoinCode, error) {
	var code JoinCode
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		joined, revoked, err := lockNodeFlags(ctx, tx, nodeID)
		if err != nil {
			return err
		}
		switch {
		case revoked:
			return fmt.Errorf("node %d: %w", nodeID, ErrNodeRevoked)
		case joined:
			return fmt.Errorf("node %d: %w", nodeID, ErrNodeAlreadyJoined)
		}
		if code, err = s.issueJoinCode(ctx, tx, nodeID); err != nil {
			return err
		}
		return audit(ctx, tx, actor, "node.join_code", nodeID, 0, reason, nil)
	})
	return code, err
}

// RotateCredential kills the node's credential and every session at once and
// issues a new join code; the node must join again. Live leases stay until
// they expire (the old session can no longer renew them) and are reaped.
func (s *Store) RotateCredential(ctx context.Context, nodeID int64, actor, reason string) (JoinCode, error) {
	var code JoinCode
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, revoked, err := lockNodeFlags(ctx, tx, nodeID)
		if err != nil {
			return err
		}
		if revoked {
			return fmt.Errorf("node %d: %w", nodeID, ErrNodeRevoked)
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_node SET credential_hash = NULL, session_token_hash = NULL,
			   credential_version = credential_version + 1, updated_at = NOW(6) WHERE id = ?`, nodeID); err != nil {
			return fmt.Errorf("store: rotate credential: %w", err)
		}
		if code, err = s.issueJoinCode(ctx, tx, nodeID); err != nil {
			return err
		}
		return audit(ctx, tx, actor, "node.rotate_credential", nodeID, 0, reason, nil)
	})
	return code, err
}

func lockNodeFlags(ctx context.Context, tx *sql.Tx, nodeID int64) (joined, revoked bool, err error) {
	err = tx.QueryRowContext(ctx,
		`SELECT credential_hash IS NOT NULL, revoked_at IS NOT NULL FROM judge_node WHERE id = ? FOR UPDATE`, nodeID).Scan(&joined, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, fmt.Errorf("node %d: %w", nodeID, ErrNotFound)
	}
	if err != nil {
		return false, false, fmt.Errorf("store: lock node: %w", err)
	}
	return joined, revoked, nil
}

// ActiveCheck returns the job of a self-check of the node that is still
// queued or running, if any.
func (s *Store) ActiveCheck(ctx context.Context, nodeID int64) (jobID int64, ok bool, err error) {
	err = s.db.QueryRowContext(ctx,
		`SELECT j.id FROM judge_node_check c JOIN judge_job j ON j.id = c.job_id
		 WHERE c.node_id = ? AND j.state IN ('QUEUED', 'RUNNING') ORDER BY c.id DESC LIMIT 1`, nodeID).Scan(&jobID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: active check: %w", err)
	}
	return jobID, true, nil
}

// Check states as admins see them.
const (
	CheckPending = "PENDING"
	CheckRunning = "RUNNING"
	CheckPassed  = "PASSED"
	CheckFailed  = "FAILED"
)

// CheckView is a self-check with the state of its CHECK job.
type CheckView struct {
	NodeCheck
	// State: PENDING (job queued), RUNNING, PASSED (job ended AC) or FAILED
	// (another verdict, an infrastructure failure, or the job was cancelled).
	State string
	// ErrorCode is the CHECK job's last infrastructure error, or CANCELLED.
	ErrorCode string
	// Result is the CHECK job's normalized result JSON, if it ended with one.
	Result json.RawMessage
}

// NodeChecks lists a node's recent self-checks, newest first.
func (s *Store) NodeChecks(ctx context.Context, nodeID int64, limit int) ([]CheckView, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT c.id, COALESCE(c.job_id, 0), c.config_revision, COALESCE(c.runtime_version, ''), c.outcome,
		        COALESCE(c.steps, ''), c.created_at, c.finished_at, COALESCE(j.state, ''), COALESCE(j.last_error_code, ''),
		        COALESCE(j.result, '')
		 FROM judge_node_check c LEFT JOIN judge_job j ON j.id = c.job_id
		 WHERE c.node_id = ? ORDER BY c.id DESC LIMIT ?`, nodeID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: node checks: %w", err)
	}
	defer rows.Close()
	var out []CheckView
	for rows.Next() {
		var c CheckView
		var steps, result string
		var state JobState
		if err := rows.Scan(&c.ID, &c.JobID, &c.ConfigRevision, &c.RuntimeVersion, &c.Outcome, &steps, &c.CreatedAt,
			&c.FinishedAt, &state, &c.ErrorCode, &result); err != nil {
			return nil, fmt.Errorf("store: node checks: %w", err)
		}
		if steps != "" {
			c.Steps = json.RawMessage(steps)
		}
		if result != "" {
			c.Result = json.RawMessage(result)
		}
		switch {
		case c.Outcome == CheckPassed:
			c.State = CheckPassed
		case c.Outcome == CheckFailed:
			c.State = CheckFailed
		case state == StateRunning:
			c.State = CheckRunning
		case state == StateQueued:
			c.State = CheckPending
		default: // its job ended without settling the check, or is gone: it will never pass
			c.State = CheckFailed
		}
		if c.State == CheckFailed && c.ErrorCode == "" && state == StateCancelled {
			c.ErrorCode = "CANCELLED"
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// NodeTimes are a node's configuration timestamps.
type NodeTimes struct {
	UpdatedAt       time.Time
	LastHeartbeatAt *time.Time
}

// NodeTimestamps reads when a node's configuration last changed and when its
// last heartbeat arrived (database clock).
func (s *Store) NodeTimestamps(ctx context.Context, nodeID int64) (NodeTimes, error) {
	var t NodeTimes
	err := s.db.QueryRowContext(ctx, `SELECT updated_at, last_heartbeat_at FROM judge_node WHERE id = ?`, nodeID).Scan(
		&t.UpdatedAt, &t.LastHeartbeatAt)
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("node %d: %w", nodeID, ErrNotFound)
	}
	if err != nil {
		return t, fmt.Errorf("store: node timestamps: %w", err)
	}
	return t, nil
}

// HostGroupDetail is a host group with its node count and timestamps.
type HostGroupDetail struct {
	HostGroup
	NodeCount int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// HostGroupDetails lists host groups (one when id > 0) with busy slots,
// node counts and timestamps.
func (s *Store) HostGroupDetails(ctx context.Context, id int64) ([]HostGroupDetail, error) {
	q := `SELECT g.id, g.name, g.slot_capacity, g.revision,
	        (SELECT COUNT(*) FROM judge_job j WHERE j.host_group_id = g.id AND j.state = 'RUNNING'),
	        (SELECT COUNT(*) FROM judge_node n WHERE n.host_group_id = g.id),
	        g.created_at, g.updated_at
	      FROM judge_host_group g`
	var args []any
	if id > 0 {
		q += ` WHERE g.id = ?`
		args = append(args, id)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY g.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: host groups: %w", err)
	}
	defer rows.Close()
	var out []HostGroupDetail
	for rows.Next() {
		var g HostGroupDetail
		if err := rows.Scan(&g.ID, &g.Name, &g.SlotCapacity, &g.Revision, &g.SlotsBusy, &g.NodeCount, &g.CreatedAt, &g.UpdatedAt); err != nil {
			return nil, fmt.Errorf("store: host groups: %w", err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// RecordNodeAction writes an audit row for an admin action on a node that
// changes no row itself (a probe of its address).
func (s *Store) RecordNodeAction(ctx context.Context, nodeID int64, actor, action, reason string, detail map[string]any) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		return audit(ctx, tx, actor, action, nodeID, 0, reason, detail)
	})
}
