package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/internal/jobdb"
)

// Page sizes of the admin lists (the contracts' Limit parameter).
const (
	PageLimitDefault = 100
	PageLimitMax     = 500
)

// JobFilter narrows ListJobs; zero fields match everything. Validate says
// what is wrong with one; ListJobs refuses an invalid filter.
type JobFilter struct {
	State          JobState
	Pool           string
	Kind           JobKind
	SubmissionType string
	// SubmissionID names one submission together with SubmissionType (every
	// generation of it); it needs SubmissionType.
	SubmissionID string
	// Verdict matches COMPLETED jobs with this verdict status (AC, WA, …).
	Verdict string
	// CreatedAfter (inclusive) and CreatedBefore (exclusive) bound the
	// creation time; zero is unbounded.
	CreatedAfter  time.Time
	CreatedBefore time.Time
	// BeforeID pages backwards from an id (exclusive); 0 starts at the newest.
	BeforeID int64
	// Limit is the page size, 1..PageLimitMax; 0 takes PageLimitDefault.
	Limit int
}

// Validate refuses filters that cannot match as asked: unknown enum values,
// a submission id without its type, an empty time range, a bad page size.
func (f JobFilter) Validate() error {
	switch f.State {
	case "", StateQueued, StateRunning, StateCompleted, StateFailed, StateCancelled:
	default:
		return jobdb.Invalid("state", "unknown job state %q", f.State)
	}
	switch f.Kind {
	case "", KindSubmission, KindCheck:
	default:
		return jobdb.Invalid("kind", "unknown job kind %q", f.Kind)
	}
	if f.Pool != "" && !contracts.ValidPool(f.Pool) {
		return jobdb.Invalid("pool", "unknown pool %q", f.Pool)
	}
	if f.SubmissionType != "" && !submissionTypeRE.MatchString(f.SubmissionType) {
		return jobdb.Invalid("submissionType", "%q is not a submission type", f.SubmissionType)
	}
	if f.SubmissionID != "" {
		if f.SubmissionType == "" {
			return jobdb.Invalid("submissionId", "needs submissionType: a submission is named by its type and id")
		}
		if !submissionIDRE.MatchString(f.SubmissionID) {
			return jobdb.Invalid("submissionId", "%q is not a submission id", f.SubmissionID)
		}
	}
	if f.Verdict != "" && !jobdb.VerdictStatuses[f.Verdict] {
		return jobdb.Invalid("verdict", "unknown verdict status %q", f.Verdict)
	}
	if f.BeforeID < 0 {
		return jobdb.Invalid("beforeId", "ids are positive")
	}
	if err := validRange("createdAfter", "createdBefore", f.CreatedAfter, f.CreatedBefore); err != nil {
		return err
	}
	return validLimit(f.Limit)
}

// validRange refuses a time range that can hold nothing.
func validRange(afterField, beforeField string, after, before time.Time) error {
	if !after.IsZero() && !before.IsZero() && !after.Before(before) {
		return jobdb.Invalid(afterField, "%s must be earlier than %s (%s)", afterField, beforeField, before.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

func validLimit(limit int) error {
	if limit < 0 || limit > PageLimitMax {
		return jobdb.Invalid("limit", "must be 1..%d", PageLimitMax)
	}
	return nil
}

// jobListColumns are jobColumns without the stored result: a list never
// shows case results, and a page of 500 would otherwise read up to 500
// compile logs.
const jobListColumns = jobColumnsHead + `NULL` + jobColumnsTail

// createdSlack bounds how far a job's id order can disagree with its
// created_at order: created_at is its insert statement's start time and its
// id is assigned during that statement, so two jobs are out of order only
// when a statement ran across the other's start; a statement waits for a
// lock at most innodb_lock_wait_timeout (50 s by default) before failing.
const createdSlack = 2 * time.Minute

// ListJobs lists jobs newest first (by id: keyset pages with BeforeID).
// Each filter narrows through an index that is already in id order, so a
// page reads about its own rows divided by how selective the other filters
// are, however deep it is: the submission through uk_job_identity, a
// verdict through ix_job_verdict, a pool through ix_job_pool_id. A
// creation-time range becomes an id range first (two lookups on
// ix_job_created), so it bounds every plan too. TestSearchQueryPlans
// measures the rows each shape reads.
func (s *Jobs) ListJobs(ctx context.Context, f JobFilter) ([]Job, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	lo, hi, err := s.createdIDRange(ctx, f)
	if err != nil {
		return nil, err
	}
	q, args := jobSearchSQL(f, lo, hi)
	var rows []jobView
	if err := s.db.Pool.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, fmt.Errorf("store: list jobs: %w", err)
	}
	out := make([]Job, len(rows))
	for i, r := range rows {
		out[i] = r.job()
	}
	return out, nil
}

// createdIDRange turns the filter's creation-time bounds into ids: every
// job created in them has after < id < before (0: unbounded). A job created
// more than createdSlack earlier than another has the smaller id, so the
// last job created before CreatedAfter-createdSlack and the first created
// at or after CreatedBefore+createdSlack bound the range; each is one
// lookup on ix_job_created.
// CurrentJobs says which of jobs are their submission's current (highest)
// generation, in one query for a listed page: a list shows an old
// generation as such, and the current one as current.
func (s *Jobs) CurrentJobs(ctx context.Context, jobs []Job) (map[int64]bool, error) {
	cur := make(map[int64]bool, len(jobs))
	if len(jobs) == 0 {
		return cur, nil
	}
	type sub struct{ typ, id string }
	seen := map[sub]bool{}
	q := `SELECT submission_type, submission_id, MAX(generation) FROM judge_job WHERE `
	var args []any
	for _, j := range jobs {
		k := sub{j.SubmissionType, j.SubmissionID}
		if seen[k] {
			continue
		}
		if len(seen) > 0 {
			q += " OR "
		}
		seen[k] = true
		q += "(submission_type = ? AND submission_id = ?)"
		args = append(args, k.typ, k.id)
	}
	rows, err := s.db.Pool.QueryContext(ctx, q+" GROUP BY submission_type, submission_id", args...)
	if err != nil {
		return nil, fmt.Errorf("store: current generations: %w", err)
	}
	defer rows.Close()
	newest := map[sub]int{}
	for rows.Next() {
		var k sub
		var g int
		if err := rows.Scan(&k.typ, &k.id, &g); err != nil {
			return nil, fmt.Errorf("store: current generations: %w", err)
		}
		newest[k] = g
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: current generations: %w", err)
	}
	for _, j := range jobs {
		cur[j.ID] = j.Generation == newest[sub{j.SubmissionType, j.SubmissionID}]
	}
	return cur, nil
}

func (s *core) createdIDRange(ctx context.Context, f JobFilter) (after, before int64, err error) {
	look := func(q string, t time.Time) (int64, error) {
		var id int64
		err := s.db.Pool.QueryRowContext(ctx, q, t.UTC()).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("store: list jobs: %w", err)
		}
		return id, nil
	}
	if !f.CreatedAfter.IsZero() {
		after, err = look(`SELECT id FROM judge_job WHERE created_at < ? ORDER BY created_at DESC, id DESC LIMIT 1`,
			f.CreatedAfter.Add(-createdSlack))
		if err != nil {
			return 0, 0, err
		}
	}
	if !f.CreatedBefore.IsZero() {
		before, err = look(`SELECT id FROM judge_job WHERE created_at >= ? ORDER BY created_at, id LIMIT 1`,
			f.CreatedBefore.Add(createdSlack))
	}
	return after, before, err
}

// jobSearchSQL is ListJobs' statement for a valid filter; idAfter and
// idBefore (0: none) are the exclusive id range createdIDRange allows.
func jobSearchSQL(f JobFilter, idAfter, idBefore int64) (string, []any) {
	// MariaDB reads `pool = ? AND id < ?` as a ref on pool (every row of the
	// pool newer than the page) rather than the (pool, id) range whenever it
	// walks the index for ORDER BY … LIMIT; the hint makes deep pages read
	// only their own rows. A submission needs none: it has few jobs.
	hint := ""
	switch {
	case f.SubmissionID != "":
	case f.Verdict != "":
		hint = " FORCE INDEX (ix_job_verdict)"
	case f.Pool != "":
		hint = " FORCE INDEX (ix_job_pool_id)"
	}
	q := `SELECT ` + jobListColumns + ` FROM judge_job` + hint + ` WHERE 1=1`
	var args []any
	add := func(cond string, v any) { q += " AND " + cond; args = append(args, v) }
	if f.State != "" {
		add("state = ?", f.State)
	}
	if f.Pool != "" {
		add("pool = ?", f.Pool)
	}
	if f.Kind != "" {
		add("kind = ?", f.Kind)
	}
	if f.SubmissionType != "" {
		add("submission_type = ?", f.SubmissionType)
	}
	if f.SubmissionID != "" {
		add("submission_id = ?", f.SubmissionID)
	}
	if f.Verdict != "" {
		add("state = ?", StateCompleted)
		add("verdict = ?", f.Verdict)
	}
	if !f.CreatedAfter.IsZero() {
		add("created_at >= ?", f.CreatedAfter.UTC())
	}
	if !f.CreatedBefore.IsZero() {
		add("created_at < ?", f.CreatedBefore.UTC())
	}
	if idAfter > 0 {
		add("id > ?", idAfter)
	}
	before := f.BeforeID
	if idBefore > 0 && (before == 0 || idBefore < before) {
		before = idBefore
	}
	if before > 0 {
		add("id < ?", before)
	}
	return q + " ORDER BY id DESC LIMIT ?", append(args, cmpLimit(f.Limit))
}

func cmpLimit(limit int) int {
	if limit <= 0 {
		return PageLimitDefault
	}
	return limit
}

// Generation is one job of a submission, for a job page's generation list.
type Generation struct {
	JobID      int64
	Generation int
	Kind       JobKind
	State      JobState
	Verdict    string
	Current    bool
	CreatedAt  time.Time
	FinishedAt *time.Time
}

// GenerationsLimit bounds Generations (the contract's maxItems).
const GenerationsLimit = 100

// Generations lists the jobs of the submission jobID belongs to, newest
// generation first (at most GenerationsLimit), jobID included.
func (s *Jobs) Generations(ctx context.Context, jobID int64) ([]Generation, error) {
	out, err := jobdb.QueryAll(ctx, s.db.Pool, func(r jobdb.RowScanner) (Generation, error) {
		var g Generation
		err := r.Scan(&g.JobID, &g.Generation, &g.Kind, &g.State, &g.Verdict, &g.Current, &g.CreatedAt, &g.FinishedAt)
		return g, err
	}, `SELECT o.id, o.generation, o.kind, o.state, COALESCE(o.verdict, ''),
	           o.generation = (SELECT MAX(k.generation) FROM judge_job k
	                           WHERE k.submission_type = j.submission_type AND k.submission_id = j.submission_id),
	           o.created_at, o.finished_at
	    FROM judge_job j
	    JOIN judge_job o ON o.submission_type = j.submission_type AND o.submission_id = j.submission_id
	    WHERE j.id = ?
	    ORDER BY o.generation DESC LIMIT ?`, jobID, GenerationsLimit)
	if err != nil {
		return nil, fmt.Errorf("store: generations: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("job %d: %w", jobID, ErrNotFound)
	}
	return out, nil
}
