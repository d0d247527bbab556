package lease

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/kece-oj/kece/control/internal/jobdb"

	"github.com/kece-oj/kece/control/manifest"
)

// Outcome says whether a result is a user verdict or an infrastructure error.
type Outcome string

// Result outcomes.
const (
	OutcomeVerdict Outcome = "VERDICT"
	OutcomeError   Outcome = "ERROR"
)

// Result is what a node posts for its lease. Its canonical JSON is the
// normalized form whose digest decides ALREADY_COMMITTED vs conflict.
type Result struct {
	Outcome Outcome        `json:"outcome"`
	Verdict *VerdictResult `json:"verdict,omitempty"`
	Error   *ErrorResult   `json:"error,omitempty"`
	// Phases is the node's timing of the lease, when it sent one. It is
	// stored on the attempt and never enters the normalized result: the
	// same verdict posted again with other timings is the same result.
	Phases *Phases `json:"-"`
}

// Phases is where a lease's time went, as its node measured it, in
// milliseconds (the machine contract's ResultPhases). QueueMs is the wait
// the claim answer told the node; nil when it was told none.
type Phases struct {
	QueueMs       *int64 `json:"queueMs,omitempty"`
	DownloadMs    int64  `json:"downloadMs"`
	SandboxMs     int64  `json:"sandboxMs"`
	CompileMs     int64  `json:"compileMs"`
	CheckerMs     int64  `json:"checkerMs"`
	RunMs         int64  `json:"runMs"`
	CheckMs       int64  `json:"checkMs"`
	ExecuteMs     int64  `json:"executeMs"`
	TotalMs       int64  `json:"totalMs"`
	CompileCached bool   `json:"compileCached"`
	CheckerCached bool   `json:"checkerCached"`
	SandboxWarm   bool   `json:"sandboxWarm"`
}

// phasesJSON is what the attempt's phases column holds: nil (NULL) when the
// node sent no phases.
func (r Result) phasesJSON() ([]byte, error) {
	if r.Phases == nil {
		return nil, nil
	}
	p := *r.Phases
	ds := []int64{p.DownloadMs, p.SandboxMs, p.CompileMs, p.CheckerMs, p.RunMs, p.CheckMs, p.ExecuteMs, p.TotalMs}
	if p.QueueMs != nil {
		ds = append(ds, *p.QueueMs)
	}
	for _, v := range ds {
		if v < 0 {
			return nil, jobdb.Invalid("phases", "a duration is negative")
		}
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("store: result phases: %w", err)
	}
	return b, nil
}

// VerdictResult is a user outcome with per-case detail.
type VerdictResult struct {
	Status     string       `json:"status"`
	Score      float64      `json:"score"` // a multiple of 1/contracts.ScoreScale
	MaxScore   int64        `json:"maxScore"`
	CompileLog string       `json:"compileLog,omitempty"`
	Message    string       `json:"message,omitempty"`
	Cases      []CaseResult `json:"cases,omitempty"`
	// Subtasks is set when the manifest has subtasks (Score is their sum).
	Subtasks []SubtaskResult `json:"subtasks,omitempty"`
}

// SubtaskResult is one subtask of a verdict.
type SubtaskResult struct {
	SubtaskID string  `json:"subtaskId"`
	Status    string  `json:"status"`
	Score     float64 `json:"score"`
	MaxScore  int64   `json:"maxScore"`
}

// CaseResult is one case of a verdict.
type CaseResult struct {
	CaseID   string  `json:"caseId"`
	Status   string  `json:"status"`
	Score    float64 `json:"score"` // a multiple of 1/contracts.ScoreScale
	TimeMs   int64   `json:"timeMs"`
	WallMs   int64   `json:"wallMs"`
	MemoryKb int64   `json:"memoryKb"`
	ExitCode int     `json:"exitCode"`
	Signal   int     `json:"signal"`
	Message  string  `json:"message,omitempty"`
}

// ErrorResult is an infrastructure failure reported by the node.
type ErrorResult struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// Disposition answers an accepted result post.
type Disposition string

// Dispositions.
const (
	Accepted         Disposition = "ACCEPTED"
	AlreadyCommitted Disposition = "ALREADY_COMMITTED"
)

// CompleteResponse tells the node what happened and the job's state now.
type CompleteResponse struct {
	Disposition Disposition
	JobState    jobdb.JobState
}

// Normalize returns the canonical JSON and its SHA-256.
func (r Result) Normalize() ([]byte, string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, "", fmt.Errorf("store: result: %w", err)
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:]), nil
}

func (r Result) validateShape() error {
	switch r.Outcome {
	case OutcomeVerdict:
		if r.Verdict == nil || r.Error != nil {
			return jobdb.Invalid("result", "a VERDICT result has a verdict and no error")
		}
		if !jobdb.VerdictStatuses[r.Verdict.Status] {
			return jobdb.Invalid("verdict.status", "unknown verdict %q", r.Verdict.Status)
		}
		if len(r.Verdict.CompileLog) > manifest.MaxLogBytes {
			return jobdb.Invalid("verdict.compileLog", "is %d bytes, above %d", len(r.Verdict.CompileLog), manifest.MaxLogBytes)
		}
		if len(r.Verdict.Message) > manifest.MaxMessageBytes {
			return jobdb.Invalid("verdict.message", "is above %d bytes", manifest.MaxMessageBytes)
		}
	case OutcomeError:
		if r.Error == nil || r.Verdict != nil || r.Error.Code == "" {
			return jobdb.Invalid("result", "an ERROR result has an error code and no verdict")
		}
		if len(r.Error.Message) > manifest.MaxMessageBytes {
			return jobdb.Invalid("error.message", "is above %d bytes", manifest.MaxMessageBytes)
		}
	default:
		return jobdb.Invalid("outcome", "must be VERDICT or ERROR")
	}
	return nil
}

// preparedResult is a result checked before anything is written: its
// normalized body and digest, its case counts, and, for a verdict of a
// business job (the common case), the fast completion that commits it
// without completeSlow's locking reads when its fence holds.
type preparedResult struct {
	body   []byte
	digest string
	// phases is the attempt's phases column (nil: NULL), apart from body.
	phases []byte
	cases  caseCounts
	fast   *fastResult
}

func (s *Engine) prepareResult(ctx context.Context, sess jobdb.NodeSession, jobID, leaseEpoch int64, res Result) (preparedResult, error) {
	var p preparedResult
	if err := res.validateShape(); err != nil {
		return p, err
	}
	var err error
	if p.body, p.digest, err = res.Normalize(); err != nil {
		return p, err
	}
	if p.phases, err = res.phasesJSON(); err != nil {
		return p, err
	}
	if len(p.body) > s.db.Cfg.MaxResultBytes {
		return p, jobdb.Invalid("result", "is %d bytes, above %d", len(p.body), s.db.Cfg.MaxResultBytes)
	}
	facts, err := s.jobFacts(ctx, jobID)
	if err != nil {
		return p, err
	}
	if res.Outcome != OutcomeVerdict {
		return p, nil
	}
	// Validate before anything is written (manifests are immutable).
	om, err := s.db.ReadManifest(ctx, s.db.Pool, facts.manifestID)
	m := om.Manifest
	if err != nil {
		return p, err
	}
	if err := checkAgainst(m, *res.Verdict); err != nil {
		return p, err
	}
	p.cases = countCases(m, *res.Verdict)
	if facts.kind != jobdb.KindSubmission {
		return p, nil
	}
	payload, err := json.Marshal(jobdb.SettlementPayload{JobID: strconv.FormatInt(jobID, 10), SubmissionType: facts.typ,
		SubmissionID: facts.sid, Generation: facts.generation, Status: res.Verdict.Status, Result: p.body})
	if err != nil {
		return p, fmt.Errorf("store: settle: %w", err)
	}
	p.fast = &fastResult{sess: sess, jobID: jobID, leaseEpoch: leaseEpoch, f: facts,
		status: res.Verdict.Status, cases: p.cases, body: p.body, digest: p.digest, phases: p.phases, payload: payload}
	return p, nil
}

// caseCounts are what a finished job reports as casesDone/casesTotal.
type caseCounts struct{ done, total int }

// countCases: done is the number of cases the verdict judged (a verdict may
// stop at the first failing case), total the manifest's (at least done).
func countCases(m manifest.Manifest, v VerdictResult) caseCounts {
	return caseCounts{done: len(v.Cases), total: max(len(m.Cases), len(v.Cases))}
}

// jobFacts are the fields of a job that never change after enqueue.
type jobFacts struct {
	typ, sid   string
	manifestID int64
	kind       jobdb.JobKind
	pool       string
	generation int
}

func (s *Engine) jobFacts(ctx context.Context, jobID int64) (jobFacts, error) {
	if f, ok := s.facts.Get(jobID); ok {
		return f, nil
	}
	var f jobFacts
	err := s.db.Pool.QueryRowContext(ctx,
		`SELECT submission_type, submission_id, manifest_id, kind, pool, generation FROM judge_job WHERE id = ?`, jobID).Scan(
		&f.typ, &f.sid, &f.manifestID, &f.kind, &f.pool, &f.generation)
	if errors.Is(err, sql.ErrNoRows) {
		return f, fmt.Errorf("job %d: %w", jobID, jobdb.ErrNotFound)
	}
	if err != nil {
		return f, fmt.Errorf("store: complete: %w", err)
	}
	s.facts.Put(jobID, f)
	return f, nil
}

// fastResult is a verdict for a live lease of a business job: the common
// case, committed without the locking reads of completeSlow.
type fastResult struct {
	sess              jobdb.NodeSession
	jobID, leaseEpoch int64
	f                 jobFacts
	status            string
	cases             caseCounts
	body              []byte
	digest            string
	phases            []byte // the attempt's phases (nil: the node sent none)
	payload           []byte
}

// byJobID orders fast results by job id: the lock order of leaseUpdate.
func byJobID(a, b fastResult) int { return cmp.Compare(a.jobID, b.jobID) }
