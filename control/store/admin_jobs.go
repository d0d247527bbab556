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
	return s.rejudge(ctx, typ, sid, jobID, actor, reason)
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
