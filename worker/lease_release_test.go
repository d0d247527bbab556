package worker_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/worker/faultproxy"
)

// A claim answer lost on the way: the node sends the claim again with the
// same request id, gets the same lease and runs it. No attempt is burned,
// no lease waits to run out.
func TestLostClaimAnswerIsRetriedWithTheSameRequest(t *testing.T) {
	t.Parallel()
	e := env(t, 5*time.Second)
	man := publishEcho(e)
	jobID := enqueue(e, "cpp17", man)
	nd := e.NewNode("cpp", 1, 4)
	e.ForceEnable(nd.ID)
	px := faultproxy.New(e.URL)
	t.Cleanup(px.Close)
	dropped := px.Add(faultproxy.Rule{Method: "POST", PathContains: "/jobs/claim", Action: faultproxy.DropResponse, Times: 1})
	fake := newFake(false)
	n := runNode(t, nodeConfig(t, px.URL(), "cpp", nd.JoinCode, fake))
	<-dropped.Fired()
	j := waitJob(t, e, jobID, 10*time.Second, "completed", completed)
	require.Equal(t, nd.ID, j.NodeID)
	require.Equal(t, int64(1), j.LeaseEpoch, "the retry got the lease the lost answer carried")
	require.Equal(t, 1, j.AttemptCount)
	require.Zero(t, j.UnstartedAttempts)
	require.Equal(t, 1, fake.ran(idStr(jobID)))
	require.Positive(t, n.Metrics().ClaimRetries)
	att, err := e.Store.Jobs().Attempts(e.Ctx, jobID)
	require.NoError(t, err)
	require.Len(t, att, 1)
	require.True(t, *att[0].JudgingStarted, "the node reported its start")
}

// The job's inputs cannot be made available on this node (downloads keep
// failing): the node gives the lease back at once instead of failing the
// job; the attempt is recorded as never started and not counted, and
// another node judges the job.
func TestUnavailableInputsGiveTheLeaseBack(t *testing.T) {
	t.Parallel()
	e := env(t, 30*time.Second) // only a release can free the job this soon
	man := publishEcho(e)
	jobID := enqueue(e, "cpp17", man)
	a, b := e.NewNode("cpp", 1, 4), e.NewNode("cpp", 1, 4)
	e.ForceEnable(a.ID)
	e.ForceEnable(b.ID)
	px := faultproxy.New(e.URL)
	t.Cleanup(px.Close)
	px.Add(faultproxy.Rule{Method: "GET", PathContains: "/artifacts/", Action: faultproxy.Respond, Status: http.StatusBadGateway})
	px.Add(faultproxy.Rule{Method: "POST", PathContains: "/jobs/claim", Action: faultproxy.Pass, Times: 1})
	px.Add(faultproxy.Rule{Method: "POST", PathContains: "/jobs/claim", Action: faultproxy.Block})
	fa := newFake(false)
	na := runNode(t, nodeConfig(t, px.URL(), "cpp", a.JoinCode, fa))
	waitJob(t, e, jobID, 20*time.Second, "given back by A", func(j store.Job) bool {
		return j.State == store.StateQueued && j.UnstartedAttempts == 1
	})
	// The node counts the release when its answer arrives, after the commit.
	require.Eventually(t, func() bool { return na.Metrics().LeasesReleased == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 0, fa.totalRuns())

	fb := newFake(false)
	runNode(t, nodeConfig(t, e.URL, "cpp", b.JoinCode, fb))
	j := waitJob(t, e, jobID, 10*time.Second, "completed by B", completed)
	require.Equal(t, b.ID, j.NodeID)
	require.Equal(t, 1, j.AttemptCount, "A's lease was not counted")
	att, err := e.Store.Jobs().Attempts(e.Ctx, jobID)
	require.NoError(t, err)
	require.Len(t, att, 2)
	require.Equal(t, store.AttemptReleased, att[0].Outcome)
	require.Equal(t, store.ReleaseInputsUnavailable, att[0].ErrorClass)
	require.False(t, *att[0].JudgingStarted)
	require.Equal(t, 1, eventsFor(t, e, jobID))
}
