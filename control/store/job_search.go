package store

import (
	"context"
	"fmt"
	"time"

	"github.com/kece-oj/kece/control/manifest"
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
	NodeID  int64
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
		return invalid("state", "unknown job state %q", f.State)
	}
	switch f.Kind {
	case "", KindSubmission, KindCheck:
	default:
		return invalid("kind", "unknown job kind %q", f.Kind)
	}
	if f.Pool != "" && !manifest.ValidPool(f.Pool) {
		return invalid("pool", "unknown pool %q", f.Pool)
	}
	if f.SubmissionType != "" && !submissionTypeRE.MatchString(f.SubmissionType) {
		return invalid("submissionType", "%q is not a submission type", f.SubmissionType)
	}
	if f.SubmissionID != "" {
		if f.SubmissionType == "" {
			return invalid("submissionId", "needs submissionType: a submission is named by its type and id")
		}
		if !submissionIDRE.MatchString(f.SubmissionID) {
			return invalid("submissionId", "%q is not a submission id", f.SubmissionID)
		}
	}
	if f.Verdict != "" && !verdictStatuses[f.Verdict] {
		return invalid("verdict", "unknown verdict status %q", f.Verdict)
	}
	if f.NodeID < 0 || f.BeforeID < 0 {
		return invalid("beforeId", "ids are positive")
	}
	if err := validRange("createdAfter", "createdBefore", f.CreatedAfter, f.CreatedBefore); err != nil {
		return err
	}
	return validLimit(f.Limit)
}

// validRange refuses a time range that can hold nothing.
func validRange(afterField, beforeField string, after, before time.Time) error {
	if !after.IsZero() && !before.IsZero() && !after.Before(before) {
		return invalid(afterField, "%s must be earlier than %s (%s)", afterField, beforeField, before.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

func validLimit(limit int) error {
	if limit < 0 || limit > PageLimitMax {
		return invalid("limit", "must be 1..%d", PageLimitMax)
	}
	return nil
}

// jobListColumns are jobColumns without the stored result: a list never
// shows case results, and a page of 500 would otherwise read up to 500
// compile logs.
const jobListColumns = jobColumnsHead + `NULL` + jobColumnsTail

// ListJobs lists jobs newest first (by id: keyset pages with BeforeID).
// Each filter narrows through an index: the submission through
// uk_job_identity, the pool through ix_job_pool_id, the state through
// ix_job_lease, the creation time through ix_job_created; the optimizer
// picks the most selective (EXPLAIN checked in job_search_test.go).
func (s *Store) ListJobs(ctx context.Context, f JobFilter) ([]Job, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	q := `SELECT ` + jobListColumns + ` FROM judge_job WHERE 1=1`
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
	if f.NodeID != 0 {
		add("node_id = ?", f.NodeID)
	}
	if !f.CreatedAfter.IsZero() {
		add("created_at >= ?", f.CreatedAfter.UTC())
	}
	if !f.CreatedBefore.IsZero() {
		add("created_at < ?", f.CreatedBefore.UTC())
	}
	if f.BeforeID > 0 {
		add("id < ?", f.BeforeID)
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, cmpLimit(f.Limit))
	out, err := queryAll(ctx, s.db, scanJob, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list jobs: %w", err)
	}
	return out, nil
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
func (s *Store) Generations(ctx context.Context, jobID int64) ([]Generation, error) {
	out, err := queryAll(ctx, s.db, func(r rowScanner) (Generation, error) {
		var g Generation
		err := r.Scan(&g.JobID, &g.Generation, &g.Kind, &g.State, &g.Verdict, &g.Current, &g.CreatedAt, &g.FinishedAt)
		return g, err
	}, `SELECT o.id, o.generation, o.kind, o.state, COALESCE(o.verdict, ''), COALESCE(p.current_job_id = o.id, FALSE),
	           o.created_at, o.finished_at
	    FROM judge_job j
	    JOIN judge_job o ON o.submission_type = j.submission_type AND o.submission_id = j.submission_id
	    LEFT JOIN judge_submission p ON p.submission_type = j.submission_type AND p.submission_id = j.submission_id
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
