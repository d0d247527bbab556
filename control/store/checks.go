package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/kece-oj/kece/control/internal/jobdb"
	"github.com/kece-oj/kece/control/manifest"
)

// CheckFreshness is how recent a passing self-check must be to enable a node.
const CheckFreshness = 30 * time.Minute

// CheckRequest is a self-check to run on one node.
type CheckRequest struct {
	NodeID     int64
	ManifestID int64
	Language   string
	Source     string
}

// CheckStarted identifies a started self-check.
type CheckStarted struct {
	CheckID int64
	JobID   int64
}

// StartCheck creates a CHECK job bound to the node (it uses the node's
// capacity and never produces a business settlement event) and its check row.
func (s *Nodes) StartCheck(ctx context.Context, r CheckRequest, actor, reason string) (CheckStarted, error) {
	pool, err := manifest.PoolForLanguage(r.Language)
	if err != nil {
		return CheckStarted{}, jobdb.Invalid("language", "%v", err)
	}
	snapshot, _ := json.Marshal(Snapshot{Language: r.Language, Source: r.Source})
	weight := 1
	if om, err := s.db.ReadManifest(ctx, s.db.Pool, r.ManifestID); err == nil {
		weight = om.Manifest.SlotWeight() // self-check manifests are ordinary problems (1)
	}
	var out CheckStarted
	err = s.db.InTx(ctx, func(tx *sql.Tx) error {
		var nodePool string
		var rev int64
		err := tx.QueryRowContext(ctx, `SELECT pool, revision FROM judge_node WHERE id = ? FOR UPDATE`, r.NodeID).Scan(&nodePool, &rev)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("node %d: %w", r.NodeID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: start check: %w", err)
		}
		if nodePool != pool {
			return jobdb.Invalid("language", "a %s check cannot run on a %s node", pool, nodePool)
		}
		var runtime string
		_ = tx.QueryRowContext(ctx, `SELECT COALESCE(reported_runtime, '') FROM judge_node WHERE id = ?`, r.NodeID).Scan(&runtime)
		cr, err := tx.ExecContext(ctx,
			`INSERT INTO judge_node_check (node_id, config_revision, runtime_version) VALUES (?, ?, ?)`, r.NodeID, rev, runtime)
		if err != nil {
			return fmt.Errorf("store: start check: %w", err)
		}
		out.CheckID, _ = cr.LastInsertId()
		sid := strconv.FormatInt(out.CheckID, 10)
		if _, _, err := lockSubmission(ctx, tx, CheckSubmissionType, sid); err != nil {
			return err
		}
		out.JobID, err = s.insertJob(ctx, tx, jobRow{
			submissionType: CheckSubmissionType, submissionID: sid, generation: 1, kind: KindCheck,
			pool: pool, language: r.Language, manifestID: r.ManifestID, snapshot: snapshot,
			digest: fmt.Sprintf("%x", sha256.Sum256(snapshot)), priority: -100, maxAttempts: 1, requiredNode: r.NodeID,
			slotWeight: weight,
		})
		if err != nil {
			return err
		}
		if err := setPointer(ctx, tx, CheckSubmissionType, sid, out.JobID, 1); err != nil {
			return fmt.Errorf("store: start check: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE judge_node_check SET job_id = ? WHERE id = ?`, out.JobID, out.CheckID); err != nil {
			return fmt.Errorf("store: start check: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE judge_node SET pending_checks = pending_checks + 1 WHERE id = ?`, r.NodeID); err != nil {
			return fmt.Errorf("store: start check: %w", err)
		}
		if err := jobdb.Audit(ctx, tx, actor, "node.verify", r.NodeID, out.JobID, reason, map[string]any{"checkId": out.CheckID}); err != nil {
			return err
		}
		return jobdb.BumpPool(ctx, tx, pool)
	})
	if err == nil {
		s.db.Notify(pool)
	}
	return out, err
}

// NodeCheck is one self-check run.
type NodeCheck struct {
	ID             int64           `db:"id"`
	JobID          int64           `db:"job_id"`
	ConfigRevision int64           `db:"config_revision"`
	RuntimeVersion string          `db:"runtime_version"`
	Outcome        string          `db:"outcome"`
	Steps          json.RawMessage `db:"steps"`
	CreatedAt      time.Time       `db:"created_at"`
	FinishedAt     *time.Time      `db:"finished_at"`
}

// ActiveCheck returns the job of a self-check of the node that is still
// queued or running, if any.
func (s *Nodes) ActiveCheck(ctx context.Context, nodeID int64) (jobID int64, ok bool, err error) {
	err = s.db.Pool.QueryRowContext(ctx,
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
	State string `db:"-"`
	// ErrorCode is the CHECK job's last infrastructure error, or CANCELLED.
	ErrorCode string `db:"last_error_code"`
	// Result is the CHECK job's normalized result JSON, if it ended with one.
	Result json.RawMessage `db:"result"`
}

// NodeChecks lists a node's recent self-checks, newest first.
func (s *Nodes) NodeChecks(ctx context.Context, nodeID int64, limit int) ([]CheckView, error) {
	var rows []struct {
		CheckView
		JobState JobState `db:"job_state"`
	}
	if err := s.db.Pool.SelectContext(ctx, &rows,
		`SELECT c.id, COALESCE(c.job_id, 0) AS job_id, c.config_revision,
		        COALESCE(c.runtime_version, '') AS runtime_version, c.outcome, COALESCE(c.steps, '') AS steps,
		        c.created_at, c.finished_at, COALESCE(j.state, '') AS job_state,
		        COALESCE(j.last_error_code, '') AS last_error_code, COALESCE(j.result, '') AS result
		 FROM judge_node_check c LEFT JOIN judge_job j ON j.id = c.job_id
		 WHERE c.node_id = ? ORDER BY c.id DESC LIMIT ?`, nodeID, limit); err != nil {
		return nil, fmt.Errorf("store: node checks: %w", err)
	}
	out := make([]CheckView, 0, len(rows))
	for _, r := range rows {
		c, state := r.CheckView, r.JobState
		c.Steps, c.Result = jobdb.NilIfEmpty(c.Steps), jobdb.NilIfEmpty(c.Result)
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
	return out, nil
}
