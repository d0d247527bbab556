package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// JudgeSubtasks: min stops at the first failure and skips the rest; a
// subtask whose prerequisite is not AC is skipped whole; sum judges every
// case; mul multiplies fractions; skipped cases are never run.
func TestJudgeSubtasks(t *testing.T) {
	t.Parallel()
	// The fraction each case earns when run (by index).
	fractions := []float64{1, 0, 1, 1, 0.5, 1, 0.5, 0.5, 1}
	task := engine.Task{Subtasks: []engine.Subtask{
		{ID: "s1", Scoring: engine.ScoringMin, Cases: []int{0, 1, 2}},                      // fails at case 1, case 2 skipped
		{ID: "s2", Scoring: engine.ScoringSum, Cases: []int{3, 4}},                         // 10 + 5
		{ID: "s3", Scoring: engine.ScoringMin, Cases: []int{5}, DependsOn: []string{"s1"}}, // skipped: s1 is WA
		{ID: "s4", Scoring: engine.ScoringMul, Cases: []int{6, 7}},                         // 0.25 × 20
		{ID: "s5", Scoring: engine.ScoringMin, Cases: []int{8}, DependsOn: []string{"s2"}}, // skipped: s2 is PARTIAL
	}}
	for i := range fractions {
		task.Cases = append(task.Cases, engine.Case{ID: string(rune('a' + i)), Weight: 10})
	}
	require.NoError(t, engine.ValidateSubtasks(task))
	var ran []int
	calls := 0
	cases, subs, err := engine.JudgeSubtasks(task, func(i int) (engine.CaseResult, error) {
		ran = append(ran, i)
		f := fractions[i]
		st := engine.CaseStatus(f)
		return engine.CaseResult{ID: task.Cases[i].ID, Status: st, Fraction: f, Score: engine.CaseScore(f, 10)}, nil
	}, func() { calls++ })
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 3, 4, 6, 7}, ran, "skipped cases never run")
	require.Equal(t, len(fractions), calls, "progress counts skipped cases too")
	var st []engine.Status
	for _, c := range cases {
		st = append(st, c.Status)
	}
	require.Equal(t, []engine.Status{engine.StatusAccepted, engine.StatusWrongAnswer, engine.StatusSkipped,
		engine.StatusAccepted, engine.StatusPartial, engine.StatusSkipped, engine.StatusPartial, engine.StatusPartial, engine.StatusSkipped}, st)
	require.Equal(t, []engine.SubtaskResult{
		{ID: "s1", Status: engine.StatusWrongAnswer, Score: 0, MaxScore: 30},
		{ID: "s2", Status: engine.StatusPartial, Score: 15, MaxScore: 20},
		{ID: "s3", Status: engine.StatusSkipped, Score: 0, MaxScore: 10},
		{ID: "s4", Status: engine.StatusPartial, Score: 5, MaxScore: 20},
		{ID: "s5", Status: engine.StatusSkipped, Score: 0, MaxScore: 10},
	}, subs)
	require.Equal(t, 20.0, engine.SumSubtasks(subs))
	require.Equal(t, engine.StatusWrongAnswer, engine.JobStatus(cases))
	require.Contains(t, cases[5].Message, "prerequisite s1 is WA")

	// All AC: every subtask AC; a dependent runs.
	for i := range fractions {
		fractions[i] = 1
	}
	cases, subs, err = engine.JudgeSubtasks(task, func(i int) (engine.CaseResult, error) {
		return engine.CaseResult{ID: task.Cases[i].ID, Status: engine.StatusAccepted, Fraction: 1, Score: 10}, nil
	}, func() {})
	require.NoError(t, err)
	require.Equal(t, engine.StatusAccepted, engine.JobStatus(cases))
	require.Equal(t, 90.0, engine.SumSubtasks(subs))

	// Invalid groupings are refused.
	bad := task
	bad.Subtasks = []engine.Subtask{{ID: "x", Scoring: engine.ScoringMin, Cases: []int{0}, DependsOn: []string{"y"}}}
	require.Error(t, engine.ValidateSubtasks(bad))
	bad.Subtasks = []engine.Subtask{{ID: "x", Scoring: "max", Cases: []int{0, 1, 2, 3, 4, 5, 6, 7, 8}}}
	require.Error(t, engine.ValidateSubtasks(bad))
}

// Without a failure, SKIPPED makes a job PARTIAL, never AC.
func TestJobStatusWithSkipped(t *testing.T) {
	t.Parallel()
	require.Equal(t, engine.StatusPartial, engine.JobStatus([]engine.CaseResult{{Status: engine.StatusAccepted}, {Status: engine.StatusSkipped}}))
	require.Equal(t, engine.StatusTimeLimitExceeded, engine.JobStatus([]engine.CaseResult{{Status: engine.StatusSkipped}, {Status: engine.StatusTimeLimitExceeded}}))
}
