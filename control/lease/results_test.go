package lease_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/lease"
	"github.com/kece-oj/kece/control/store"
)

// A verdict that does not fit the manifest is refused and nothing is written.
func TestResultValidatedAgainstManifest(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	n := b.Node(t, "cpp", g.ID, 1, true)
	job := b.Enqueue(t, "ALGO", "val")
	c := b.ClaimEventually(t, b.Store, n.NodeSession)
	bad := []lease.Result{
		{Outcome: lease.OutcomeVerdict, Verdict: &lease.VerdictResult{Status: "AC", Score: 40, MaxScore: 100,
			Cases: []lease.CaseResult{{CaseID: "c1", Status: "AC", Score: 40}}}},
		{Outcome: lease.OutcomeVerdict, Verdict: &lease.VerdictResult{Status: "WA", Score: 0, MaxScore: 100,
			Cases: []lease.CaseResult{{CaseID: "c1", Status: "WA"}, {CaseID: "c1", Status: "WA"}}}},
		{Outcome: lease.OutcomeVerdict, Verdict: &lease.VerdictResult{Status: "AC", Score: 100, MaxScore: 100,
			Cases: []lease.CaseResult{{CaseID: "c1", Status: "AC", Score: 40}, {CaseID: "zz", Status: "AC", Score: 60}}}},
		{Outcome: lease.OutcomeVerdict, Verdict: &lease.VerdictResult{Status: "AC", Score: 200, MaxScore: 100,
			Cases: []lease.CaseResult{{CaseID: "c1", Status: "AC", Score: 140}, {CaseID: "c2", Status: "AC", Score: 60}}}},
		{Outcome: lease.OutcomeVerdict, Verdict: &lease.VerdictResult{Status: "OK", MaxScore: 100}},
		{Outcome: lease.OutcomeError},
	}
	for i, r := range bad {
		_, err := b.Store.Leases().Complete(b.Ctx, n.NodeSession, job.JobID, c.LeaseEpoch, r)
		require.ErrorIs(t, err, store.ErrValidation, "case %d", i)
	}
	j, err := b.Store.Jobs().GetJob(b.Ctx, job.JobID)
	require.NoError(t, err)
	require.Equal(t, store.StateRunning, j.State)
	ce := lease.Result{Outcome: lease.OutcomeVerdict, Verdict: &lease.VerdictResult{Status: "CE", MaxScore: 100, CompileLog: "error: x"}}
	_, err = b.Store.Leases().Complete(b.Ctx, n.NodeSession, job.JobID, c.LeaseEpoch, ce)
	require.NoError(t, err, "a compile error has no cases")
}
