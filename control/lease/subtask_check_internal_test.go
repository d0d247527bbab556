package lease

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/jobdb"
	"github.com/kece-oj/kece/control/manifest"
)

const dg = "f251ddc12234e0da8d3b778bd0f7463fb477f16f47757f5617dc8b4ff4d4f14a"

// subtaskManifest: s1 (min: a, b), s2 (sum: c, d), s3 (min: e, depends on s1),
// s4 (mul: f, g); every case weight 10.
func subtaskManifest(t *testing.T) manifest.Manifest {
	m := manifest.Manifest{Kind: manifest.KindCode, Limits: manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64},
		Checker: manifest.Checker{Type: "tolerant"},
		Subtasks: []manifest.Subtask{
			{SubtaskID: "s1", Scoring: "min", Cases: []string{"a", "b"}},
			{SubtaskID: "s2", Scoring: "sum", Cases: []string{"c", "d"}},
			{SubtaskID: "s3", Scoring: "min", Cases: []string{"e"}, DependsOn: []string{"s1"}},
			{SubtaskID: "s4", Scoring: "mul", Cases: []string{"f", "g"}},
		}}
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		m.Cases = append(m.Cases, manifest.Case{CaseID: id, InputSha256: dg, OutputSha256: dg, Weight: 10})
	}
	require.NoError(t, m.Validate())
	return m
}

// s1 fails on a (b skipped), s3 skipped by its prerequisite, s2 partial by
// sum, s4 a quarter by mul: what the engine's JudgeSubtasks reports.
func subtaskVerdict() VerdictResult {
	return VerdictResult{Status: "WA", Score: 20, MaxScore: 70,
		Cases: []CaseResult{{CaseID: "a", Status: "WA"}, {CaseID: "b", Status: "SKIPPED"},
			{CaseID: "c", Status: "AC", Score: 10}, {CaseID: "d", Status: "PARTIAL", Score: 5},
			{CaseID: "e", Status: "SKIPPED"},
			{CaseID: "f", Status: "PARTIAL", Score: 5}, {CaseID: "g", Status: "PARTIAL", Score: 5}},
		Subtasks: []SubtaskResult{{SubtaskID: "s1", Status: "WA", Score: 0, MaxScore: 20}, {SubtaskID: "s2", Status: "PARTIAL", Score: 15, MaxScore: 20},
			{SubtaskID: "s3", Status: "SKIPPED", Score: 0, MaxScore: 10}, {SubtaskID: "s4", Status: "PARTIAL", Score: 5, MaxScore: 20}}}
}

// The control plane's result check applies the subtask rules: each broken
// rule is refused with its field, the valid verdict passes.
func TestCheckSubtasks(t *testing.T) {
	t.Parallel()
	m := subtaskManifest(t)
	require.NoError(t, checkAgainst(m, subtaskVerdict()))

	bad := map[string]struct {
		mut   func(v *VerdictResult)
		field string
	}{
		"subtasks missing":          {func(v *VerdictResult) { v.Subtasks = nil }, "verdict.subtasks"},
		"subtask out of order":      {func(v *VerdictResult) { v.Subtasks[0].SubtaskID, v.Subtasks[1].SubtaskID = "s2", "s1" }, "verdict.subtasks[0].subtaskId"},
		"case out of judging order": {func(v *VerdictResult) { v.Cases[2], v.Cases[3] = v.Cases[3], v.Cases[2] }, "verdict.cases[2].caseId"},
		"judged after a min failure": {func(v *VerdictResult) {
			v.Cases[1].Status = "AC"
			v.Cases[1].Score, v.Score = 10, 30
		}, "verdict.cases[1].status"},
		"skipped in a sum subtask":    {func(v *VerdictResult) { v.Cases[3].Status, v.Cases[3].Score, v.Score = "SKIPPED", 0, 15 }, "verdict.cases[3].status"},
		"dependent run anyway":        {func(v *VerdictResult) { v.Cases[4].Status, v.Subtasks[2].Status = "WA", "WA" }, "verdict.cases[4].status"},
		"failed min scores":           {func(v *VerdictResult) { v.Subtasks[0].Score, v.Score = 5, 25 }, "verdict.subtasks[0].score"},
		"sum not the case sum":        {func(v *VerdictResult) { v.Subtasks[1].Score, v.Score = 16, 21 }, "verdict.subtasks[1].score"},
		"mul above smallest fraction": {func(v *VerdictResult) { v.Subtasks[3].Score, v.Score = 11, 26 }, "verdict.subtasks[3].score"},
		"subtask status wrong":        {func(v *VerdictResult) { v.Subtasks[1].Status = "AC" }, "verdict.subtasks[1].status"},
		"skipped subtask not SKIPPED": {func(v *VerdictResult) { v.Subtasks[2].Status = "WA" }, "verdict.subtasks[2].status"},
		"subtask max wrong":           {func(v *VerdictResult) { v.Subtasks[1].MaxScore = 30 }, "verdict.subtasks[1].maxScore"},
		"total not the subtask sum":   {func(v *VerdictResult) { v.Score = 30 }, "verdict.score"},
		"job status wrong":            {func(v *VerdictResult) { v.Status = "PARTIAL" }, "verdict.status"},
		"a case left out":             {func(v *VerdictResult) { v.Cases = v.Cases[:6] }, "verdict.cases"},
	}
	for name, tc := range bad {
		v := subtaskVerdict()
		v.Cases = append([]CaseResult(nil), v.Cases...)
		v.Subtasks = append([]SubtaskResult(nil), v.Subtasks...)
		tc.mut(&v)
		err := checkAgainst(m, v)
		var ve *jobdb.ValidationError
		require.ErrorAs(t, err, &ve, name)
		require.Equal(t, tc.field, ve.Field, "%s: %v", name, err)
	}

	// All AC: every subtask full, a dependent judged.
	all := VerdictResult{Status: "AC", Score: 70, MaxScore: 70}
	for _, c := range m.Cases {
		all.Cases = append(all.Cases, CaseResult{CaseID: c.CaseID, Status: "AC", Score: 10})
	}
	for _, st := range m.Subtasks {
		max := int64(10 * len(st.Cases))
		all.Subtasks = append(all.Subtasks, SubtaskResult{SubtaskID: st.SubtaskID, Status: "AC", Score: float64(max), MaxScore: max})
	}
	require.NoError(t, checkAgainst(m, all))

	// Without subtasks in the manifest, neither SKIPPED nor subtasks pass.
	flat := subtaskManifest(t)
	flat.Subtasks = nil
	v := VerdictResult{Status: "PARTIAL", Score: 60, MaxScore: 70}
	for _, c := range flat.Cases {
		v.Cases = append(v.Cases, CaseResult{CaseID: c.CaseID, Status: "AC", Score: 10})
	}
	v.Cases[6].Status, v.Cases[6].Score = "SKIPPED", 0
	var ve *jobdb.ValidationError
	require.ErrorAs(t, checkAgainst(flat, v), &ve)
	require.Equal(t, "verdict.cases[6].status", ve.Field)
	v.Cases[6].Status, v.Cases[6].Score, v.Score, v.Status = "AC", 10, 70, "AC"
	require.NoError(t, checkAgainst(flat, v))
	v.Subtasks = []SubtaskResult{{SubtaskID: "s1"}}
	require.ErrorAs(t, checkAgainst(flat, v), &ve)
	require.Equal(t, "verdict.subtasks", ve.Field)
}
