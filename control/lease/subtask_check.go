package lease

import (
	"fmt"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/internal/jobdb"
	"github.com/kece-oj/kece/control/manifest"
)

// checkSubtasks validates the subtasks of a verdict whose cases passed the
// per-case checks, and returns the sum of the subtask scores in units. The
// rules (docs/engine.md, "Subtasks"): subtasks in the manifest's order,
// cases in judging order (subtask by subtask); a subtask whose prerequisite
// is not AC is SKIPPED with every case SKIPPED and scores 0; otherwise a
// SKIPPED case only follows a case that earned nothing in a min or mul
// subtask, and every case after it is SKIPPED; the status follows the job
// rule over the subtask's cases; the score is the sum of the case scores
// (sum), or 0 after a failure, the whole maximum when all are AC, and at
// most the maximum times the smallest case fraction otherwise (min, mul:
// the engine computes it from exact fractions, the cases carry them
// rounded, so this bound is what can be checked exactly).
func checkSubtasks(m manifest.Manifest, v VerdictResult) (int64, error) {
	if len(v.Subtasks) != len(m.Subtasks) {
		return 0, jobdb.Invalid("verdict.subtasks", "has %d subtasks, the manifest has %d", len(v.Subtasks), len(m.Subtasks))
	}
	weights := make(map[string]int64, len(m.Cases))
	for _, c := range m.Cases {
		weights[c.CaseID] = c.Weight
	}
	status := make(map[string]string, len(m.Subtasks))
	var total int64
	k := 0 // next case of v.Cases
	for i, ms := range m.Subtasks {
		f := fmt.Sprintf("verdict.subtasks[%d]", i)
		vs := v.Subtasks[i]
		if vs.SubtaskID != ms.SubtaskID {
			return 0, jobdb.Invalid(f+".subtaskId", "is %q, the manifest's subtask %d is %q", vs.SubtaskID, i, ms.SubtaskID)
		}
		blocked := false
		for _, d := range ms.DependsOn {
			blocked = blocked || status[d] != statusAC
		}
		var max, sum, minFrac int64 = 0, 0, -1
		failed, decided, partial := false, "", false
		for _, id := range ms.Cases {
			cf := fmt.Sprintf("verdict.cases[%d]", k)
			c := v.Cases[k]
			k++
			if c.CaseID != id {
				return 0, jobdb.Invalid(cf+".caseId", "is %q; judging order puts case %q of subtask %q here", c.CaseID, id, ms.SubtaskID)
			}
			w := weights[id]
			max += w
			units, _ := scoreUnits(cf+".score", c.Score) // checked per case already
			sum += units
			mustSkip := blocked || failed
			if (c.Status == statusSkipped) != mustSkip {
				return 0, jobdb.Invalid(cf+".status", "is %s; the subtask rules make it %s", c.Status, map[bool]string{true: "SKIPPED", false: "judged"}[mustSkip])
			}
			switch c.Status {
			case statusAC:
			case statusPartial, statusSkipped:
				partial = true
			default:
				if decided == "" {
					decided = c.Status
				}
			}
			if c.Status != statusAC && c.Status != statusPartial {
				failed = failed || ms.Scoring != manifest.ScoringSum
			}
			if w > 0 && c.Status != statusSkipped {
				frac := units / w // the case's fraction in 1/ScoreScale, rounded down
				if minFrac < 0 || frac < minFrac {
					minFrac = frac
				}
			}
		}
		want := decided
		switch {
		case blocked:
			want = statusSkipped
		case want == "" && partial:
			want = statusPartial
		case want == "":
			want = statusAC
		}
		if vs.Status != want {
			return 0, jobdb.Invalid(f+".status", "is %s, its cases make it %s", vs.Status, want)
		}
		if vs.MaxScore != max {
			return 0, jobdb.Invalid(f+".maxScore", "is %d, its cases' weights sum to %d", vs.MaxScore, max)
		}
		score, err := scoreUnits(f+".score", vs.Score)
		if err != nil {
			return 0, err
		}
		if err := subtaskScoreOK(ms.Scoring, score, sum, max, minFrac, blocked || failed, want == statusAC); err != nil {
			return 0, jobdb.Invalid(f+".score", "%v %s", vs.Score, err)
		}
		status[ms.SubtaskID] = vs.Status
		total += score
	}
	return total, nil
}

// subtaskScoreOK applies a subtask's scoring rule to its score (all in
// units; minFrac is the smallest judged case fraction in units, -1 if none).
func subtaskScoreOK(scoring string, score, sum, max, minFrac int64, zero, all bool) error {
	full := max * contracts.ScoreScale
	switch {
	case score < 0 || score > full:
		return fmt.Errorf("is outside 0..%d", max)
	case scoring == manifest.ScoringSum && score != sum:
		return fmt.Errorf("is not the sum %v of its case scores", float64(sum)/contracts.ScoreScale)
	case scoring == manifest.ScoringSum:
		return nil
	case zero && score != 0:
		return fmt.Errorf("must be 0: a case earned nothing or the subtask was skipped")
	case all && score != full:
		return fmt.Errorf("must be %d: every case is AC", max)
	case minFrac >= 0 && score > max*(minFrac+2): // slack for the rounding of the case scores and of the fraction
		return fmt.Errorf("is above its weights times its smallest case fraction")
	}
	return nil
}
