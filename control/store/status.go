package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Job is a read model of one job.
type Job struct {
	ID             int64    `db:"id"`
	SubmissionType string   `db:"submission_type"`
	SubmissionID   string   `db:"submission_id"`
	Generation     int      `db:"generation"`
	Kind           JobKind  `db:"kind"`
	Pool           string   `db:"pool"`
	Language       string   `db:"runtime_spec"`
	ManifestID     int64    `db:"manifest_id"`
	Priority       int      `db:"priority"`
	State          JobState `db:"state"`
	StatusVersion  int64    `db:"status_version"`
	Phase          string   `db:"phase"`
	CasesDone      int      `db:"cases_done"`
	CasesTotal     int      `db:"cases_total"`
	AttemptCount   int      `db:"attempt_count"`
	MaxAttempts    int      `db:"max_attempts"`
	// UnstartedAttempts counts leases that ended before judging started
	// (not in AttemptCount; capped by the store's MaxUnstartedAttempts).
	UnstartedAttempts int   `db:"unstarted_attempts"`
	RequiredNodeID    int64 `db:"required_node_id"`
	NodeID            int64 `db:"node_id"`
	LeaseEpoch        int64 `db:"lease_epoch"`
	// LeaseRemaining is negative when the lease expired and is not yet reaped.
	LeaseRemaining time.Duration `db:"-"`
	// AvailableIn is how long a QUEUED job still waits for its backoff.
	AvailableIn   time.Duration `db:"-"`
	Verdict       string        `db:"verdict"`
	Result        []byte        `db:"result"`
	LastErrorCode string        `db:"last_error_code"`
	CreatedAt     time.Time     `db:"created_at"`
	StartedAt     *time.Time    `db:"started_at"`
	FinishedAt    *time.Time    `db:"finished_at"`
}

// jobColumns names every column of jobView; read with Get/Select.
const jobColumns = jobColumnsHead + `result` + jobColumnsTail

// jobColumnsHead and jobColumnsTail surround the result column, so a list
// can read NULL in its place (job_search.go).
const (
	jobColumnsHead = `id, submission_type, submission_id, generation, kind, pool, runtime_spec, manifest_id, priority,
  state, status_version, COALESCE(phase, '') AS phase, cases_done, cases_total, attempt_count, max_attempts,
  unstarted_attempts, required_node_id, COALESCE(node_id, 0) AS node_id, lease_epoch,
  COALESCE(TIMESTAMPDIFF(MICROSECOND, NOW(6), lease_until), 0) AS lease_remaining_us,
  GREATEST(TIMESTAMPDIFF(MICROSECOND, NOW(6), available_at), 0) AS available_in_us,
  COALESCE(verdict, '') AS verdict, `
	jobColumnsTail = ` AS result, COALESCE(last_error_code, '') AS last_error_code,
  created_at, started_at, finished_at`
)

// jobView is one row of jobColumns: the Job plus the durations SQL gives in
// microseconds.
type jobView struct {
	Job
	LeaseRemainingUS int64 `db:"lease_remaining_us"`
	AvailableInUS    int64 `db:"available_in_us"`
}

func (r jobView) job() Job {
	j := r.Job
	j.LeaseRemaining = time.Duration(r.LeaseRemainingUS) * time.Microsecond
	j.AvailableIn = time.Duration(r.AvailableInUS) * time.Microsecond
	return j
}

// GetJob reads one job.
func (s *Jobs) GetJob(ctx context.Context, id int64) (Job, error) {
	var r jobView
	err := s.db.Pool.GetContext(ctx, &r, `SELECT `+jobColumns+` FROM judge_job WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("job %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Job{}, fmt.Errorf("store: get job: %w", err)
	}
	return r.job(), nil
}

// JobExtra is what the admin job view adds to Job.
type JobExtra struct {
	// Current: the job is its submission's current generation.
	Current       bool      `db:"current"`
	HostGroupID   int64     `db:"host_group_id"`
	RequestDigest string    `db:"request_digest"`
	ResultDigest  string    `db:"result_digest"`
	UpdatedAt     time.Time `db:"updated_at"`
}

// JobExtras reads the admin-only facts of a job.
func (s *Jobs) JobExtras(ctx context.Context, jobID int64) (JobExtra, error) {
	var x JobExtra
	err := s.db.Pool.GetContext(ctx, &x,
		`SELECT NOT EXISTS (SELECT 1 FROM judge_job n
		          WHERE n.submission_type = j.submission_type AND n.submission_id = j.submission_id
		            AND n.generation > j.generation) AS current,
		        COALESCE(j.host_group_id, 0) AS host_group_id,
		        j.request_digest, COALESCE(j.result_digest, '') AS result_digest, j.updated_at
		 FROM judge_job j
		 WHERE j.id = ?`, jobID)
	if errors.Is(err, sql.ErrNoRows) {
		return x, fmt.Errorf("job %d: %w", jobID, ErrNotFound)
	}
	if err != nil {
		return x, fmt.Errorf("store: job extras: %w", err)
	}
	return x, nil
}

// Attempt is one lease of a job.
type Attempt struct {
	JobID         int64      `db:"job_id"`
	LeaseEpoch    int64      `db:"lease_epoch"`
	NodeID        int64      `db:"node_id"`
	HostGroupID   int64      `db:"host_group_id"`
	SessionEpoch  int64      `db:"session_epoch"`
	StartedAt     time.Time  `db:"started_at"`
	EndedAt       *time.Time `db:"ended_at"`
	Outcome       string     `db:"outcome"`
	ErrorClass    string     `db:"error_class"`
	ReceiptDigest string     `db:"receipt_digest"`
	// JudgingStarted says whether judging started on the lease; nil while
	// the attempt is open. An attempt that ended unstarted was not counted
	// toward max_attempts.
	JudgingStarted *bool `db:"judging_started"`
	// ClaimRequestID is the node's claim request that granted the lease.
	ClaimRequestID string `db:"claim_request_id"`
	// PhasesJSON is the node's timing of the lease (Phases decodes it);
	// NULL when its result carried none or no result ended it.
	PhasesJSON []byte `db:"phases"`
}

// Phases decodes the attempt's phases: nil when there are none, or when
// the stored text is not what the lease engine writes (an attempt's
// timing is not worth failing its job's page for).
func (a Attempt) Phases() *Phases {
	if len(a.PhasesJSON) == 0 {
		return nil
	}
	var p Phases
	if json.Unmarshal(a.PhasesJSON, &p) != nil {
		return nil
	}
	return &p
}

// Attempts lists a job's attempts by lease epoch.
func (s *Jobs) Attempts(ctx context.Context, jobID int64) ([]Attempt, error) {
	return s.queryAttempts(ctx, `WHERE job_id = ? ORDER BY lease_epoch`, jobID)
}

// NodeAttempts lists a node's most recent attempts.
func (s *Jobs) NodeAttempts(ctx context.Context, nodeID int64, limit int) ([]Attempt, error) {
	return s.queryAttempts(ctx, `WHERE node_id = ? ORDER BY id DESC LIMIT ?`, nodeID, limit)
}

func (s *core) queryAttempts(ctx context.Context, where string, args ...any) ([]Attempt, error) {
	var out []Attempt
	if err := s.db.Pool.SelectContext(ctx, &out,
		`SELECT job_id, lease_epoch, node_id, host_group_id, session_epoch, started_at, ended_at, outcome,
		        COALESCE(error_class, '') AS error_class, COALESCE(receipt_digest, '') AS receipt_digest,
		        judging_started, COALESCE(claim_request_id, '') AS claim_request_id, phases
		 FROM judge_job_attempt `+where, args...); err != nil {
		return nil, fmt.Errorf("store: attempts: %w", err)
	}
	return out, nil
}

// BusinessStatus is the word a business backend sees for a submission.
type BusinessStatus struct {
	JobID      int64 `db:"id"`
	Generation int   `db:"generation"`
	// Status: PENDING, COMPILING, JUDGING, a verdict (AC, WA, …), SYSTEM_ERROR or CANCELLED.
	Status string `db:"-"`
	// WaitReason for PENDING: WAITING_FOR_WORKER or RETRY_BACKOFF.
	WaitReason    string    `db:"-"`
	CasesDone     int       `db:"cases_done"`
	CasesTotal    int       `db:"cases_total"`
	Result        []byte    `db:"result"`
	StatusVersion int64     `db:"status_version"`
	UpdatedAt     time.Time `db:"updated_at"`
}

// SubmissionStatus reads a submission's current job: its highest generation.
func (s *Jobs) SubmissionStatus(ctx context.Context, typ, id string) (BusinessStatus, error) {
	var r struct {
		BusinessStatus
		State     JobState       `db:"state"`
		Phase     sql.NullString `db:"phase"`
		Verdict   sql.NullString `db:"verdict"`
		BackoffUS int64          `db:"backoff_us"`
	}
	err := s.db.Pool.GetContext(ctx, &r,
		`SELECT j.id, j.generation, j.state, j.phase, j.verdict, j.cases_done, j.cases_total, j.result,
		        j.status_version, j.updated_at,
		        GREATEST(TIMESTAMPDIFF(MICROSECOND, NOW(6), j.available_at), 0) AS backoff_us
		 FROM judge_job j
		 WHERE j.submission_type = ? AND j.submission_id = ?
		 ORDER BY j.generation DESC LIMIT 1`, typ, id)
	if errors.Is(err, sql.ErrNoRows) {
		return BusinessStatus{}, fmt.Errorf("submission %s/%s: %w", typ, id, ErrNotFound)
	}
	if err != nil {
		return BusinessStatus{}, fmt.Errorf("store: submission status: %w", err)
	}
	st := r.BusinessStatus
	st.Status, st.WaitReason = businessWord(r.State, r.Phase.String, r.Verdict.String, r.BackoffUS > 0)
	return st, nil
}

// BusinessStatus is the word the business sees for this job (see
// BusinessStatus.Status) and, while PENDING, why it waits.
func (j Job) BusinessStatus() (status, waitReason string) {
	return businessWord(j.State, j.Phase, j.Verdict, j.AvailableIn > 0)
}

// businessWord maps a job's scheduling state to the business's words.
func businessWord(state JobState, phase, verdict string, inBackoff bool) (status, waitReason string) {
	switch state {
	case StateQueued:
		if inBackoff {
			return "PENDING", "RETRY_BACKOFF"
		}
		return "PENDING", "WAITING_FOR_WORKER"
	case StateRunning:
		if phase == "JUDGING" {
			return "JUDGING", ""
		}
		return "COMPILING", ""
	case StateCompleted:
		return verdict, ""
	case StateFailed:
		return "SYSTEM_ERROR", ""
	}
	return "CANCELLED", ""
}

// settledChunk bounds one IN list of SettledJobs.
const settledChunk = 500

// SettledJobs returns which of ids are in a terminal state (COMPLETED,
// FAILED, CANCELLED). It serves waiting status reads on other replicas: one
// primary-key lookup per id, no lock.
func (s *Jobs) SettledJobs(ctx context.Context, ids []int64) ([]int64, error) {
	var out []int64
	for start := 0; start < len(ids); start += settledChunk {
		q, args, err := sqlx.In(`SELECT id FROM judge_job WHERE id IN (?) AND state IN ('COMPLETED', 'FAILED', 'CANCELLED')`,
			ids[start:min(start+settledChunk, len(ids))])
		if err != nil {
			return nil, fmt.Errorf("store: settled jobs: %w", err)
		}
		var got []int64
		if err := s.db.Pool.SelectContext(ctx, &got, q, args...); err != nil {
			return nil, fmt.Errorf("store: settled jobs: %w", err)
		}
		out = append(out, got...)
	}
	return out, nil
}
