package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
)

type waitAnswer struct {
	st  *businessapi.SubmissionStatus
	at  time.Time
	err error
}

// waitRead starts a waiting status read and returns its answer channel once
// the read has parked on the replica (no sleep: the registry says so).
func waitRead(t *testing.T, env *controltest.Env, c *businessapi.ClientWithResponses, id string, waitMs int32) <-chan waitAnswer {
	t.Helper()
	before := env.Server.StatusWaitsForTest()
	ch := make(chan waitAnswer, 1)
	go func() {
		r, err := c.GetSubmissionWithResponse(context.Background(), "ALGO", id, &businessapi.GetSubmissionParams{WaitMs: &waitMs})
		a := waitAnswer{err: err, at: time.Now()}
		if err == nil {
			a.st = r.JSON200
		}
		ch <- a
	}()
	require.Eventually(t, func() bool { return env.Server.StatusWaitsForTest() > before }, 5*time.Second, time.Millisecond)
	return ch
}

// TestWaitingStatusRead: ?waitMs answers as soon as the current generation
// settles — at once for a result committed on the same replica, within the
// poll interval for one committed on another — answers the current status
// when the wait ends, and answers at once when already settled.
func TestWaitingStatusRead(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	second := b.env.SecondReplica()
	secondC := bizClient(t, second.URL, second.Business)
	manID := publish(t, b.c, codeManifest(t, b.c, "1\n", "1\n"))
	n := b.env.NewNode("cpp", 4, 4)
	b.env.ForceEnable(n.ID)
	nc := joinAndOpen(t, b.env, n.JoinCode, "boot-wait")

	judge := func(id string) {
		t.Helper()
		en, err := b.c.EnqueueSubmissionWithResponse(b.env.Ctx, nil, businessapi.SubmissionCreate{SubmissionType: "ALGO",
			SubmissionId: id, Language: "cpp17", Source: "int main(){}", ManifestId: manID})
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, en.StatusCode(), string(en.Body))
	}
	finish := func() time.Time {
		t.Helper()
		cl, err := nc.c.ClaimJobsWithResponse(b.env.Ctx, machineapi.ClaimRequest{FreeSlots: 1, WaitMs: 5000})
		require.NoError(t, err)
		require.Len(t, cl.JSON200.Jobs, 1)
		job := cl.JSON200.Jobs[0]
		res, err := nc.c.SubmitResultWithResponse(b.env.Ctx, job.JobId, machineapi.ResultRequest{LeaseEpoch: job.LeaseEpoch,
			Outcome: machineapi.OutcomeVerdict, Verdict: &machineapi.Verdict{Status: machineapi.VerdictStatusAC, Score: 100, MaxScore: 100,
				Cases: []machineapi.CaseResult{{CaseId: "c1", Status: machineapi.VerdictStatusAC, Score: 100}}}})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode(), string(res.Body))
		return time.Now()
	}

	// Same replica: woken by the commit itself.
	judge("w-same")
	ans := waitRead(t, b.env, b.c, "w-same", 30000)
	done := finish()
	got := <-ans
	require.NoError(t, got.err)
	require.Equal(t, businessapi.SubmissionStatusCodeAC, got.st.Status)
	require.Equal(t, int32(1), got.st.CasesDone)
	require.Equal(t, int32(1), got.st.CasesTotal)
	require.Less(t, got.at.Sub(done), time.Second, "answered at the settlement, not at the end of the wait")

	// Another replica: woken by its poller.
	judge("w-other")
	ans = waitRead(t, second, secondC, "w-other", 30000)
	done = finish()
	got = <-ans
	require.NoError(t, got.err)
	require.Equal(t, businessapi.SubmissionStatusCodeAC, got.st.Status)
	require.Less(t, got.at.Sub(done), 2*time.Second, "woken within the poll interval")

	// Already settled: at once.
	start := time.Now()
	wait := int32(30000)
	r, err := secondC.GetSubmissionWithResponse(b.env.Ctx, "ALGO", "w-other", &businessapi.GetSubmissionParams{WaitMs: &wait})
	require.NoError(t, err)
	require.Equal(t, businessapi.SubmissionStatusCodeAC, r.JSON200.Status)
	require.Less(t, time.Since(start), 2*time.Second)

	// Nothing happens: the current status when the wait ends.
	judge("w-idle")
	start = time.Now()
	wait = 300
	r, err = b.c.GetSubmissionWithResponse(b.env.Ctx, "ALGO", "w-idle", &businessapi.GetSubmissionParams{WaitMs: &wait})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
	require.Equal(t, businessapi.SubmissionStatusCodePending, r.JSON200.Status)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	require.Zero(t, b.env.Server.StatusWaitsForTest(), "no waiter left behind")

	// A cancel settles it too.
	ans = waitRead(t, second, secondC, "w-idle", 30000)
	cn, err := b.c.CancelSubmissionWithResponse(b.env.Ctx, "ALGO", "w-idle", businessapi.ReasonRequest{Reason: "test"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, cn.StatusCode(), string(cn.Body))
	got = <-ans
	require.NoError(t, got.err)
	require.Equal(t, businessapi.SubmissionStatusCodeCancelled, got.st.Status)

	// Out of range is refused by the contract.
	wait = 60001
	r, err = b.c.GetSubmissionWithResponse(b.env.Ctx, "ALGO", "w-idle", &businessapi.GetSubmissionParams{WaitMs: &wait})
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, r.StatusCode(), string(r.Body))
}
