package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Job is a read model of one job.
type Job struct {
	ID             int64
	SubmissionType string
	SubmissionID   string
	Generation     int
	Kind           JobKind
	Pool           string
	Language       string
	ManifestID     int64
	Priority       int
	State          JobState
	StatusVersion  int64
	Phase          string
	CasesDone      int
	CasesTotal     int
	AttemptCount   int
	MaxAttempts    int
	RequiredNodeID int64
	NodeID         int64
	LeaseEpoch     int64
	// LeaseRemaining is negative when the lease expired and is not yet reaped.
	LeaseRemaining time.Duration
	// AvailableIn is how long a QUEUED job still waits for its backoff.
	AvailableIn   time.Duration
	Verdict       string
	Result        []byte
	LastErrorCode string
	CreatedAt     time.Time
	StartedAt     *time.Time
	FinishedAt    *time.Time
}

const jobColumns = jobColumnsHead + `result` + jobColumnsTail

// jobColumnsHead and jobColumnsTail surround the result column of the list
// scanJob reads, so a list can read NULL in its place (job_search.go).
const (
	jobColumnsHead = `id, submission_type, submission_id, generation, kind, pool, runtime_spec, manifest_id, priority,
  state, status_version, COALESCE(phase, ''), cases_done, cases_total, attempt_count, max_attempts,
  required_node_id, COALESCE(node_id, 0), lease_epoch,
  COALESCE(TIMESTAMPDIFF(MICROSECOND, NOW(6), lease_until), 0),
  GREATEST(TIMESTAMPDIFF(MICROSECOND, NOW(6), available_at), 0),
  COALESCE(verdict, ''), `
	jobColumnsTail = `, COALESCE(last_error_code, ''), created_at, started_at, finished_at`
)

func scanJob(sc rowScanner) (Job, error) {
	var j Job
	var leaseUS, availUS int64
	err := sc.Scan(&j.ID, &j.SubmissionType, &j.SubmissionID, &j.Generation, &j.Kind, &j.Pool, &j.Language,
		&j.ManifestID, &j.Priority, &j.State, &j.StatusVersion, &j.Phase, &j.CasesDone, &j.CasesTotal,
		&j.AttemptCount, &j.MaxAttempts, &j.RequiredNodeID, &j.NodeID, &j.LeaseEpoch, &leaseUS, &availUS,
		&j.Verdict, &j.Result, &j.LastErrorCode, &j.CreatedAt, &j.StartedAt, &j.FinishedAt)
	j.LeaseRemaining = time.Duration(leaseUS) * time.Microsecond
	j.AvailableIn = time.Duration(availUS) * time.Microsecond
	return j, err
}

// GetJob reads one job.
func (s *Store) GetJob(ctx context.Context, id int64) (Job, error) {
	j, err := scanJob(s.db.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM judge_job WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("job %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Job{}, fmt.Errorf("store: get job: %w", err)
	}
	return j, nil
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

// Attempt is one lease of a job.
type Attempt struct {
	JobID         int64
	LeaseEpoch    int64
	NodeID        int64
	HostGroupID   int64
	SessionEpoch  int64
	StartedAt     time.Time
	EndedAt       *time.Time
	Outcome       string
	ErrorClass    string
	ReceiptDigest string
}

// Attempts lists a job's attempts by lease epoch.
func (s *Store) Attempts(ctx context.Context, jobID int64) ([]Attempt, error) {
	return s.queryAttempts(ctx, `WHERE job_id = ? ORDER BY lease_epoch`, jobID)
}

// NodeAttempts lists a node's most recent attempts.
func (s *Store) NodeAttempts(ctx context.Context, nodeID int64, limit int) ([]Attempt, error) {
	return s.queryAttempts(ctx, `WHERE node_id = ? ORDER BY id DESC LIMIT ?`, nodeID, limit)
}

func (s *Store) queryAttempts(ctx context.Context, where string, args ...any) ([]Attempt, error) {
	out, err := queryAll(ctx, s.db, func(r rowScanner) (Attempt, error) {
		var a Attempt
		err := r.Scan(&a.JobID, &a.LeaseEpoch, &a.NodeID, &a.HostGroupID, &a.SessionEpoch, &a.StartedAt,
			&a.EndedAt, &a.Outcome, &a.ErrorClass, &a.ReceiptDigest)
		return a, err
	}, `SELECT job_id, lease_epoch, node_id, host_group_id, session_epoch, started_at, ended_at, outcome,
	           COALESCE(error_class, ''), COALESCE(receipt_digest, '')
	    FROM judge_job_attempt `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("store: attempts: %w", err)
	}
	return out, nil
}

// BusinessStatus is the word a business backend sees for a submission.
type BusinessStatus struct {
	JobID      int64
	Generation int
	// Status: PENDING, COMPILING, JUDGING, a verdict (AC, WA, …), SYSTEM_ERROR or CANCELLED.
	Status string
	// WaitReason for PENDING: WAITING_FOR_WORKER or RETRY_BACKOFF.
	WaitReason    string
	CasesDone     int
	CasesTotal    int
	Result        []byte
	StatusVersion int64
	UpdatedAt     time.Time
}

// SubmissionStatus reads a submission through its pointer.
func (s *Store) SubmissionStatus(ctx context.Context, typ, id string) (BusinessStatus, error) {
	var st BusinessStatus
	var state JobState
	var phase, verdict sql.NullString
	var backoffUS int64
	err := s.db.QueryRowContext(ctx,
		`SELECT j.id, j.generation, j.state, j.phase, j.verdict, j.cases_done, j.cases_total, j.result,
		        j.status_version, j.updated_at,
		        GREATEST(TIMESTAMPDIFF(MICROSECOND, NOW(6), j.available_at), 0)
		 FROM judge_submission p JOIN judge_job j ON j.id = p.current_job_id
		 WHERE p.submission_type = ? AND p.submission_id = ?`, typ, id).Scan(
		&st.JobID, &st.Generation, &state, &phase, &verdict, &st.CasesDone, &st.CasesTotal, &st.Result,
		&st.StatusVersion, &st.UpdatedAt, &backoffUS)
	if errors.Is(err, sql.ErrNoRows) {
		return BusinessStatus{}, fmt.Errorf("submission %s/%s: %w", typ, id, ErrNotFound)
	}
	if err != nil {
		return BusinessStatus{}, fmt.Errorf("store: submission status: %w", err)
	}
	st.Status, st.WaitReason = businessWord(state, phase.String, verdict.String, backoffUS > 0)
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
func (s *Store) SettledJobs(ctx context.Context, ids []int64) ([]int64, error) {
	var out []int64
	for start := 0; start < len(ids); start += settledChunk {
		in, args := inList(ids[start:min(start+settledChunk, len(ids))])
		got, err := queryAll(ctx, s.db, func(sc rowScanner) (int64, error) {
			var id int64
			err := sc.Scan(&id)
			return id, err
		}, `SELECT id FROM judge_job WHERE id IN (`+in+`) AND state IN ('COMPLETED', 'FAILED', 'CANCELLED')`, args...)
		if err != nil {
			return nil, fmt.Errorf("store: settled jobs: %w", err)
		}
		out = append(out, got...)
	}
	return out, nil
}
