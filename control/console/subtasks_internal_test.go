package console

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/adminapi"
)

// The job page lists a verdict's subtasks (status, score of maximum) above
// its cases, and shows no subtask table for a verdict without them.
func TestJobPageShowsSubtasks(t *testing.T) {
	t.Parallel()
	p, err := parsePages()
	require.NoError(t, err)
	subs := []adminapi.SubtaskResult{{SubtaskId: "small", Status: adminapi.VerdictStatusWA, MaxScore: 30},
		{SubtaskId: "large", Status: adminapi.VerdictStatusSKIPPED, MaxScore: 70}}
	d := &adminapi.JudgeJobDetail{Verdict: &adminapi.Verdict{Status: adminapi.VerdictStatusWA, MaxScore: 100, Subtasks: &subs,
		Cases: []adminapi.CaseResult{{CaseId: "c1", Status: adminapi.VerdictStatusWA}, {CaseId: "c2", Status: adminapi.VerdictStatusSKIPPED}}}}
	var buf bytes.Buffer
	require.NoError(t, p["job"].ExecuteTemplate(&buf, "layout", view{Title: "Job 1", Data: d}))
	html := buf.String()
	require.Contains(t, html, "<caption>Subtasks</caption>")
	require.Contains(t, html, `<th scope="row">large</th><td>SKIPPED</td><td>0 / 70</td>`)

	d.Verdict.Subtasks = nil
	buf.Reset()
	require.NoError(t, p["job"].ExecuteTemplate(&buf, "layout", view{Title: "Job 1", Data: d}))
	require.NotContains(t, buf.String(), "Subtasks")
}

// The job page shows each attempt's phases, as its node reported them,
// with what was ready before it was needed; an attempt without phases (no
// result yet, or an older node) gets no row, and a job with none says so.
func TestJobPageShowsPhases(t *testing.T) {
	t.Parallel()
	p, err := parsePages()
	require.NoError(t, err)
	queued := int64(35)
	d := &adminapi.JudgeJobDetail{Attempts: []adminapi.Attempt{
		{LeaseEpoch: 1, Outcome: "EXPIRED"},
		{LeaseEpoch: 2, Outcome: "COMPLETED", Phases: &adminapi.AttemptPhases{QueueMs: &queued, DownloadMs: 4, SandboxMs: 180,
			CompileMs: 1250, CheckerMs: 0, RunMs: 42, CheckMs: 3, ExecuteMs: 1480, TotalMs: 1490, CompileCached: true, SandboxWarm: true}},
	}}
	var buf bytes.Buffer
	require.NoError(t, p["job"].ExecuteTemplate(&buf, "layout", view{Title: "Job 1", Data: d}))
	html := buf.String()
	_, phases, ok := strings.Cut(html, `<table id="job-phases">`)
	require.True(t, ok)
	phases, _, _ = strings.Cut(phases, "</table>")
	require.Contains(t, phases, `<tr><th scope="row">2</th><td>35 ms</td><td>4 ms</td><td>180 ms</td><td>1.2 s</td><td>0 ms</td>`+
		`<td>42 ms</td><td>3 ms</td><td>1.5 s</td><td>1.5 s</td><td>compile cached, warm sandbox</td></tr>`)
	require.NotContains(t, phases, `<th scope="row">1</th>`, "the expired attempt reported no phases")

	d.Attempts[1].Phases = nil
	buf.Reset()
	require.NoError(t, p["job"].ExecuteTemplate(&buf, "layout", view{Title: "Job 1", Data: d}))
	require.Contains(t, buf.String(), "No attempt reported its phases")
}
