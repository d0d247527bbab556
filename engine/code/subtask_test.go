package code

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// Subtasks with real runs (testdata/prog.cpp): a min subtask stops at its
// first failure — the sleeper after it is SKIPPED, never run — a dependent of
// a failed subtask is skipped whole, a sum subtask judges every case, and the
// job's score is the sum of the subtask scores.
func TestSubtasksJudged(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	task := b.task(t, "cpp", readTestdata(t, "prog.cpp"),
		tcase{in: "sum 1 2", exp: "3\n", weight: 10},  // 0 s1
		tcase{in: "sum 2 2", exp: "5\n", weight: 10},  // 1 s1: WA
		tcase{in: "sleep", exp: "woke\n", weight: 10}, // 2 s1: SKIPPED, would be a wall TLE
		tcase{in: "sum 1 1", exp: "2\n", weight: 20},  // 3 s2
		tcase{in: "segv", exp: "x\n", weight: 20},     // 4 s2: RE, the sum goes on
		tcase{in: "sum 0 0", exp: "0\n", weight: 20},  // 5 s2
		tcase{in: "sum 5 5", exp: "10\n", weight: 5},  // 6 s3 depends on s1: SKIPPED
		tcase{in: "sum 4 4", exp: "8\n", weight: 5},   // 7 s4
	)
	task.Limits.WallTime = 5 * time.Second
	task.Subtasks = []engine.Subtask{
		{ID: "s1", Scoring: engine.ScoringMin, Cases: []int{0, 1, 2}},
		{ID: "s2", Scoring: engine.ScoringSum, Cases: []int{3, 4, 5}},
		{ID: "s3", Scoring: engine.ScoringMin, Cases: []int{6}, DependsOn: []string{"s1"}},
		{ID: "s4", Scoring: engine.ScoringMul, Cases: []int{7}},
	}
	v := b.run(t, task)
	require.Equal(t, []engine.Status{engine.StatusAccepted, engine.StatusWrongAnswer, engine.StatusSkipped,
		engine.StatusAccepted, engine.StatusRuntimeError, engine.StatusAccepted, engine.StatusSkipped, engine.StatusAccepted}, statuses(v), "%+v", v.Cases)
	require.Zero(t, v.Cases[2].WallTime, "the sleeper never ran (it would be a wall TLE)")
	require.Zero(t, v.Cases[2].CPUTime)
	require.Equal(t, []engine.SubtaskResult{
		{ID: "s1", Status: engine.StatusWrongAnswer, Score: 0, MaxScore: 30},
		{ID: "s2", Status: engine.StatusRuntimeError, Score: 40, MaxScore: 60},
		{ID: "s3", Status: engine.StatusSkipped, Score: 0, MaxScore: 5},
		{ID: "s4", Status: engine.StatusAccepted, Score: 5, MaxScore: 5},
	}, v.Subtasks)
	require.Equal(t, 45.0, v.Score)
	require.Equal(t, int64(100), v.MaxScore)
	require.Equal(t, engine.StatusWrongAnswer, v.Status)
	require.NoError(t, b.leftovers(t))
}
