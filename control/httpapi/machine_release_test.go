package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/replica"
	"github.com/kece-oj/kece/control/store"
)

// Over the wire: a claim retried with its request id answers the same
// lease; a release gives it back at once (attempt not counted) and fences
// the node out; bad release input is a 400 with a machine code.
func TestClaimRetryAndReleaseOverHTTP(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{Store: store.Config{BackoffBase: time.Hour, BackoffMax: time.Hour}})
	manID := env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 100})
	n := env.NewNode("cpp", 1, 4)
	nc := joinAndOpen(t, env, n.JoinCode, "boot-release-1")
	env.ForceEnable(n.ID)
	jobID := env.Enqueue("ALGO", "rel-1", "cpp17", "int main(){}", manID)

	reqID := "claim-0123456789abcdef"
	claim := func() machineapi.ClaimedJob {
		t.Helper()
		r, err := nc.c.ClaimJobsWithResponse(env.Ctx, machineapi.ClaimRequest{FreeSlots: 1, WaitMs: 0, RequestId: &reqID})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
		require.Len(t, r.JSON200.Jobs, 1)
		return r.JSON200.Jobs[0]
	}
	first := claim()
	again := claim() // the first answer "was lost"
	require.Equal(t, first.JobId, again.JobId)
	require.Equal(t, first.LeaseEpoch, again.LeaseEpoch)
	require.Equal(t, idStr(jobID), again.JobId)

	rel, err := nc.c.ReleaseLeasesWithResponse(env.Ctx, machineapi.ReleaseRequest{Reason: machineapi.ReleaseReasonShuttingDown,
		Leases: []machineapi.LeaseRef{{JobId: first.JobId, LeaseEpoch: first.LeaseEpoch}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, rel.StatusCode(), string(rel.Body))
	require.Equal(t, machineapi.ReleaseStateReleased, rel.JSON200.Leases[0].State)
	j, err := env.Store.Jobs().GetJob(env.Ctx, jobID)
	require.NoError(t, err)
	require.Equal(t, store.StateQueued, j.State)
	require.Zero(t, j.AvailableIn, "no backoff after a release")
	require.Zero(t, j.AttemptCount)

	res, err := nc.c.SubmitResultWithResponse(env.Ctx, first.JobId, machineapi.ResultRequest{LeaseEpoch: first.LeaseEpoch,
		Outcome: machineapi.OutcomeError, Error: &machineapi.InfraError{Code: machineapi.InfraErrorCodeInternal, Message: "late"}})
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, res.StatusCode(), "a released lease never commits")
	require.Equal(t, machineapi.ErrorCodeLeaseLost, res.JSON409.Code)

	bad, err := nc.c.ReleaseLeasesWithResponse(env.Ctx, machineapi.ReleaseRequest{Reason: "BORED",
		Leases: []machineapi.LeaseRef{{JobId: first.JobId, LeaseEpoch: first.LeaseEpoch}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, bad.StatusCode(), string(bad.Body))
	require.Equal(t, machineapi.ErrorCodeRequestInvalid, bad.JSON400.Code)
	badID := "no!"
	bc, err := nc.c.ClaimJobsWithResponse(env.Ctx, machineapi.ClaimRequest{FreeSlots: 1, RequestId: &badID})
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, bc.StatusCode(), string(bc.Body))
	require.Equal(t, machineapi.ErrorCodeRequestInvalid, bc.JSON400.Code)
}

// Over the wire: a stale copy of a claim (its request id already answered,
// its job run and its result posted) answers an empty list and takes no new
// lease, even with a queued job and a free slot; waiting on the long-poll
// does not change that.
func TestStaleClaimOverHTTPTakesNoNewLease(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	manID := env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 100})
	n := env.NewNode("cpp", 1, 4)
	nc := joinAndOpen(t, env, n.JoinCode, "boot-stale-1")
	env.ForceEnable(n.ID)
	first := env.Enqueue("ALGO", "stale-http-1", "cpp17", "int main(){}", manID)
	second := env.Enqueue("ALGO", "stale-http-2", "cpp17", "int main(){}", manID)

	reqID := "claim-stale-http-0001"
	claim := func(waitMs int64) []machineapi.ClaimedJob {
		t.Helper()
		r, err := nc.c.ClaimJobsWithResponse(env.Ctx, machineapi.ClaimRequest{FreeSlots: 1, WaitMs: waitMs, RequestId: &reqID})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
		return r.JSON200.Jobs
	}
	got := claim(0)
	require.Len(t, got, 1)
	require.Equal(t, idStr(first), got[0].JobId)
	again := claim(0)
	require.Len(t, again, 1, "a lost answer: the same lease again")
	require.Equal(t, got[0].JobId, again[0].JobId)
	require.Equal(t, got[0].LeaseEpoch, again[0].LeaseEpoch)

	res, err := nc.c.SubmitResultWithResponse(env.Ctx, got[0].JobId, machineapi.ResultRequest{LeaseEpoch: got[0].LeaseEpoch,
		Outcome: machineapi.OutcomeVerdict, Verdict: &machineapi.Verdict{Status: machineapi.VerdictStatusAC, Score: 100, MaxScore: 100,
			Cases: []machineapi.CaseResult{{CaseId: "c1", Status: machineapi.VerdictStatusAC, Score: 100, TimeMs: 2}}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode(), string(res.Body))

	require.Empty(t, claim(0), "the stale copy: its lease ended")
	require.Empty(t, claim(300), "nor after a wait")
	var attempts int
	require.NoError(t, env.DB.QueryRowContext(env.Ctx,
		`SELECT COUNT(*) FROM judge_job_attempt WHERE claim_request_id = ?`, reqID).Scan(&attempts))
	require.Equal(t, 1, attempts, "no new attempt")
	j, err := env.Store.Jobs().GetJob(env.Ctx, second)
	require.NoError(t, err)
	require.Equal(t, store.StateQueued, j.State)

	// A new request id takes it.
	reqID = "claim-stale-http-0002"
	next := claim(0)
	require.Len(t, next, 1)
	require.Equal(t, idStr(second), next[0].JobId)
}

// The heartbeat TTL must leave room for a late heartbeat.
func TestHeartbeatIntervalMustFitTheHeartbeatTTL(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	rep, err := replica.New(replica.Config{Store: store.Config{HeartbeatTTL: 15 * time.Second}}, env.DB, env.Artifacts, nil)
	require.NoError(t, err)
	_, err = httpapi.New(httpapi.Config{HeartbeatInterval: 10 * time.Second}, rep.HTTPDeps(), nil)
	require.ErrorContains(t, err, "heartbeat TTL")
}
