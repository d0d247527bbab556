package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

// CheckSubmissionType is the reserved submission type of CHECK jobs; business
// types may not start with "KECE_".
const CheckSubmissionType = "KECE_CHECK"

var (
	submissionTypeRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,31}$`)
	submissionIDRE   = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)
)

// Snapshot is the frozen request a job judges; it is what nodes receive.
type Snapshot struct {
	Language string `json:"language"`
	Source   string `json:"source"`
	// Files is omitted for a one-file submission, so its snapshot — and the
	// request digest idempotency compares — is what it always was.
	Files []SourceFile `json:"files,omitempty"`
}

// SourceFile is one further named source file of a submission.
type SourceFile struct {
	Name    string `json:"name"`
	Content string `json:"content"`
}

// lockSubmission locks a submission's pointer row (judge_submission),
// creating it if absent, and returns the submission's current job and its
// generation (0, 0: the submission has no job).
//
// The current job of a submission is its highest generation. The pointer row
// is the lock that serializes what changes a submission (enqueue of an
// identity that may exist, rejudge, cancel) and, once written, names the
// current job. Generation 1 made by the enqueue fast path has no pointer
// row; the first locker finds that job (a locking read, which waits for an
// uncommitted insert of it) and writes it into the pointer. A pointer row
// therefore always names the highest generation (reconcile checks it).
func lockSubmission(ctx context.Context, tx *sql.Tx, typ, id string) (current int64, generation int, err error) {
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO judge_submission (submission_type, submission_id) VALUES (?, ?)
		 ON DUPLICATE KEY UPDATE submission_type = submission_type`, typ, id); err != nil {
		return 0, 0, fmt.Errorf("store: pointer: %w", err)
	}
	err = tx.QueryRowContext(ctx,
		`SELECT current_job_id, generation FROM judge_submission
		 WHERE submission_type = ? AND submission_id = ? FOR UPDATE`, typ, id).Scan(&current, &generation)
	if err != nil {
		return 0, 0, fmt.Errorf("store: pointer: %w", err)
	}
	if current != 0 {
		return current, generation, nil
	}
	err = tx.QueryRowContext(ctx,
		`SELECT id FROM judge_job WHERE submission_type = ? AND submission_id = ? AND generation = 1 FOR UPDATE`,
		typ, id).Scan(&current)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("store: pointer: generation 1: %w", err)
	}
	if err := setPointer(ctx, tx, typ, id, current, 1); err != nil {
		return 0, 0, err
	}
	return current, 1, nil
}

// setPointer names a locked submission's current job.
func setPointer(ctx context.Context, tx *sql.Tx, typ, id string, jobID int64, generation int) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_submission SET current_job_id = ?, generation = ?, updated_at = NOW(6)
		 WHERE submission_type = ? AND submission_id = ?`, jobID, generation, typ, id); err != nil {
		return fmt.Errorf("store: pointer: %w", err)
	}
	return nil
}

type jobRow struct {
	submissionType, submissionID string
	generation                   int
	kind                         JobKind
	pool, language               string
	manifestID                   int64
	snapshot                     []byte
	digest                       string
	priority, maxAttempts        int
	requiredNode                 int64
	requiredCaps                 uint64
	// slotWeight is the slots the job holds while it runs
	// (manifest.SlotWeight); 0 is taken as 1.
	slotWeight int
}

func (s *core) insertJob(ctx context.Context, tx *sql.Tx, j jobRow) (int64, error) {
	ids, err := s.insertJobs(ctx, tx, []jobRow{j})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// insertJobs writes QUEUED jobs in one statement and returns their ids in
// order. One row's id is LAST_INSERT_ID(); for several, the ids are read back
// by identity rather than assumed consecutive.
func (s *core) insertJobs(ctx context.Context, tx *sql.Tx, jobs []jobRow) ([]int64, error) {
	q, args := jobInsertSQL(jobs)
	r, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: insert job: %w", err)
	}
	ids := make([]int64, len(jobs))
	if len(jobs) == 1 {
		if ids[0], err = r.LastInsertId(); err != nil {
			return nil, fmt.Errorf("store: insert job: %w", err)
		}
	} else {
		from, args := identitiesFrom(jobs)
		byIdentity := make(jobIDs, len(jobs))
		rows, err := tx.QueryContext(ctx, identityColumns+from, args...)
		if err != nil {
			return nil, fmt.Errorf("store: insert job: ids: %w", err)
		}
		for rows.Next() {
			if err := byIdentity.scan(rows); err != nil {
				rows.Close()
				return nil, fmt.Errorf("store: insert job: ids: %w", err)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("store: insert job: ids: %w", err)
		}
		if ids, err = byIdentity.ids(jobs); err != nil {
			return nil, err
		}
	}
	if s.db.Hooks != nil && s.db.Hooks.AfterJobInsert != nil {
		if err := s.db.Hooks.AfterJobInsert(); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// jobInsertSQL is the multi-row INSERT of jobs.
func jobInsertSQL(jobs []jobRow) (string, []any) {
	var q strings.Builder
	q.WriteString(`INSERT INTO judge_job (submission_type, submission_id, generation, kind, pool, runtime_spec,
	   manifest_id, request_snapshot, request_digest, priority, required_node_id, state, max_attempts,
	   available_at, created_at, updated_at, required_caps, slot_weight) VALUES `)
	args := make([]any, 0, 14*len(jobs))
	for i, j := range jobs {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'QUEUED', ?, NOW(6), NOW(6), NOW(6), ?, ?)")
		args = append(args, j.submissionType, j.submissionID, j.generation, j.kind, j.pool, j.language,
			j.manifestID, j.snapshot, j.digest, j.priority, j.requiredNode, j.maxAttempts, j.requiredCaps, max(j.slotWeight, 1))
	}
	return q.String(), args
}

// identitiesFrom is the FROM … WHERE that finds jobs (just inserted) by
// their identity: uk_job_identity, whatever order the rows come in.
func identitiesFrom(jobs []jobRow) (string, []any) {
	var in strings.Builder
	args := make([]any, 0, 3*len(jobs))
	for i, j := range jobs {
		if i > 0 {
			in.WriteString(", ")
		}
		in.WriteString("(?, ?, ?)")
		args = append(args, j.submissionType, j.submissionID, j.generation)
	}
	return ` FROM judge_job WHERE (submission_type, submission_id, generation) IN (` + in.String() + `)`, args
}

// identityColumns are what jobIDs.scan reads, from identitiesFrom.
const identityColumns = `SELECT id, submission_type, submission_id, generation`

// identity is a job's (submission type, submission id, generation).
type identity struct {
	typ, sid string
	gen      int
}

// jobIDs maps the identities read by identityColumns to their job ids.
type jobIDs map[identity]int64

func (m jobIDs) scan(r jobdb.RowScanner) error {
	var id int64
	var k identity
	if err := r.Scan(&id, &k.typ, &k.sid, &k.gen); err != nil {
		return err
	}
	m[k] = id
	return nil
}

// ids returns the job id of each of jobs, in order.
func (m jobIDs) ids(jobs []jobRow) ([]int64, error) {
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		if ids[i] = m[identity{j.submissionType, j.submissionID, j.generation}]; ids[i] == 0 {
			return nil, fmt.Errorf("store: insert job: %s/%s generation %d not found after insert", j.submissionType, j.submissionID, j.generation)
		}
	}
	return ids, nil
}

// Admin job errors with their own API codes. They match ErrConflict too.
var (
	// ErrJobNotCurrent: a newer generation of the submission exists.
	ErrJobNotCurrent = &ConflictError{Reason: "a newer generation of this submission exists"}
	// ErrCheckJob: the action does not apply to CHECK jobs.
	ErrCheckJob = &ConflictError{Reason: "CHECK jobs are not rejudged; verify the node again"}
)

// Rejudge makes a new job with generation+1 for the submission, moves the
// pointer to it, and cancels the old job if it had not finished. The old
// job's lease, if any, can no longer post a result.
func (s *Jobs) Rejudge(ctx context.Context, typ, id, actor, reason string) (EnqueueResult, error) {
	return s.rejudge(ctx, typ, id, 0, actor, reason)
}

// RejudgeJob rejudges the submission of a SUBMISSION job by job id, only if
// that job is still the submission's current one (ErrJobNotCurrent
// otherwise): two admins rejudging the same job make one new generation, not
// two.
func (s *Jobs) RejudgeJob(ctx context.Context, jobID int64, actor, reason string) (EnqueueResult, error) {
	var typ, sid string
	var kind JobKind
	err := s.db.Pool.QueryRowContext(ctx, `SELECT submission_type, submission_id, kind FROM judge_job WHERE id = ?`, jobID).Scan(&typ, &sid, &kind)
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

// rejudge makes generation+1 of a submission. With onlyJob > 0 it does so
// only while that job is still the submission's current one
// (ErrJobNotCurrent otherwise), so racing admins make one generation.
func (s *core) rejudge(ctx context.Context, typ, id string, onlyJob int64, actor, reason string) (EnqueueResult, error) {
	var res EnqueueResult
	var pool string
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		cur, gen, err := lockSubmission(ctx, tx, typ, id)
		if err != nil {
			return err
		}
		if cur == 0 {
			return fmt.Errorf("submission %s/%s: %w", typ, id, ErrNotFound)
		}
		if onlyJob > 0 && cur != onlyJob {
			return fmt.Errorf("job %d (current is %d): %w", onlyJob, cur, ErrJobNotCurrent)
		}
		var j jobRow
		var state JobState
		err = tx.QueryRowContext(ctx,
			`SELECT kind, pool, runtime_spec, manifest_id, request_snapshot, request_digest, priority,
			        required_node_id, required_caps, state
			 FROM judge_job WHERE id = ? FOR UPDATE`, cur).Scan(
			&j.kind, &j.pool, &j.language, &j.manifestID, &j.snapshot, &j.digest, &j.priority,
			&j.requiredNode, &j.requiredCaps, &state)
		if err != nil {
			return fmt.Errorf("store: rejudge: job %d: %w", cur, err)
		}
		if j.kind != KindSubmission {
			return jobdb.Invalid("submission", "only business submissions can be rejudged")
		}
		// Worked out again, not copied: a job enqueued before slot weights
		// (migration 00018) and finished keeps the 1 it was given.
		om, err := s.db.ReadManifest(ctx, tx, j.manifestID)
		if err != nil {
			return err
		}
		j.slotWeight = om.Manifest.SlotWeight()
		if !state.Terminal() {
			if err := cancelLocked(ctx, tx, cur, "SUPERSEDED"); err != nil {
				return err
			}
		}
		j.submissionType, j.submissionID, j.generation = typ, id, gen+1
		j.maxAttempts = s.db.Cfg.MaxAttempts
		newID, err := s.insertJob(ctx, tx, j)
		if err != nil {
			return err
		}
		if err := setPointer(ctx, tx, typ, id, newID, gen+1); err != nil {
			return fmt.Errorf("store: rejudge: %w", err)
		}
		if err := jobdb.Audit(ctx, tx, actor, "job.rejudge", 0, newID, reason, map[string]any{"previousJobId": cur}); err != nil {
			return err
		}
		res = EnqueueResult{JobID: newID, Generation: gen + 1, State: StateQueued, Created: true}
		pool = j.pool
		return jobdb.BumpPool(ctx, tx, pool)
	})
	if err == nil {
		s.db.Notify(pool)
		s.db.Observer().JobsEnqueued(ctx, pool, "rejudge", 1)
	}
	return res, err
}

// Cancel cancels the submission's current job if it has not finished. A
// running lease learns it at its next renew (CANCELLED) or result (409).
func (s *Jobs) Cancel(ctx context.Context, typ, id, actor, reason string) (JobState, error) {
	var out JobState
	var cur int64
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		cur, _, err = lockSubmission(ctx, tx, typ, id)
		if err != nil {
			return err
		}
		if cur == 0 {
			return fmt.Errorf("submission %s/%s: %w", typ, id, ErrNotFound)
		}
		out, err = s.cancelJobLocked(ctx, tx, cur, actor, reason)
		return err
	})
	if err == nil && out == StateCancelled {
		s.db.NotifySettled(cur) // waiting status reads answer now
	}
	return out, err
}

// CancelJob cancels a job by id (admin). Only the submission's current job or
// a CHECK job can be live, so the pointer is locked first all the same.
func (s *Jobs) CancelJob(ctx context.Context, jobID int64, actor, reason string) (JobState, error) {
	var out JobState
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var typ, id string
		err := tx.QueryRowContext(ctx, `SELECT submission_type, submission_id FROM judge_job WHERE id = ?`, jobID).Scan(&typ, &id)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("job %d: %w", jobID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: cancel job: %w", err)
		}
		if _, _, err := lockSubmission(ctx, tx, typ, id); err != nil {
			return err
		}
		out, err = s.cancelJobLocked(ctx, tx, jobID, actor, reason)
		return err
	})
	if err == nil && out == StateCancelled {
		s.db.NotifySettled(jobID)
	}
	return out, err
}

func (s *core) cancelJobLocked(ctx context.Context, tx *sql.Tx, jobID int64, actor, reason string) (JobState, error) {
	var state JobState
	if err := tx.QueryRowContext(ctx, `SELECT state FROM judge_job WHERE id = ? FOR UPDATE`, jobID).Scan(&state); err != nil {
		return "", fmt.Errorf("store: cancel: job %d: %w", jobID, err)
	}
	if state.Terminal() {
		return state, nil
	}
	if err := cancelLocked(ctx, tx, jobID, "CANCELLED"); err != nil {
		return "", err
	}
	if err := jobdb.Audit(ctx, tx, actor, "job.cancel", 0, jobID, reason, nil); err != nil {
		return "", err
	}
	return StateCancelled, nil
}

// cancelLocked moves a locked, live job to CANCELLED, closes its open
// attempt with the given outcome and, like every way a job ends, writes its
// one settlement event (status CANCELLED) in the same transaction.
func cancelLocked(ctx context.Context, tx *sql.Tx, jobID int64, attemptOutcome string) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_job_attempt a JOIN judge_job j ON j.id = a.job_id AND j.lease_epoch = a.lease_epoch
		 SET a.outcome = ?, a.ended_at = NOW(6)
		 WHERE j.id = ? AND j.state = 'RUNNING' AND a.outcome = 'RUNNING'`, attemptOutcome, jobID); err != nil {
		return fmt.Errorf("store: cancel: attempt: %w", err)
	}
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_job SET state = 'CANCELLED', status_version = status_version + 1, last_error_code = ?,
		   finished_at = NOW(6), updated_at = NOW(6), lease_until = NULL
		 WHERE id = ?`, attemptOutcome, jobID); err != nil {
		return fmt.Errorf("store: cancel: job: %w", err)
	}
	st := jobdb.Settlement{JobID: jobID, Status: "CANCELLED", ErrorCode: attemptOutcome}
	if err := tx.QueryRowContext(ctx,
		`SELECT kind, submission_type, submission_id, generation FROM judge_job WHERE id = ?`, jobID).Scan(
		&st.Kind, &st.Typ, &st.Sid, &st.Generation); err != nil {
		return fmt.Errorf("store: cancel: %w", err)
	}
	return jobdb.Settle(ctx, tx, st)
}
