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
	Score      int64        `json:"score"`
	MaxScore   int64        `json:"maxScore"`
	CompileLog string       `json:"compileLog,omitempty"`
	Message    string       `json:"message,omitempty"`
	Cases      []CaseResult `json:"cases,omitempty"`
}

// CaseResult is one case of a verdict.
type CaseResult struct {
	CaseID   string `json:"caseId"`
	Status   string `json:"status"`
	Score    int64  `json:"score"`
	TimeMs   int64  `json:"timeMs"`
	WallMs   int64  `json:"wallMs"`
	MemoryKb int64  `json:"memoryKb"`
	ExitCode int    `json:"exitCode"`
	Signal   int    `json:"signal"`
	Message  string `json:"message,omitempty"`
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

var verdictStatuses = map[string]bool{"AC": true, "WA": true, "TLE": true, "MLE": true, "OLE": true, "RE": true, "CE": true}

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

// checkAgainst validates a verdict against the job's manifest: case ids and
// count, per-case and total score range, log sizes.
func checkAgainst(m manifest.Manifest, v VerdictResult) error {
	if m.Kind == manifest.KindSQL {
		if v.Score < 0 || v.Score > v.MaxScore {
			return invalid("verdict.score", "must be 0..maxScore")
		}
		return nil
	}
	if v.MaxScore != m.MaxScore() {
		return invalid("verdict.maxScore", "is %d, the manifest's weights sum to %d", v.MaxScore, m.MaxScore())
	}
	if v.Status == "CE" && len(v.Cases) == 0 {
		if v.Score != 0 {
			return invalid("verdict.score", "a compile error scores 0")
		}
		return nil
	}
	// Judging may stop at the first failing case, so a failing verdict may
	// list fewer cases; an accepted one lists them all.
	if len(v.Cases) > len(m.Cases) || (v.Status == "AC" && len(v.Cases) != len(m.Cases)) || len(v.Cases) == 0 {
		return invalid("verdict.cases", "has %d cases, the manifest has %d", len(v.Cases), len(m.Cases))
	}
	weights := make(map[string]int64, len(m.Cases))
	for _, c := range m.Cases {
		weights[c.CaseID] = c.Weight
	}
	var total int64
	for i, c := range v.Cases {
		w, ok := weights[c.CaseID]
		if !ok {
			return invalid(fmt.Sprintf("verdict.cases[%d].caseId", i), "%q is not a case of the manifest (or repeats)", c.CaseID)
		}
		delete(weights, c.CaseID)
		if !verdictStatuses[c.Status] {
			return invalid(fmt.Sprintf("verdict.cases[%d].status", i), "unknown status %q", c.Status)
		}
		if c.Score < 0 || c.Score > w {
			return invalid(fmt.Sprintf("verdict.cases[%d].score", i), "must be 0..%d", w)
		}
		if len(c.Message) > manifest.MaxMessageBytes {
			return invalid(fmt.Sprintf("verdict.cases[%d].message", i), "is above %d bytes", manifest.MaxMessageBytes)
		}
		total += c.Score
	}
	if total != v.Score {
		return invalid("verdict.score", "is %d, the cases add up to %d", v.Score, total)
	}
	return nil
}
