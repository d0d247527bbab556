package lease

import (
	"fmt"
	"math"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/internal/jobdb"
	"github.com/kece-oj/kece/control/manifest"
)

// Statuses of a verdict and its cases (contracts: VerdictStatus).
const (
	statusAC      = "AC"
	statusPartial = "PARTIAL"
	statusCE      = "CE"
	statusSkipped = "SKIPPED" // a case or subtask only, never a job
)

// scoreUnits converts a posted score to whole 1/ScoreScale units, refusing
// anything that is not such a multiple (NaN, infinities, more decimals). The
// slack absorbs float64 rounding of large totals (1e9 points at 4 places).
func scoreUnits(field string, score float64) (int64, error) {
	if math.IsNaN(score) || math.IsInf(score, 0) || score < 0 {
		return 0, jobdb.Invalid(field, "%v is not a non-negative number", score)
	}
	x := score * contracts.ScoreScale
	u := math.Round(x)
	if math.Abs(x-u) > 0.01 {
		return 0, jobdb.Invalid(field, "%v is not a multiple of 1/%d", score, contracts.ScoreScale)
	}
	return int64(u), nil
}

// checkAgainst validates a verdict against the job's manifest: case ids and
// count, each case's status against its score (AC earns the whole weight,
// PARTIAL between nothing and all of it, every other status nothing), the
// total against the cases, and the job's status against the rule of
// VerdictStatus (the first case neither AC nor PARTIAL, else PARTIAL if any,
// else AC).
func checkAgainst(m manifest.Manifest, v VerdictResult) error {
	total, err := scoreUnits("verdict.score", v.Score)
	if err != nil {
		return err
	}
	if m.Kind == manifest.KindSQL {
		if v.MaxScore < 0 || total > v.MaxScore*contracts.ScoreScale {
			return jobdb.Invalid("verdict.score", "must be 0..maxScore")
		}
		return nil
	}
	if v.MaxScore != m.MaxScore() {
		return jobdb.Invalid("verdict.maxScore", "is %d, the manifest's weights sum to %d", v.MaxScore, m.MaxScore())
	}
	if v.Status == statusCE && len(v.Cases) == 0 {
		if total != 0 {
			return jobdb.Invalid("verdict.score", "a compile error scores 0")
		}
		return nil
	}
	if len(m.Subtasks) > 0 {
		// Every case is listed, SKIPPED ones included, in judging order.
		if len(v.Cases) != len(m.Cases) {
			return jobdb.Invalid("verdict.cases", "has %d cases; with subtasks every one of the manifest's %d is listed", len(v.Cases), len(m.Cases))
		}
	} else if len(v.Subtasks) > 0 {
		return jobdb.Invalid("verdict.subtasks", "the manifest has no subtasks")
	}
	// Judging may stop at the first failing case, so a failing verdict may
	// list fewer cases; an accepted or partial one lists them all.
	complete := v.Status == statusAC || v.Status == statusPartial
	if len(v.Cases) > len(m.Cases) || (complete && len(v.Cases) != len(m.Cases)) || len(v.Cases) == 0 {
		return jobdb.Invalid("verdict.cases", "has %d cases, the manifest has %d", len(v.Cases), len(m.Cases))
	}
	weights := make(map[string]int64, len(m.Cases))
	for _, c := range m.Cases {
		weights[c.CaseID] = c.Weight
	}
	var sum int64
	decided, partial := "", false
	for i, c := range v.Cases {
		f := fmt.Sprintf("verdict.cases[%d]", i)
		w, ok := weights[c.CaseID]
		if !ok {
			return jobdb.Invalid(f+".caseId", "%q is not a case of the manifest (or repeats)", c.CaseID)
		}
		delete(weights, c.CaseID)
		skippedOK := c.Status == statusSkipped && len(m.Subtasks) > 0
		if (!jobdb.VerdictStatuses[c.Status] && !skippedOK) || c.Status == statusCE {
			return jobdb.Invalid(f+".status", "unknown case status %q", c.Status)
		}
		units, err := scoreUnits(f+".score", c.Score)
		if err != nil {
			return err
		}
		full := w * contracts.ScoreScale
		switch {
		case units > full:
			return jobdb.Invalid(f+".score", "%v is above the case weight %d", c.Score, w)
		case c.Status == statusAC && units != full:
			return jobdb.Invalid(f+".score", "an AC case earns its whole weight %d, not %v", w, c.Score)
		case c.Status != statusAC && c.Status != statusPartial && units != 0:
			return jobdb.Invalid(f+".score", "a %s case earns 0, not %v", c.Status, c.Score)
		}
		if len(c.Message) > manifest.MaxMessageBytes {
			return jobdb.Invalid(f+".message", "is above %d bytes", manifest.MaxMessageBytes)
		}
		sum += units
		switch {
		case c.Status == statusPartial || c.Status == statusSkipped:
			partial = true
		case c.Status != statusAC && decided == "":
			decided = c.Status
		}
	}
	if len(m.Subtasks) > 0 {
		if sum, err = checkSubtasks(m, v); err != nil {
			return err
		}
	}
	if sum != total {
		return jobdb.Invalid("verdict.score", "is %v, the cases (or subtasks) add up to %v", v.Score, float64(sum)/contracts.ScoreScale)
	}
	want := decided
	if want == "" && partial {
		want = statusPartial
	} else if want == "" {
		want = statusAC
	}
	if v.Status != want {
		return jobdb.Invalid("verdict.status", "is %s, the cases make it %s", v.Status, want)
	}
	return nil
}
