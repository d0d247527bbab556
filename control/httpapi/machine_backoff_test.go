package httpapi_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
)

// A job retried after an infrastructure error is handed to a waiting claim
// when its backoff ends, not at the waiter's next periodic retry (~2 s).
func TestWaitingClaimPicksUpRetryWhenBackoffEnds(t *testing.T) {
	t.Parallel()
	const backoff = 400 * time.Millisecond
	env := controltest.Start(t, controltest.Options{Store: store.Config{BackoffBase: backoff, BackoffMax: backoff}})
	manID := env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "exact"},
		controltest.Case{In: "", Out: "", Weight: 1})
	n := env.NewNode("cpp", 1, 1)
	nc := joinAndOpen(t, env, n.JoinCode, "boot-backoff1")
	env.ForceEnable(n.ID)
	jobID := env.Enqueue("ALGO", "b1", "cpp17", "int main(){}", manID)

	c, err := nc.c.ClaimJobsWithResponse(env.Ctx, machineapi.ClaimRequest{FreeSlots: 1, WaitMs: 0})
	require.NoError(t, err)
	require.Len(t, c.JSON200.Jobs, 1)
	r, err := nc.c.SubmitResultWithResponse(env.Ctx, strconv.FormatInt(jobID, 10), machineapi.ResultRequest{
		LeaseEpoch: c.JSON200.Jobs[0].LeaseEpoch, Outcome: machineapi.OutcomeError,
		Error: &machineapi.InfraError{Code: machineapi.InfraErrorCodeDaemonUnreachable, Message: "docker down"}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
	require.Equal(t, machineapi.JobStateQueued, r.JSON200.JobState)

	start := time.Now()
	c, err = nc.c.ClaimJobsWithResponse(env.Ctx, machineapi.ClaimRequest{FreeSlots: 1, WaitMs: 10000})
	took := time.Since(start)
	require.NoError(t, err)
	require.Len(t, c.JSON200.Jobs, 1, "the retry is handed out within the poll")
	require.Equal(t, int32(2), c.JSON200.Jobs[0].Attempt)
	require.GreaterOrEqual(t, took, backoff/2, "not before the backoff ends")
	require.Less(t, took, 1500*time.Millisecond, "when the backoff ends, not at the next periodic retry")
}
