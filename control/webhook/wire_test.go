package webhook_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/control/webhook"
)

// Status reads, settlement events and webhooks all go through WireVerdict:
// a stored verdict with subtasks keeps them, SKIPPED cases included; one
// without has none.
func TestWireVerdictCarriesSubtasks(t *testing.T) {
	t.Parallel()
	r := store.Result{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{Status: "WA", Score: 10, MaxScore: 30,
		Cases:    []store.CaseResult{{CaseID: "a", Status: "WA"}, {CaseID: "b", Status: "SKIPPED"}, {CaseID: "c", Status: "AC", Score: 10}},
		Subtasks: []store.SubtaskResult{{SubtaskID: "s1", Status: "WA", MaxScore: 20}, {SubtaskID: "s2", Status: "AC", Score: 10, MaxScore: 10}}}}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	v, err := webhook.WireVerdict(b)
	require.NoError(t, err)
	require.NotNil(t, v.Subtasks)
	require.Equal(t, []businessapi.SubtaskResult{{SubtaskId: "s1", Status: businessapi.VerdictStatusWA, MaxScore: 20},
		{SubtaskId: "s2", Status: businessapi.VerdictStatusAC, Score: 10, MaxScore: 10}}, *v.Subtasks)
	require.Equal(t, businessapi.VerdictStatusSKIPPED, v.Cases[1].Status)

	r.Verdict.Subtasks = nil
	b, err = json.Marshal(r)
	require.NoError(t, err)
	v, err = webhook.WireVerdict(b)
	require.NoError(t, err)
	require.Nil(t, v.Subtasks, "no subtasks field for a manifest without subtasks")
}
