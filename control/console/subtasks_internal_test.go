package console

import (
	"bytes"
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
