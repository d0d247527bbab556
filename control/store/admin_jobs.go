package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Admin job errors with their own API codes. They match ErrConflict too.
var (
	// ErrJobNotCurrent: a newer generation of the submission exists.
	ErrJobNotCurrent = &ConflictError{Reason: "a newer generation of this submission exists"}
	// ErrCheckJob: the action does not apply to CHECK jobs.
	ErrCheckJob = &ConflictError{Reason: "CHECK jobs are not rejudged; verify the node again"}
)

// RejudgeJob rejudges the submission of a SUBMISSION job by job id, only if
// that job is still the submission's current one (ErrJobNotCurrent
// otherwise): two admins rejudging the same job make one new generation, not
// two.
func (s *Store) RejudgeJob(ctx context.Context, jobID int64, actor, reason string) (EnqueueResult, error) {
	var typ, sid string
	var kind JobKind
	err := s.db.QueryRowContext(ctx, `SELECT submission_type, submission_id, kind FROM judge_job WHERE id = ?`, jobID).Scan(&typ, &sid, &kind)
	if errors.Is(err, sql.ErrNoRows) {
		return EnqueueResult{}, fmt.Errorf("job %d: %w", jobID, ErrNotFound)
	}
	if err != nil {
		return EnqueueResult{}, fmt.Errorf("store: rejudge job: %w", err)
	}
	if kind != KindSubmission {
		return EnqueueResult{}, fmt.Errorf("job %d: %w", jobID, ErrCheckJob)
	}
	var res EnqueueResult
	var pool string
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var cur int64
		var gen int
		if err := tx.QueryRowContext(ctx,
			`SELECT current_job_id, generation FROM judge_submission
			 WHERE submission_type = ? AND submission_id = ? FOR UPDATE`, typ, sid).Scan(&cur, &gen); err != nil {
			return fmt.Errorf("store: rejudge job: pointer: %w", err)
		}
		if cur != jobID {
			return fmt.Errorf("job %d (current is %d): %w", jobID, cur, ErrJobNotCurrent)
		}
		var j jobRow
		var state JobState
		if err := tx.QueryRowContext(ctx,
			`SELECT kind, pool, runtime_spec, manifest_id, request_snapshot, request_digest, priority,
			        required_node_id, state
			 FROM judge_job WHERE id = ? FOR UPDATE`, cur).Scan(
			&j.kind, &j.pool, &j.language, &j.manifestID, &j.snapshot, &j.digest, &j.priority,
			&j.requiredNode, &state); err != nil {
			return fmt.Errorf("store: rejudge job %d: %w", cur, err)
		}
		if !state.Terminal() {
			if err := cancelLocked(ctx, tx, cur, "SUPERSEDED"); err != nil {
				return err
			}
		}
		j.submissionType, j.submissionID, j.generation, j.maxAttempts = typ, sid, gen+1, s.cfg.MaxAttempts
		newID, err := s.insertJob(ctx, tx, j)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_submission SET current_job_id = ?, generation = ?, updated_at = NOW(6)
			 WHERE submission_type = ? AND submission_id = ?`, newID, gen+1, typ, sid); err != nil {
			return fmt.Errorf("store: rejudge job: pointer: %w", err)
		}
		if err := audit(ctx, tx, actor, "job.rejudge", 0, newID, reason, map[string]any{"previousJobId": cur}); err != nil {
			return err
		}
		res = EnqueueResult{JobID: newID, Generation: gen + 1, State: StateQueued, Created: true}
		pool = j.pool
		return bumpPool(ctx, tx, pool)
	})
	if err == nil {
		s.notify(pool)
	}
	return res, err
}

// JobExtra is what the admin job view adds to Job.
type JobExtra struct {
	// Current: the job is its submission's current generation.
	Current       bool
	HostGroupID   int64
	RequestDigest string
	ResultDigest  string
	UpdatedAt     time.Time
}

// JobExtras reads the admin-only facts of a job.
func (s *Store) JobExtras(ctx context.Context, jobID int64) (JobExtra, error) {
	var x JobExtra
	err := s.db.QueryRowContext(ctx,
		`SELECT COALESCE(p.current_job_id = j.id, FALSE), COALESCE(j.host_group_id, 0), j.request_digest,
		        COALESCE(j.result_digest, ''), j.updated_at
		 FROM judge_job j LEFT JOIN judge_submission p
		   ON p.submission_type = j.submission_type AND p.submission_id = j.submission_id
		 WHERE j.id = ?`, jobID).Scan(&x.Current, &x.HostGroupID, &x.RequestDigest, &x.ResultDigest, &x.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return x, fmt.Errorf("job %d: %w", jobID, ErrNotFound)
	}
	if err != nil {
		return x, fmt.Errorf("store: job extras: %w", err)
	}
	return x, nil
}
