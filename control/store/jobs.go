package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/kece-oj/kece/control/manifest"
)

// JobKind distinguishes business submissions from node self-checks.
type JobKind string

// Job kinds.
const (
	KindSubmission JobKind = "SUBMISSION"
	KindCheck      JobKind = "CHECK"
)

// JobState is the scheduling state of a job.
type JobState string

// Job states (DESIGN §4).
const (
	StateQueued    JobState = "QUEUED"
	StateRunning   JobState = "RUNNING"
	StateCompleted JobState = "COMPLETED"
	StateFailed    JobState = "FAILED"
	StateCancelled JobState = "CANCELLED"
)

// Terminal reports whether no further transition is possible.
func (s JobState) Terminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateCancelled
}

// CheckSubmissionType is the reserved submission type of CHECK jobs; business
// types may not start with "KECE_".
const CheckSubmissionType = "KECE_CHECK"

var (
	submissionTypeRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,31}$`)
	submissionIDRE   = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)
)

// EnqueueRequest is a business submission. The pool follows from Language,
// the limits from the manifest; the caller chooses neither.
type EnqueueRequest struct {
	SubmissionType string
	SubmissionID   string
	Language       string
	Source         string
	// Files are further source files beside Source (multi-file submissions).
	Files      []SourceFile
	ManifestID int64
	// Priority: lower runs first; 0 is normal. Range -100..100.
	Priority int
	// Tenant is whose test data the submission may use: a manifest it may
	// not use is refused as missing. The zero value is every type (a token
	// of every type, or a caller sharing the database).
	Tenant Tenant
}

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

// EnqueueResult identifies the job that now represents the submission.
type EnqueueResult struct {
	JobID      int64
	Generation int
	State      JobState
	// Created is false when an identical earlier enqueue is returned.
	Created bool
}

func (r EnqueueRequest) validate(maxSnapshot int) (pool string, snapshot []byte, digest string, err error) {
	if !submissionTypeRE.MatchString(r.SubmissionType) || IsReservedType(r.SubmissionType) {
		return "", nil, "", invalid("submissionType", "must match %s and not start with %s", submissionTypeRE, reservedTypePrefix)
	}
	if !submissionIDRE.MatchString(r.SubmissionID) {
		return "", nil, "", invalid("submissionId", "must match %s", submissionIDRE)
	}
	pool, err = manifest.PoolForLanguage(r.Language)
	if err != nil {
		return "", nil, "", invalidOf(ErrUnknownLanguage, "language", "%v", err)
	}
	if r.ManifestID <= 0 {
		return "", nil, "", invalidOf(ErrManifestMissing, "manifestId", "required")
	}
	if r.Priority < -100 || r.Priority > 100 {
		return "", nil, "", invalid("priority", "must be -100..100")
	}
	if strings.TrimSpace(r.Source) == "" {
		return "", nil, "", invalid("source", "must not be empty")
	}
	if err := checkSourceFiles(r.Language, r.Files); err != nil {
		return "", nil, "", err
	}
	snapshot, err = json.Marshal(Snapshot{Language: r.Language, Source: r.Source, Files: r.Files})
	if err != nil {
		return "", nil, "", fmt.Errorf("store: snapshot: %w", err)
	}
	if len(snapshot) > maxSnapshot {
		return "", nil, "", invalid("source", "request snapshot is %d bytes, above the limit of %d", len(snapshot), maxSnapshot)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d\n%d\n", r.ManifestID, r.Priority)
	h.Write(snapshot)
	return pool, snapshot, hex.EncodeToString(h.Sum(nil)), nil
}

// enqueue accepts a submission. A new submission is one INSERT of its
// generation-1 job (no pointer row: the current job of a submission is its
// highest generation, see lockSubmission). Enqueuing an identity that exists
// returns the existing current job when the request is the same, and a
// conflict when it differs (use Rejudge for a new generation).
func (s *Store) enqueue(ctx context.Context, req EnqueueRequest) (EnqueueResult, error) {
	pool, snapshot, digest, caps, err := s.validateEnqueue(ctx, req)
	if err != nil {
		return EnqueueResult{}, err
	}
	// Fast path for a new submission: its job row, batched with other
	// callers' new submissions into one autocommit INSERT. A duplicate
	// identity (1062 on uk_job_identity) takes the locking path, which
	// returns the existing job or a conflict.
	n := newJob{req: req, pool: pool, snapshot: snapshot, digest: digest, caps: caps}
	res, err := s.enqueuer.do(ctx, n)
	if isDuplicate(err) {
		err = s.inTx(ctx, func(tx *sql.Tx) error {
			var err error
			res, err = s.enqueueLocked(ctx, tx, req, pool, snapshot, digest, caps)
			return err
		})
	}
	if err == nil && res.Created {
		s.notifyJobs(pool, 1, caps)
	}
	return res, err
}

// EnqueueManyMax is the most submissions one EnqueueMany call takes.
const EnqueueManyMax = 1000

// ItemError is why one item of a bulk enqueue was refused: it wraps the
// item's own error (a *ValidationError of any kind, or a conflict).
type ItemError struct {
	Index int
	Err   error
}

func (e *ItemError) Error() string { return fmt.Sprintf("submissions[%d]: %v", e.Index, e.Err) }

// Unwrap returns the item's error.
func (e *ItemError) Unwrap() error { return e.Err }

// BulkError lists every item of a bulk enqueue that failed validation, in
// request order; nothing was written. errors.Is sees each item's class
// (ErrValidation, ErrUnknownLanguage, …).
type BulkError struct {
	Items []*ItemError
}

func (e *BulkError) Error() string {
	if len(e.Items) == 1 {
		return e.Items[0].Error()
	}
	return fmt.Sprintf("%s (and %d more invalid submissions)", e.Items[0].Error(), len(e.Items)-1)
}

// Unwrap returns the items' errors.
func (e *BulkError) Unwrap() []error {
	out := make([]error, len(e.Items))
	for i, it := range e.Items {
		out[i] = it
	}
	return out
}

// enqueueMany accepts many submissions in one transaction (contest imports,
// rejudge-all, a business backend flushing its queue): all of them or none.
// Each answers like Enqueue — a new job or the existing identical one. Every
// item is validated first and all invalid ones are reported together
// (*BulkError); a conflict (an existing identity with a different request)
// fails the whole call with an *ItemError naming it. New submissions are
// written with one multi-row INSERT each for jobs and pointers.
func (s *Store) enqueueMany(ctx context.Context, reqs []EnqueueRequest) ([]EnqueueResult, error) {
	jobs, err := s.validateMany(ctx, reqs)
	if err != nil {
		return nil, err
	}
	var out []EnqueueResult
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = s.enqueueManyTx(ctx, tx, jobs)
		return err
	})
	if isDuplicate(err) {
		err = s.inTx(ctx, func(tx *sql.Tx) error {
			var err error
			out, err = s.enqueueManyLocked(ctx, tx, reqs, jobs)
			return err
		})
	}
	if err != nil {
		return nil, err
	}
	s.notifyCreated(jobs, out)
	return out, nil
}

// validateMany checks every item of a bulk enqueue and reports all invalid
// ones; the same identity twice in one call is invalid.
func (s *Store) validateMany(ctx context.Context, reqs []EnqueueRequest) ([]newJob, error) {
	if len(reqs) == 0 || len(reqs) > EnqueueManyMax {
		return nil, invalid("submissions", "must hold 1..%d submissions, got %d", EnqueueManyMax, len(reqs))
	}
	jobs := make([]newJob, len(reqs))
	seen := make(map[[2]string]int, len(reqs))
	var bad BulkError
	for i, req := range reqs {
		pool, snapshot, digest, caps, err := s.validateEnqueue(ctx, req)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) {
				return nil, err // the database, not the item
			}
			bad.Items = append(bad.Items, &ItemError{Index: i, Err: err})
			continue
		}
		k := [2]string{req.SubmissionType, req.SubmissionID}
		if j, dup := seen[k]; dup {
			bad.Items = append(bad.Items, &ItemError{Index: i,
				Err: invalid("submissionId", "repeats submissions[%d] (%s/%s)", j, req.SubmissionType, req.SubmissionID)})
			continue
		}
		seen[k] = i
		jobs[i] = newJob{req: req, pool: pool, snapshot: snapshot, digest: digest, caps: caps}
	}
	if len(bad.Items) > 0 {
		return nil, &bad
	}
	return jobs, nil
}

// ValidateEnqueueMany checks a bulk enqueue as EnqueueMany would, writing
// nothing: nil, or a *BulkError listing every invalid item.
func (s *Store) ValidateEnqueueMany(ctx context.Context, reqs []EnqueueRequest) error {
	_, err := s.validateMany(ctx, reqs)
	return err
}

// enqueueManyTx is the fast path of a bulk enqueue inside tx: every item is
// new, written as generation 1 in one multi-row INSERT. A submission that
// exists fails it with 1062 (uk_job_identity); the caller rolls back and
// takes enqueueManyLocked. New jobs need no pointer row (lockSubmission) and
// no pool-signal write: other replicas see them through the pool's highest
// job id (PoolSignals).
func (s *Store) enqueueManyTx(ctx context.Context, tx *sql.Tx, jobs []newJob) ([]EnqueueResult, error) {
	ids, err := s.insertJobs(ctx, tx, s.firstGenerations(jobs))
	if err != nil {
		return nil, err
	}
	out := make([]EnqueueResult, len(ids))
	for i, id := range ids {
		out[i] = EnqueueResult{JobID: id, Generation: 1, State: StateQueued, Created: true}
	}
	return out, nil
}

// enqueueManyLocked is the locking path of a bulk enqueue inside tx, for
// calls where some submissions exist: item by item, pointers locked in
// identity order so two overlapping calls cannot deadlock.
func (s *Store) enqueueManyLocked(ctx context.Context, tx *sql.Tx, reqs []EnqueueRequest, jobs []newJob) ([]EnqueueResult, error) {
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(reqs[a].SubmissionType, reqs[b].SubmissionType),
			cmp.Compare(reqs[a].SubmissionID, reqs[b].SubmissionID))
	})
	out := make([]EnqueueResult, len(reqs))
	for _, i := range order {
		r, err := s.enqueueLocked(ctx, tx, reqs[i], jobs[i].pool, jobs[i].snapshot, jobs[i].digest, jobs[i].caps)
		if err != nil {
			if errors.Is(err, ErrConflict) {
				return nil, &ItemError{Index: i, Err: err}
			}
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// notifyCreated wakes, per pool, as many waiters as the call created jobs.
func (s *Store) notifyCreated(jobs []newJob, out []EnqueueResult) {
	pools := map[string]int{}
	caps := map[string]uint64{}
	for i, r := range out {
		if r.Created {
			pools[jobs[i].pool]++
			caps[jobs[i].pool] |= jobs[i].caps
		}
	}
	for p, n := range pools {
		s.notifyJobs(p, n, caps[p])
	}
}

// newJob is a validated submission that does not exist yet (as far as the
// caller knows).
type newJob struct {
	req      EnqueueRequest
	pool     string
	snapshot []byte
	digest   string
	caps     uint64 // required capabilities (requiredCaps)
}

// enqueueBatch commits concurrent new submissions in one INSERT. If any of
// them exists already the statement writes nothing and each goes alone (and
// from there to the locking path), so each caller gets its own answer. The
// same identity twice in one batch also goes alone.
func (s *Store) enqueueBatch(ctx context.Context, calls []*batchCall[newJob, EnqueueResult]) {
	seen := make(map[[2]string]bool, len(calls))
	var batch, alone []*batchCall[newJob, EnqueueResult]
	for _, c := range calls {
		k := [2]string{c.req.req.SubmissionType, c.req.req.SubmissionID}
		if seen[k] {
			alone = append(alone, c)
			continue
		}
		seen[k] = true
		batch = append(batch, c)
	}
	if len(batch) > 0 {
		jobs := make([]newJob, len(batch))
		for i, c := range batch {
			jobs[i] = c.req
		}
		ids, err := s.insertNewJobsAutocommit(ctx, jobs)
		if err == nil {
			if len(batch) > 1 {
				s.stats.batches.Add(1)
			}
			for i, c := range batch {
				c.resp = EnqueueResult{JobID: ids[i], Generation: 1, State: StateQueued, Created: true}
			}
			batch = nil
		} else if len(batch) == 1 {
			batch[0].err = err
			batch = nil
		}
	}
	for _, c := range append(batch, alone...) {
		ids, err := s.insertNewJobsAutocommit(ctx, []newJob{c.req})
		if c.err = err; err == nil {
			c.resp = EnqueueResult{JobID: ids[0], Generation: 1, State: StateQueued, Created: true}
		}
	}
}

// firstGenerations are the job rows of new submissions.
func (s *Store) firstGenerations(jobs []newJob) []jobRow {
	rows := make([]jobRow, len(jobs))
	for i, n := range jobs {
		rows[i] = jobRow{
			submissionType: n.req.SubmissionType, submissionID: n.req.SubmissionID, generation: 1,
			kind: KindSubmission, pool: n.pool, language: n.req.Language, manifestID: n.req.ManifestID,
			snapshot: n.snapshot, digest: n.digest, priority: n.req.Priority, maxAttempts: s.cfg.MaxAttempts,
			requiredCaps: n.caps,
		}
	}
	return rows
}

// insertNewJobsAutocommit writes generation 1 of new submissions without a
// transaction: the enqueue fast path. One job is one statement, its id the insert id; several
// are one INSERT and, in the same request, the read of their ids by identity
// (never assumed consecutive: they are not under innodb_autoinc_lock_mode=2,
// MySQL 8's default, nor on Galera). A statement is atomic, so a submission
// that exists (1062) leaves none of the batch's rows.
func (s *Store) insertNewJobsAutocommit(ctx context.Context, jobs []newJob) ([]int64, error) {
	rows := s.firstGenerations(jobs)
	insert, insertArgs := jobInsertSQL(rows)
	if len(rows) == 1 {
		var id int64
		err := s.retried(ctx, func() error {
			r, err := s.db.ExecContext(ctx, insert, insertArgs...)
			if err != nil {
				return err
			}
			id, err = r.LastInsertId()
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("store: enqueue: %w", err)
		}
		return []int64{id}, nil
	}
	from, identArgs := identitiesFrom(rows)
	sc := (&script{}).exec(insert, insertArgs...).rows(identityColumns+from, identArgs...)
	var ids []int64
	err := s.inScripts(ctx, func(c *scriptConn) error {
		byIdentity := make(jobIDs, len(rows))
		if err := c.send(ctx, sc, byIdentity.scan); err != nil {
			return fmt.Errorf("store: enqueue: %w", err)
		}
		var err error
		ids, err = byIdentity.ids(rows)
		return err
	})
	return ids, err
}

// enqueueTxPublic enqueues inside the caller's transaction, for business backends
// that share the database: the job exists exactly when their own transaction
// commits. The caller must retry its whole transaction on deadlock. Waiting
// nodes notice the job at their next poll of the pool signal (~10 ms).
func (s *Store) enqueueTxPublic(ctx context.Context, tx *sql.Tx, req EnqueueRequest) (EnqueueResult, error) {
	res, _, err := s.enqueueTx(ctx, tx, req)
	return res, err
}

func (s *Store) enqueueTx(ctx context.Context, tx *sql.Tx, req EnqueueRequest) (EnqueueResult, string, error) {
	pool, snapshot, digest, caps, err := s.validateEnqueue(ctx, req)
	if err != nil {
		return EnqueueResult{}, "", err
	}
	res, err := s.enqueueLocked(ctx, tx, req, pool, snapshot, digest, caps)
	return res, pool, err
}

// validateEnqueue checks the request and its manifest (manifests are
// immutable and never deleted, so this needs no transaction).
func (s *Store) validateEnqueue(ctx context.Context, req EnqueueRequest) (pool string, snapshot []byte, digest string, caps uint64, err error) {
	pool, snapshot, digest, err = req.validate(s.cfg.MaxSnapshotBytes)
	if err != nil {
		return "", nil, "", 0, err
	}
	m, err := s.manifestFor(ctx, req.Tenant, req.ManifestID)
	if errors.Is(err, ErrNotFound) {
		return "", nil, "", 0, invalidOf(ErrManifestMissing, "manifestId", "manifest %d does not exist", req.ManifestID)
	}
	if err != nil {
		return "", nil, "", 0, err
	}
	if err := manifest.CheckPoolKind(pool, m.Kind); err != nil {
		return "", nil, "", 0, invalidOf(ErrManifestMismatch, "language", "%v", err)
	}
	if err := manifest.CheckGraderLanguage(req.Language, m); err != nil {
		return "", nil, "", 0, invalidOf(ErrManifestMismatch, "language", "%v", err)
	}
	if err := manifest.CheckLanguageMemory(req.Language, m); err != nil {
		return "", nil, "", 0, invalidOf(ErrMemoryTooLow, "limits.memoryMb", "%v", err)
	}
	return pool, snapshot, digest, requiredCaps(req.Language, m, len(req.Files) > 0), nil
}

// enqueueLocked is the locking path: lock the submission (lock order
// pointer → job), then return the existing current job or insert
// generation 1.
func (s *Store) enqueueLocked(ctx context.Context, tx *sql.Tx, req EnqueueRequest, pool string, snapshot []byte, digest string, caps uint64) (EnqueueResult, error) {
	cur, gen, err := lockSubmission(ctx, tx, req.SubmissionType, req.SubmissionID)
	if err != nil {
		return EnqueueResult{}, err
	}
	if cur == 0 {
		id, err := s.insertJob(ctx, tx, jobRow{
			submissionType: req.SubmissionType, submissionID: req.SubmissionID, generation: 1,
			kind: KindSubmission, pool: pool, language: req.Language, manifestID: req.ManifestID,
			snapshot: snapshot, digest: digest, priority: req.Priority, maxAttempts: s.cfg.MaxAttempts,
			requiredCaps: caps,
		})
		switch {
		case err == nil:
			if err := setPointer(ctx, tx, req.SubmissionType, req.SubmissionID, id, 1); err != nil {
				return EnqueueResult{}, err
			}
			if err := bumpPool(ctx, tx, pool); err != nil {
				return EnqueueResult{}, err
			}
			return EnqueueResult{JobID: id, Generation: 1, State: StateQueued, Created: true}, nil
		case !isDuplicate(err):
			return EnqueueResult{}, err
		}
		// A fast-path enqueue of the same identity (it takes no pointer
		// lock) committed between lockSubmission's read and this insert; the
		// failed statement wrote nothing. Its job is the current one.
		if cur, gen, err = lockSubmission(ctx, tx, req.SubmissionType, req.SubmissionID); err != nil {
			return EnqueueResult{}, err
		}
		if cur == 0 {
			return EnqueueResult{}, fmt.Errorf("store: enqueue: %s/%s: generation 1 exists but was not found", req.SubmissionType, req.SubmissionID)
		}
	}
	var existingDigest string
	var state JobState
	if err := tx.QueryRowContext(ctx,
		`SELECT request_digest, state FROM judge_job WHERE id = ?`, cur).Scan(&existingDigest, &state); err != nil {
		return EnqueueResult{}, fmt.Errorf("store: enqueue: current job: %w", err)
	}
	if existingDigest != digest {
		return EnqueueResult{}, conflict("submission %s/%s already exists with a different request; rejudge to judge it again",
			req.SubmissionType, req.SubmissionID)
	}
	return EnqueueResult{JobID: cur, Generation: gen, State: state}, nil
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
}

func (s *Store) insertJob(ctx context.Context, tx *sql.Tx, j jobRow) (int64, error) {
	ids, err := s.insertJobs(ctx, tx, []jobRow{j})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// insertJobs writes QUEUED jobs in one statement and returns their ids in
// order. One row's id is LAST_INSERT_ID(); for several, the ids are read back
// by identity rather than assumed consecutive.
func (s *Store) insertJobs(ctx context.Context, tx *sql.Tx, jobs []jobRow) ([]int64, error) {
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
	if s.hooks != nil && s.hooks.AfterJobInsert != nil {
		if err := s.hooks.AfterJobInsert(); err != nil {
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
	   available_at, created_at, updated_at, required_caps) VALUES `)
	args := make([]any, 0, 13*len(jobs))
	for i, j := range jobs {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'QUEUED', ?, NOW(6), NOW(6), NOW(6), ?)")
		args = append(args, j.submissionType, j.submissionID, j.generation, j.kind, j.pool, j.language,
			j.manifestID, j.snapshot, j.digest, j.priority, j.requiredNode, j.maxAttempts, j.requiredCaps)
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

func (m jobIDs) scan(r rowScanner) error {
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
func (s *Store) Rejudge(ctx context.Context, typ, id, actor, reason string) (EnqueueResult, error) {
	return s.rejudge(ctx, typ, id, 0, actor, reason)
}

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

// rejudge makes generation+1 of a submission. With onlyJob > 0 it does so
// only while that job is still the submission's current one
// (ErrJobNotCurrent otherwise), so racing admins make one generation.
func (s *Store) rejudge(ctx context.Context, typ, id string, onlyJob int64, actor, reason string) (EnqueueResult, error) {
	var res EnqueueResult
	var pool string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
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
			return invalid("submission", "only business submissions can be rejudged")
		}
		if !state.Terminal() {
			if err := cancelLocked(ctx, tx, cur, "SUPERSEDED"); err != nil {
				return err
			}
		}
		j.submissionType, j.submissionID, j.generation = typ, id, gen+1
		j.maxAttempts = s.cfg.MaxAttempts
		newID, err := s.insertJob(ctx, tx, j)
		if err != nil {
			return err
		}
		if err := setPointer(ctx, tx, typ, id, newID, gen+1); err != nil {
			return fmt.Errorf("store: rejudge: %w", err)
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
		s.observer().JobsEnqueued(ctx, pool, "rejudge", 1)
	}
	return res, err
}

// Cancel cancels the submission's current job if it has not finished. A
// running lease learns it at its next renew (CANCELLED) or result (409).
func (s *Store) Cancel(ctx context.Context, typ, id, actor, reason string) (JobState, error) {
	var out JobState
	var cur int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
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
		s.notifySettled(cur) // waiting status reads answer now
	}
	return out, err
}

// CancelJob cancels a job by id (admin). Only the submission's current job or
// a CHECK job can be live, so the pointer is locked first all the same.
func (s *Store) CancelJob(ctx context.Context, jobID int64, actor, reason string) (JobState, error) {
	var out JobState
	err := s.inTx(ctx, func(tx *sql.Tx) error {
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
		s.notifySettled(jobID)
	}
	return out, err
}

func (s *Store) cancelJobLocked(ctx context.Context, tx *sql.Tx, jobID int64, actor, reason string) (JobState, error) {
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
	if err := audit(ctx, tx, actor, "job.cancel", 0, jobID, reason, nil); err != nil {
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
	st := settlement{jobID: jobID, status: "CANCELLED", errorCode: attemptOutcome}
	if err := tx.QueryRowContext(ctx,
		`SELECT kind, submission_type, submission_id, generation FROM judge_job WHERE id = ?`, jobID).Scan(
		&st.kind, &st.typ, &st.sid, &st.generation); err != nil {
		return fmt.Errorf("store: cancel: %w", err)
	}
	return settle(ctx, tx, st)
}
