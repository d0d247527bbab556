package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

// AuditEntry is one audit row.
type AuditEntry struct {
	ID     int64           `db:"id"`
	Actor  string          `db:"actor"`
	Action string          `db:"action"`
	NodeID int64           `db:"node_id"`
	JobID  int64           `db:"job_id"`
	Reason string          `db:"reason"`
	Detail json.RawMessage `db:"detail"`
	// RemoteAddr is the caller's address; empty for automatic actions and
	// rows written before it was recorded.
	RemoteAddr string    `db:"remote_addr"`
	CreatedAt  time.Time `db:"created_at"`
}

// auditColumns names every column of AuditEntry; read with Select.
const auditColumns = `id, actor, action, COALESCE(node_id, 0) AS node_id, COALESCE(job_id, 0) AS job_id, reason,
  COALESCE(detail, '') AS detail, COALESCE(remote_addr, '') AS remote_addr, created_at`

// Audit lists recent audit rows of a node (nodeID > 0) or else a job: the
// node's or job's page of ListAudit.
func (s *AuditLog) Audit(ctx context.Context, nodeID, jobID int64, limit int) ([]AuditEntry, error) {
	f := AuditFilter{NodeID: nodeID, Limit: limit}
	if nodeID <= 0 {
		f = AuditFilter{JobID: jobID, Limit: limit}
	}
	return s.ListAudit(ctx, f)
}

// AuditFilter narrows ListAudit; zero fields match everything.
type AuditFilter struct {
	Actor  string
	Action string
	NodeID int64
	JobID  int64
	// After (inclusive) and Before (exclusive) bound the entry's time.
	After  time.Time
	Before time.Time
	// BeforeID pages backwards from an id (exclusive); 0 starts at the newest.
	BeforeID int64
	// Limit is the page size, 1..PageLimitMax; 0 takes PageLimitDefault.
	Limit int
}

// Validate refuses filters that cannot match as asked.
func (f AuditFilter) Validate() error {
	if len(f.Actor) > 128 {
		return jobdb.Invalid("actor", "is longer than 128 bytes")
	}
	if len(f.Action) > 64 {
		return jobdb.Invalid("action", "is longer than 64 bytes")
	}
	for _, id := range []struct {
		field string
		v     int64
	}{{"nodeId", f.NodeID}, {"jobId", f.JobID}, {"beforeId", f.BeforeID}} {
		if id.v < 0 {
			return jobdb.Invalid(id.field, "ids are positive")
		}
	}
	if err := validRange("after", "before", f.After, f.Before); err != nil {
		return err
	}
	return validLimit(f.Limit)
}

// ListAudit lists every audit row newest first (by id: keyset pages with
// BeforeID). Actor, action, node and job each have a key ending in id, so a
// filtered page reads only its rows; the time bounds use ix_audit_created.
func (s *AuditLog) ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	q, args := auditSearchSQL(f)
	var out []AuditEntry
	if err := s.db.Pool.SelectContext(ctx, &out, q, args...); err != nil {
		return nil, fmt.Errorf("store: list audit: %w", err)
	}
	for i := range out {
		out[i].Detail = jobdb.NilIfEmpty(out[i].Detail)
	}
	return out, nil
}

// auditSearchSQL is ListAudit's statement for a valid filter.
func auditSearchSQL(f AuditFilter) (string, []any) {
	q := `SELECT ` + auditColumns + ` FROM judge_audit WHERE 1=1`
	var args []any
	add := func(cond string, v any) { q += " AND " + cond; args = append(args, v) }
	if f.Actor != "" {
		add("actor = ?", f.Actor)
	}
	if f.Action != "" {
		add("action = ?", f.Action)
	}
	if f.NodeID != 0 {
		add("node_id = ?", f.NodeID)
	}
	if f.JobID != 0 {
		add("job_id = ?", f.JobID)
	}
	if !f.After.IsZero() {
		add("created_at >= ?", f.After.UTC())
	}
	if !f.Before.IsZero() {
		add("created_at < ?", f.Before.UTC())
	}
	if f.BeforeID > 0 {
		add("id < ?", f.BeforeID)
	}
	return q + " ORDER BY id DESC LIMIT ?", append(args, cmpLimit(f.Limit))
}

// RecordNodeAction writes an audit row for an admin action on a node that
// changes no row itself (a probe of its address).
func (s *AuditLog) RecordNodeAction(ctx context.Context, nodeID int64, actor, action, reason string, detail map[string]any) error {
	return s.db.InTx(ctx, func(tx *sql.Tx) error {
		return jobdb.Audit(ctx, tx, actor, action, nodeID, 0, reason, detail)
	})
}
