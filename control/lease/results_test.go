package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

// A verdict that does not fit the manifest is refused and nothing is written.
func TestResultValidatedAgainstManifest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.group(t, 4)
	n := b.node(t, "cpp", g.ID, 1, true)
	job := b.enqueue(t, "ALGO", "val")
	c := b.claimEventually(t, b.store, n.NodeSession)
	bad := []store.Result{
		{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{Status: "AC", Score: 40, MaxScore: 100,
			Cases: []store.CaseResult{{CaseID: "c1", Status: "AC", Score: 40}}}},
		{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{Status: "WA", Score: 0, MaxScore: 100,
			Cases: []store.CaseResult{{CaseID: "c1", Status: "WA"}, {CaseID: "c1", Status: "WA"}}}},
		{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{Status: "AC", Score: 100, MaxScore: 100,
			Cases: []store.CaseResult{{CaseID: "c1", Status: "AC", Score: 40}, {CaseID: "zz", Status: "AC", Score: 60}}}},
		{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{Status: "AC", Score: 200, MaxScore: 100,
			Cases: []store.CaseResult{{CaseID: "c1", Status: "AC", Score: 140}, {CaseID: "c2", Status: "AC", Score: 60}}}},
		{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{Status: "OK", MaxScore: 100}},
		{Outcome: store.OutcomeError},
	}
	for i, r := range bad {
		_, err := b.store.Leases().Complete(b.ctx, n.NodeSession, job.JobID, c.LeaseEpoch, r)
		require.ErrorIs(t, err, store.ErrValidation, "case %d", i)
	}
	j, err := b.store.Jobs().GetJob(b.ctx, job.JobID)
	require.NoError(t, err)
	require.Equal(t, store.StateRunning, j.State)
	ce := store.Result{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{Status: "CE", MaxScore: 100, CompileLog: "error: x"}}
	_, err = b.store.Leases().Complete(b.ctx, n.NodeSession, job.JobID, c.LeaseEpoch, ce)
	require.NoError(t, err, "a compile error has no cases")
}
