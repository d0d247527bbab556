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
	ID        int64           `db:"id"`
	Actor     string          `db:"actor"`
	Action    string          `db:"action"`
	NodeID    int64           `db:"node_id"`
	JobID     int64           `db:"job_id"`
	Reason    string          `db:"reason"`
	Detail    json.RawMessage `db:"detail"`
	CreatedAt time.Time       `db:"created_at"`
}

// Audit lists recent audit rows of a node (nodeID > 0) or a job (jobID > 0).
func (s *Store) Audit(ctx context.Context, nodeID, jobID int64, limit int) ([]AuditEntry, error) {
	q := `SELECT id, actor, action, COALESCE(node_id, 0) AS node_id, COALESCE(job_id, 0) AS job_id, reason,
	        COALESCE(detail, '') AS detail, created_at
	      FROM judge_audit WHERE `
	var arg int64
	if nodeID > 0 {
		q, arg = q+`node_id = ?`, nodeID
	} else {
		q, arg = q+`job_id = ?`, jobID
	}
	var out []AuditEntry
	if err := s.db.SelectContext(ctx, &out, q+` ORDER BY id DESC LIMIT ?`, arg, limit); err != nil {
		return nil, fmt.Errorf("store: audit: %w", err)
	}
	for i := range out {
		out[i].Detail = nilIfEmpty(out[i].Detail)
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
