package lease_test

import (
	"encoding/json"

	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/lease"
	"github.com/kece-oj/kece/control/store"
)

// partialResult: c1 (weight 40) AC, c2 (weight 60) scored a third.
func partialResult() lease.Result {
	return lease.Result{Outcome: lease.OutcomeVerdict, Verdict: &lease.VerdictResult{
		Status: "PARTIAL", Score: 60, MaxScore: 100,
		Cases: []lease.CaseResult{{CaseID: "c1", Status: "AC", Score: 40}, {CaseID: "c2", Status: "PARTIAL", Score: 20, Message: "points 0.3333"}},
	}}
}

// Scores are checked against the manifest before anything is written: each
// refusal names its field, the job stays RUNNING, and a valid partial result
// is then accepted, stored and shown to the business as PARTIAL.
func TestPartialScoresAreValidatedAndStored(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	b.Enqueue(t, "ALGO", "partial")
	sess := b.Node(t, "cpp", b.Group(t, 2).ID, 1, true)
	job := b.ClaimEventually(t, b.Store, sess.NodeSession)

	bad := map[string]struct {
		mut   func(v *lease.VerdictResult)
		field string
	}{
		"case above its weight":  {func(v *lease.VerdictResult) { v.Cases[1].Score, v.Score = 61, 101 }, "verdict.cases[1].score"},
		"negative case score":    {func(v *lease.VerdictResult) { v.Cases[1].Score, v.Score = -1, 39 }, "verdict.cases[1].score"},
		"more than 4 decimals":   {func(v *lease.VerdictResult) { v.Cases[1].Score, v.Score = 20.00001, 60.00001 }, "verdict.score"},
		"total not the sum":      {func(v *lease.VerdictResult) { v.Score = 61 }, "verdict.score"},
		"total above max":        {func(v *lease.VerdictResult) { v.Score = 100.5 }, "verdict.score"},
		"AC short of its weight": {func(v *lease.VerdictResult) { v.Cases[0].Score, v.Score = 39, 59 }, "verdict.cases[0].score"},
		"WA with points":         {func(v *lease.VerdictResult) { v.Cases[1].Status, v.Status = "WA", "WA" }, "verdict.cases[1].score"},
		"PARTIAL job with a WA":  {func(v *lease.VerdictResult) { v.Cases[1].Status, v.Cases[1].Score, v.Score = "WA", 0, 40 }, "verdict.status"},
		"AC job with a PARTIAL":  {func(v *lease.VerdictResult) { v.Status = "AC" }, "verdict.status"},
		"unknown case status":    {func(v *lease.VerdictResult) { v.Cases[1].Status = "PC" }, "verdict.cases[1].status"},
		"PARTIAL job missing a case": {func(v *lease.VerdictResult) {
			v.Cases, v.Score = v.Cases[1:], 20
		}, "verdict.cases"},
	}
	for name, tc := range bad {
		r := partialResult()
		tc.mut(r.Verdict)
		_, err := b.Store.Leases().Complete(b.Ctx, sess.NodeSession, job.JobID, job.LeaseEpoch, r)
		require.ErrorIs(t, err, store.ErrValidation, name)
		var ve *store.ValidationError
		require.ErrorAs(t, err, &ve, name)
		require.Equal(t, tc.field, ve.Field, "%s: %v", name, err)
	}
	j, err := b.Store.Jobs().GetJob(b.Ctx, job.JobID)
	require.NoError(t, err)
	require.Equal(t, store.StateRunning, j.State, "a refused result writes nothing")

	out, err := b.Store.Leases().Complete(b.Ctx, sess.NodeSession, job.JobID, job.LeaseEpoch, partialResult())
	require.NoError(t, err)
	require.Equal(t, lease.Accepted, out.Disposition)
	st, err := b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "partial")
	require.NoError(t, err)
	require.Equal(t, "PARTIAL", st.Status)
	var stored lease.Result
	require.NoError(t, json.Unmarshal(st.Result, &stored))
	require.Equal(t, 60.0, stored.Verdict.Score)
	require.Equal(t, 20.0, stored.Verdict.Cases[1].Score)
	require.Equal(t, "PARTIAL", stored.Verdict.Cases[1].Status)
}
