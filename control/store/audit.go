package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// audit writes one audit row inside the caller's transaction.
func audit(ctx context.Context, tx *sql.Tx, actor, action string, nodeID, jobID int64, reason string, detail map[string]any) error {
	var d []byte
	if detail != nil {
		d, _ = json.Marshal(detail)
	}
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO judge_audit (actor, action, node_id, job_id, reason, detail) VALUES (?, ?, NULLIF(?, 0), NULLIF(?, 0), ?, ?)`,
		actor, action, nodeID, jobID, reason, d); err != nil {
		return fmt.Errorf("store: audit: %w", err)
	}
	return nil
}

// AuditEntry is one audit row.
type AuditEntry struct {
	ID        int64
	Actor     string
	Action    string
	NodeID    int64
	JobID     int64
	Reason    string
	Detail    json.RawMessage
	CreatedAt time.Time
}

// Audit lists recent audit rows of a node (nodeID > 0) or a job (jobID > 0).
func (s *Store) Audit(ctx context.Context, nodeID, jobID int64, limit int) ([]AuditEntry, error) {
	q := `SELECT id, actor, action, COALESCE(node_id, 0), COALESCE(job_id, 0), reason, COALESCE(detail, ''), created_at
	      FROM judge_audit WHERE `
	var arg int64
	if nodeID > 0 {
		q, arg = q+`node_id = ?`, nodeID
	} else {
		q, arg = q+`job_id = ?`, jobID
	}
	out, err := queryAll(ctx, s.db, func(r rowScanner) (AuditEntry, error) {
		var a AuditEntry
		var d string
		err := r.Scan(&a.ID, &a.Actor, &a.Action, &a.NodeID, &a.JobID, &a.Reason, &d, &a.CreatedAt)
		if d != "" {
			a.Detail = json.RawMessage(d)
		}
		return a, err
	}, q+` ORDER BY id DESC LIMIT ?`, arg, limit)
	if err != nil {
		return nil, fmt.Errorf("store: audit: %w", err)
	}
	return out, nil
}

// RecordNodeAction writes an audit row for an admin action on a node that
// changes no row itself (a probe of its address).
func (s *Store) RecordNodeAction(ctx context.Context, nodeID int64, actor, action, reason string, detail map[string]any) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		return audit(ctx, tx, actor, action, nodeID, 0, reason, detail)
	})
}
