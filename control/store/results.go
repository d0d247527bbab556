package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

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
	JobState    JobState
}

var verdictStatuses = map[string]bool{"AC": true, "PARTIAL": true, "WA": true, "TLE": true, "MLE": true, "OLE": true, "RE": true, "CE": true}

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
			return invalid("result", "a VERDICT result has a verdict and no error")
		}
		if !verdictStatuses[r.Verdict.Status] {
			return invalid("verdict.status", "unknown verdict %q", r.Verdict.Status)
		}
		if len(r.Verdict.CompileLog) > manifest.MaxLogBytes {
			return invalid("verdict.compileLog", "is %d bytes, above %d", len(r.Verdict.CompileLog), manifest.MaxLogBytes)
		}
		if len(r.Verdict.Message) > manifest.MaxMessageBytes {
			return invalid("verdict.message", "is above %d bytes", manifest.MaxMessageBytes)
		}
	case OutcomeError:
		if r.Error == nil || r.Verdict != nil || r.Error.Code == "" {
			return invalid("result", "an ERROR result has an error code and no verdict")
		}
		if len(r.Error.Message) > manifest.MaxMessageBytes {
			return invalid("error.message", "is above %d bytes", manifest.MaxMessageBytes)
		}
	default:
		return invalid("outcome", "must be VERDICT or ERROR")
	}
	return nil
}
