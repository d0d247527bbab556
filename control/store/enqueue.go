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
	"slices"
	"strings"

	"github.com/kece-oj/kece/control/internal/jobdb"
	"github.com/kece-oj/kece/control/manifest"
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
		return "", nil, "", jobdb.Invalid("submissionType", "must match %s and not start with %s", submissionTypeRE, reservedTypePrefix)
	}
	if !submissionIDRE.MatchString(r.SubmissionID) {
		return "", nil, "", jobdb.Invalid("submissionId", "must match %s", submissionIDRE)
	}
	pool, err = manifest.PoolForLanguage(r.Language)
	if err != nil {
		return "", nil, "", jobdb.InvalidOf(ErrUnknownLanguage, "language", "%v", err)
	}
	if r.ManifestID <= 0 {
		return "", nil, "", jobdb.InvalidOf(ErrManifestMissing, "manifestId", "required")
	}
	if r.Priority < -100 || r.Priority > 100 {
		return "", nil, "", jobdb.Invalid("priority", "must be -100..100")
	}
	if strings.TrimSpace(r.Source) == "" {
		return "", nil, "", jobdb.Invalid("source", "must not be empty")
	}
	if err := checkSourceFiles(r.Language, r.Source, r.Files); err != nil {
		return "", nil, "", err
	}
	snapshot, err = json.Marshal(Snapshot{Language: r.Language, Source: r.Source, Files: r.Files})
	if err != nil {
		return "", nil, "", fmt.Errorf("store: snapshot: %w", err)
	}
	if len(snapshot) > maxSnapshot {
		return "", nil, "", jobdb.Invalid("source", "request snapshot is %d bytes, above the limit of %d", len(snapshot), maxSnapshot)
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
func (s *core) enqueue(ctx context.Context, req EnqueueRequest) (EnqueueResult, error) {
	pool, snapshot, digest, needs, err := s.validateEnqueue(ctx, req)
	if err != nil {
		return EnqueueResult{}, err
	}
	// Fast path for a new submission: its job row, batched with other
	// callers' new submissions into one autocommit INSERT. A duplicate
	// identity (1062 on uk_job_identity) takes the locking path, which
	// returns the existing job or a conflict.
	n := newJob{req: req, pool: pool, snapshot: snapshot, digest: digest, needs: needs}
	res, err := s.enqueuer.Do(ctx, n)
	if jobdb.IsDuplicate(err) {
		err = s.db.InTx(ctx, func(tx *sql.Tx) error {
			var err error
			res, err = s.enqueueLocked(ctx, tx, req, pool, snapshot, digest, needs)
			return err
		})
	}
	if err == nil && res.Created {
		s.db.NotifyJobs(pool, 1, needs.caps)
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
func (s *core) enqueueMany(ctx context.Context, reqs []EnqueueRequest) ([]EnqueueResult, error) {
	jobs, err := s.validateMany(ctx, reqs)
	if err != nil {
		return nil, err
	}
	var out []EnqueueResult
	err = s.db.InTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = s.enqueueManyTx(ctx, tx, jobs)
		return err
	})
	if jobdb.IsDuplicate(err) {
		err = s.db.InTx(ctx, func(tx *sql.Tx) error {
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
func (s *core) validateMany(ctx context.Context, reqs []EnqueueRequest) ([]newJob, error) {
	if len(reqs) == 0 || len(reqs) > EnqueueManyMax {
		return nil, jobdb.Invalid("submissions", "must hold 1..%d submissions, got %d", EnqueueManyMax, len(reqs))
	}
	jobs := make([]newJob, len(reqs))
	seen := make(map[[2]string]int, len(reqs))
	var bad BulkError
	for i, req := range reqs {
		pool, snapshot, digest, needs, err := s.validateEnqueue(ctx, req)
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
				Err: jobdb.Invalid("submissionId", "repeats submissions[%d] (%s/%s)", j, req.SubmissionType, req.SubmissionID)})
			continue
		}
		seen[k] = i
		jobs[i] = newJob{req: req, pool: pool, snapshot: snapshot, digest: digest, needs: needs}
	}
	if len(bad.Items) > 0 {
		return nil, &bad
	}
	return jobs, nil
}

// ValidateEnqueueMany checks a bulk enqueue as EnqueueMany would, writing
// nothing: nil, or a *BulkError listing every invalid item.
func (s *Jobs) ValidateEnqueueMany(ctx context.Context, reqs []EnqueueRequest) error {
	_, err := s.validateMany(ctx, reqs)
	return err
}

// enqueueManyTx is the fast path of a bulk enqueue inside tx: every item is
// new, written as generation 1 in one multi-row INSERT. A submission that
// exists fails it with 1062 (uk_job_identity); the caller rolls back and
// takes enqueueManyLocked. New jobs need no pointer row (lockSubmission) and
// no pool-signal write: other replicas see them through the pool's highest
// job id (PoolSignals).
func (s *core) enqueueManyTx(ctx context.Context, tx *sql.Tx, jobs []newJob) ([]EnqueueResult, error) {
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
func (s *core) enqueueManyLocked(ctx context.Context, tx *sql.Tx, reqs []EnqueueRequest, jobs []newJob) ([]EnqueueResult, error) {
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
		r, err := s.enqueueLocked(ctx, tx, reqs[i], jobs[i].pool, jobs[i].snapshot, jobs[i].digest, jobs[i].needs)
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
func (s *core) notifyCreated(jobs []newJob, out []EnqueueResult) {
	pools := map[string]int{}
	caps := map[string]uint64{}
	for i, r := range out {
		if r.Created {
			pools[jobs[i].pool]++
			caps[jobs[i].pool] |= jobs[i].needs.caps
		}
	}
	for p, n := range pools {
		s.db.NotifyJobs(p, n, caps[p])
	}
}

// newJob is a validated submission that does not exist yet (as far as the
// caller knows).
type newJob struct {
	req      EnqueueRequest
	pool     string
	snapshot []byte
	digest   string
	needs    jobNeeds
}

// jobNeeds is what a job needs of the node that takes it, worked out from
// its manifest and submission at enqueue.
type jobNeeds struct {
	caps   uint64 // required capabilities (jobdb.RequiredCaps)
	weight int    // slots it holds while it runs (manifest.SlotWeight)
}

// enqueueBatch commits concurrent new submissions in one INSERT. If any of
// them exists already the statement writes nothing and each goes alone (and
// from there to the locking path), so each caller gets its own answer. The
// same identity twice in one batch also goes alone.
func (s *core) enqueueBatch(ctx context.Context, calls []*jobdb.BatchCall[newJob, EnqueueResult]) {
	seen := make(map[[2]string]bool, len(calls))
	var batch, alone []*jobdb.BatchCall[newJob, EnqueueResult]
	for _, c := range calls {
		k := [2]string{c.Req.req.SubmissionType, c.Req.req.SubmissionID}
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
			jobs[i] = c.Req
		}
		ids, err := s.insertNewJobsAutocommit(ctx, jobs)
		if err == nil {
			if len(batch) > 1 {
				s.db.Stats.Batches.Add(1)
			}
			for i, c := range batch {
				c.Resp = EnqueueResult{JobID: ids[i], Generation: 1, State: StateQueued, Created: true}
			}
			batch = nil
		} else if len(batch) == 1 {
			batch[0].Err = err
			batch = nil
		}
	}
	for _, c := range append(batch, alone...) {
		ids, err := s.insertNewJobsAutocommit(ctx, []newJob{c.Req})
		if c.Err = err; err == nil {
			c.Resp = EnqueueResult{JobID: ids[0], Generation: 1, State: StateQueued, Created: true}
		}
	}
}

// firstGenerations are the job rows of new submissions.
func (s *core) firstGenerations(jobs []newJob) []jobRow {
	rows := make([]jobRow, len(jobs))
	for i, n := range jobs {
		rows[i] = jobRow{
			submissionType: n.req.SubmissionType, submissionID: n.req.SubmissionID, generation: 1,
			kind: KindSubmission, pool: n.pool, language: n.req.Language, manifestID: n.req.ManifestID,
			snapshot: n.snapshot, digest: n.digest, priority: n.req.Priority, maxAttempts: s.db.Cfg.MaxAttempts,
			requiredCaps: n.needs.caps, slotWeight: n.needs.weight,
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
func (s *core) insertNewJobsAutocommit(ctx context.Context, jobs []newJob) ([]int64, error) {
	rows := s.firstGenerations(jobs)
	insert, insertArgs := jobInsertSQL(rows)
	if len(rows) == 1 {
		var id int64
		err := s.db.Retried(ctx, func() error {
			r, err := s.db.Pool.ExecContext(ctx, insert, insertArgs...)
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
	sc := (&jobdb.Script{}).Exec(insert, insertArgs...).Rows(identityColumns+from, identArgs...)
	var ids []int64
	err := s.db.InScripts(ctx, func(c *jobdb.ScriptConn) error {
		byIdentity := make(jobIDs, len(rows))
		if err := c.Send(ctx, sc, byIdentity.scan); err != nil {
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
func (s *core) enqueueTxPublic(ctx context.Context, tx *sql.Tx, req EnqueueRequest) (EnqueueResult, error) {
	res, _, err := s.enqueueTx(ctx, tx, req)
	return res, err
}

func (s *core) enqueueTx(ctx context.Context, tx *sql.Tx, req EnqueueRequest) (EnqueueResult, string, error) {
	pool, snapshot, digest, needs, err := s.validateEnqueue(ctx, req)
	if err != nil {
		return EnqueueResult{}, "", err
	}
	res, err := s.enqueueLocked(ctx, tx, req, pool, snapshot, digest, needs)
	return res, pool, err
}

// validateEnqueue checks the request and its manifest (manifests are
// immutable and never deleted, so this needs no transaction).
func (s *core) validateEnqueue(ctx context.Context, req EnqueueRequest) (pool string, snapshot []byte, digest string, needs jobNeeds, err error) {
	pool, snapshot, digest, err = req.validate(s.db.Cfg.MaxSnapshotBytes)
	if err != nil {
		return "", nil, "", needs, err
	}
	m, err := s.manifestFor(ctx, req.Tenant, req.ManifestID)
	if errors.Is(err, ErrNotFound) {
		return "", nil, "", needs, jobdb.InvalidOf(ErrManifestMissing, "manifestId", "manifest %d does not exist", req.ManifestID)
	}
	if err != nil {
		return "", nil, "", needs, err
	}
	if err := manifest.CheckPoolKind(pool, m.Kind); err != nil {
		return "", nil, "", needs, jobdb.InvalidOf(ErrManifestMismatch, "language", "%v", err)
	}
	if err := manifest.CheckGraderLanguage(req.Language, m); err != nil {
		return "", nil, "", needs, jobdb.InvalidOf(ErrManifestMismatch, "language", "%v", err)
	}
	if err := manifest.CheckLanguageMemory(req.Language, m); err != nil {
		return "", nil, "", needs, jobdb.InvalidOf(ErrMemoryTooLow, "limits.memoryMb", "%v", err)
	}
	return pool, snapshot, digest, jobNeeds{caps: jobdb.RequiredCaps(req.Language, m, len(req.Files) > 0), weight: m.SlotWeight()}, nil
}

// enqueueLocked is the locking path: lock the submission (its pointer
// comes before its jobs in the lock order, doc.go), then return the existing current job or insert
// generation 1.
func (s *core) enqueueLocked(ctx context.Context, tx *sql.Tx, req EnqueueRequest, pool string, snapshot []byte, digest string, needs jobNeeds) (EnqueueResult, error) {
	cur, gen, err := lockSubmission(ctx, tx, req.SubmissionType, req.SubmissionID)
	if err != nil {
		return EnqueueResult{}, err
	}
	if cur == 0 {
		id, err := s.insertJob(ctx, tx, jobRow{
			submissionType: req.SubmissionType, submissionID: req.SubmissionID, generation: 1,
			kind: KindSubmission, pool: pool, language: req.Language, manifestID: req.ManifestID,
			snapshot: snapshot, digest: digest, priority: req.Priority, maxAttempts: s.db.Cfg.MaxAttempts,
			requiredCaps: needs.caps, slotWeight: needs.weight,
		})
		switch {
		case err == nil:
			if err := setPointer(ctx, tx, req.SubmissionType, req.SubmissionID, id, 1); err != nil {
				return EnqueueResult{}, err
			}
			if err := jobdb.BumpPool(ctx, tx, pool); err != nil {
				return EnqueueResult{}, err
			}
			return EnqueueResult{JobID: id, Generation: 1, State: StateQueued, Created: true}, nil
		case !jobdb.IsDuplicate(err):
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
		return EnqueueResult{}, jobdb.Conflict("submission %s/%s already exists with a different request; rejudge to judge it again",
			req.SubmissionType, req.SubmissionID)
	}
	return EnqueueResult{JobID: cur, Generation: gen, State: state}, nil
}

// Enqueue accepts a submission; see enqueue.
func (s *Jobs) Enqueue(ctx context.Context, req EnqueueRequest) (EnqueueResult, error) {
	res, err := s.enqueue(ctx, req)
	s.observeEnqueue(ctx, req, res, err, "submission")
	return res, err
}

// EnqueueTx enqueues inside the caller's transaction; see enqueueTxPublic.
func (s *Jobs) EnqueueTx(ctx context.Context, tx *sql.Tx, req EnqueueRequest) (EnqueueResult, error) {
	res, err := s.enqueueTxPublic(ctx, tx, req)
	s.observeEnqueue(ctx, req, res, err, "submission")
	return res, err
}

// EnqueueIdempotent enqueues with an Idempotency-Key; see enqueueIdempotent.
func (s *Jobs) EnqueueIdempotent(ctx context.Context, tokenID int64, key string, req EnqueueRequest) (EnqueueResult, error) {
	if key == "" {
		return s.Enqueue(ctx, req) // counted there
	}
	res, err := s.enqueueIdempotent(ctx, tokenID, key, req)
	s.observeEnqueue(ctx, req, res, err, "submission")
	return res, err
}

// EnqueueMany accepts many submissions in one transaction; see enqueueMany.
// Created jobs are counted per pool.
func (s *Jobs) EnqueueMany(ctx context.Context, reqs []EnqueueRequest) ([]EnqueueResult, error) {
	out, err := s.enqueueMany(ctx, reqs)
	s.observeEnqueueMany(ctx, reqs, out, err)
	return out, err
}

// EnqueueManyIdempotent is EnqueueMany behind an Idempotency-Key; see
// enqueueManyIdempotent.
func (s *Jobs) EnqueueManyIdempotent(ctx context.Context, tokenID int64, key string, reqs []EnqueueRequest) ([]EnqueueResult, error) {
	if key == "" {
		return s.EnqueueMany(ctx, reqs) // counted there
	}
	out, err := s.enqueueManyIdempotent(ctx, tokenID, key, reqs)
	s.observeEnqueueMany(ctx, reqs, out, err)
	return out, err
}
