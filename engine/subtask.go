package engine

import (
	"fmt"
	"math"
)

// Subtasks (docs/engine.md, "Subtasks"). A job with subtasks judges them in
// order and each one's cases in its order. A subtask whose prerequisite is
// not AC is not run: its cases are SKIPPED and it scores 0. Under min and
// mul, judging stops at the first case that earns nothing — the subtask
// scores 0 whatever follows — and the rest are SKIPPED. The job's score is
// the sum of the subtask scores; its maximum stays the sum of the weights.

// JudgeSubtasks runs the cases of a task with subtasks through run (which
// judges one case by its index in Task.Cases) and returns the case results
// in judging order and the subtask results. done is called after each case,
// skipped ones included.
func JudgeSubtasks(t Task, run func(i int) (CaseResult, error), done func()) ([]CaseResult, []SubtaskResult, error) {
	var cases []CaseResult
	var subs []SubtaskResult
	status := make(map[string]Status, len(t.Subtasks))
	for _, st := range t.Subtasks {
		blocked := ""
		for _, d := range st.DependsOn {
			if status[d] != StatusAccepted {
				blocked = d
				break
			}
		}
		var own []CaseResult
		failed := false
		for _, i := range st.Cases {
			c := t.Cases[i]
			var cr CaseResult
			switch {
			case blocked != "":
				cr = CaseResult{ID: c.ID, Status: StatusSkipped, Message: fmt.Sprintf("subtask %s: prerequisite %s is %s", st.ID, blocked, status[blocked])}
			case failed:
				cr = CaseResult{ID: c.ID, Status: StatusSkipped, Message: fmt.Sprintf("subtask %s scores by %s and already failed", st.ID, st.Scoring)}
			default:
				var err error
				if cr, err = run(i); err != nil {
					return cases, subs, err
				}
				failed = st.Scoring != ScoringSum && cr.Fraction <= 0
			}
			own = append(own, cr)
			done()
		}
		r := SubtaskResult{ID: st.ID, Score: SubtaskScore(st.Scoring, own, weightsOf(t, st)), MaxScore: sumWeights(t, st)}
		r.Status = JobStatus(own)
		if blocked != "" {
			r.Status = StatusSkipped
		}
		status[st.ID] = r.Status
		cases = append(cases, own...)
		subs = append(subs, r)
	}
	return cases, subs, nil
}

func weightsOf(t Task, st Subtask) []int64 {
	w := make([]int64, len(st.Cases))
	for k, i := range st.Cases {
		w[k] = t.Cases[i].Weight
	}
	return w
}

func sumWeights(t Task, st Subtask) int64 {
	var n int64
	for _, i := range st.Cases {
		n += t.Cases[i].Weight
	}
	return n
}

// SubtaskScore scores a subtask's case results (weights in the same order):
// sum adds the case scores in whole units; min is the weights' sum times the
// smallest fraction, mul times the product of the fractions, rounded to
// 1/ScoreScale like a case score. SKIPPED cases have fraction 0.
func SubtaskScore(scoring Scoring, cases []CaseResult, weights []int64) float64 {
	if scoring == ScoringSum {
		return SumScores(cases)
	}
	var total int64
	for _, w := range weights {
		total += w
	}
	f := 1.0
	for _, c := range cases {
		x := c.Fraction
		if c.Status == StatusSkipped {
			x = 0
		}
		if scoring == ScoringMin {
			f = math.Min(f, x)
		} else {
			f *= x
		}
	}
	return CaseScore(f, total)
}

// SumSubtasks adds subtask scores in whole units.
func SumSubtasks(subs []SubtaskResult) float64 {
	var units int64
	for _, s := range subs {
		units += ScoreUnits(s.Score)
	}
	return float64(units) / ScoreScale
}

// ValidateSubtasks checks that subtasks cover every case exactly once, by
// valid indexes, with known scoring rules and dependencies on earlier
// subtasks only (the control plane validated the manifest; this guards the
// conversion).
func ValidateSubtasks(t Task) error {
	if len(t.Subtasks) == 0 {
		return nil
	}
	seen := make([]bool, len(t.Cases))
	earlier := map[string]bool{}
	for _, st := range t.Subtasks {
		switch st.Scoring {
		case ScoringSum, ScoringMin, ScoringMul:
		default:
			return fmt.Errorf("subtask %s: unknown scoring %q", st.ID, st.Scoring)
		}
		if st.ID == "" || earlier[st.ID] || len(st.Cases) == 0 {
			return fmt.Errorf("subtask %q: empty or repeated id, or no cases", st.ID)
		}
		for _, i := range st.Cases {
			if i < 0 || i >= len(t.Cases) || seen[i] {
				return fmt.Errorf("subtask %s: case index %d out of range or in two subtasks", st.ID, i)
			}
			seen[i] = true
		}
		for _, d := range st.DependsOn {
			if !earlier[d] {
				return fmt.Errorf("subtask %s: depends on %q, not an earlier subtask", st.ID, d)
			}
		}
		earlier[st.ID] = true
	}
	for i, ok := range seen {
		if !ok {
			return fmt.Errorf("case %s is in no subtask", t.Cases[i].ID)
		}
	}
	return nil
}
