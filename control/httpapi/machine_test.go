package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/manifest"
)

type nodeClient struct {
	c       *machineapi.ClientWithResponses
	raw     *machineapi.Client
	session machineapi.SessionResponse
	cred    string
}

func client(t *testing.T, url string, token string) *machineapi.ClientWithResponses {
	c, err := machineapi.NewClientWithResponses(url, machineapi.WithRequestEditorFn(controltest.Bearer(token)))
	require.NoError(t, err)
	return c
}

// joinAndOpen joins with the code and opens a session for bootID.
func joinAndOpen(t *testing.T, env *controltest.Env, code, bootID string) *nodeClient {
	t.Helper()
	anon := client(t, env.URL, "")
	j, err := anon.JoinNodeWithResponse(env.Ctx, machineapi.JoinRequest{JoinCode: code})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, j.StatusCode(), string(j.Body))
	return openSession(t, env.URL, j.JSON201.Credential, bootID)
}

func openSession(t *testing.T, url, cred, bootID string) *nodeClient {
	t.Helper()
	s, err := client(t, url, cred).OpenSessionWithResponse(context.Background(), machineapi.SessionRequest{BootId: bootID, ProtocolVersion: 1})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, s.StatusCode(), string(s.Body))
	raw, err := machineapi.NewClient(url, machineapi.WithRequestEditorFn(controltest.Bearer(s.JSON200.SessionToken)))
	require.NoError(t, err)
	return &nodeClient{c: client(t, url, s.JSON200.SessionToken), raw: raw, session: *s.JSON200, cred: cred}
}

func TestMachineProtocolRoundTrip(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	manID := env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 100})
	n := env.NewNode("cpp", 2, 4)
	nc := joinAndOpen(t, env, n.JoinCode, "boot-0001")
	require.Equal(t, machineapi.PoolCpp, nc.session.Pool)
	env.ForceEnable(n.ID)

	hb, err := nc.c.SendHeartbeatWithResponse(env.Ctx, machineapi.HeartbeatRequest{RuntimeVersion: "g++ 12",
		Dependencies: []machineapi.Dependency{{Name: "docker", Healthy: true}}, LocalSlots: 2})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, hb.StatusCode(), string(hb.Body))
	require.Equal(t, machineapi.DesiredStateEnabled, hb.JSON200.DesiredState)

	// A waiting claim is woken by an enqueue in the same replica.
	type claimed struct {
		r   *machineapi.ClaimJobsResponse
		err error
		at  time.Time
	}
	ch := make(chan claimed, 1)
	go func() {
		r, err := nc.c.ClaimJobsWithResponse(env.Ctx, machineapi.ClaimRequest{FreeSlots: 2, WaitMs: 10000})
		ch <- claimed{r, err, time.Now()}
	}()
	require.Eventually(t, func() bool { return env.Server.ParkedClaimsForTest() == 1 }, 5*time.Second, time.Millisecond, "the poll parks")
	enqueuedAt := time.Now()
	jobID := env.Enqueue("ALGO", "1", "cpp17", "int main(){}", manID)
	got := <-ch
	require.NoError(t, got.err)
	require.Equal(t, http.StatusOK, got.r.StatusCode(), string(got.r.Body))
	require.Len(t, got.r.JSON200.Jobs, 1)
	require.Less(t, got.at.Sub(enqueuedAt), time.Second, "same-replica wake-up")
	job := got.r.JSON200.Jobs[0]
	require.Equal(t, idStr(jobID), job.JobId)
	require.Equal(t, "int main(){}", job.Submission.Source)
	require.Len(t, job.Manifest.Cases, 1)
	require.Positive(t, job.LeaseRemainingMs)

	// Artifacts: only the lease holder, only digests of the manifest.
	c := job.Manifest.Cases[0]
	resp, err := nc.raw.DownloadArtifact(env.Ctx, job.JobId, c.OutputSha256, &machineapi.DownloadArtifactParams{XKeceLeaseEpoch: job.LeaseEpoch})
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "3\n", string(body))
	require.Equal(t, c.OutputSha256, resp.Header.Get("X-Kece-Sha256"))
	require.Equal(t, "2", resp.Header.Get("Content-Length"))
	foreign := env.PutArtifact([]byte("secret of another problem"))
	resp, err = nc.raw.DownloadArtifact(env.Ctx, job.JobId, foreign, &machineapi.DownloadArtifactParams{XKeceLeaseEpoch: job.LeaseEpoch})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, err = nc.raw.DownloadArtifact(env.Ctx, job.JobId, c.OutputSha256, &machineapi.DownloadArtifactParams{XKeceLeaseEpoch: job.LeaseEpoch + 1})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusConflict, resp.StatusCode, "another lease epoch")

	rn, err := nc.c.RenewLeasesWithResponse(env.Ctx, machineapi.RenewRequest{Leases: []machineapi.LeaseProgress{
		{JobId: job.JobId, LeaseEpoch: job.LeaseEpoch, ProgressSeq: 1, Phase: machineapi.PhaseJudging, CasesDone: 1, CasesTotal: 1}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, rn.StatusCode(), string(rn.Body))
	require.Equal(t, machineapi.LeaseStateOk, rn.JSON200.Leases[0].State)

	result := machineapi.ResultRequest{LeaseEpoch: job.LeaseEpoch, Outcome: machineapi.OutcomeVerdict, Verdict: &machineapi.Verdict{
		Status: machineapi.VerdictStatusAC, Score: 100, MaxScore: 100,
		Cases: []machineapi.CaseResult{{CaseId: "c1", Status: machineapi.VerdictStatusAC, Score: 100, TimeMs: 2}}}}
	r1, err := nc.c.SubmitResultWithResponse(env.Ctx, job.JobId, result)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r1.StatusCode(), string(r1.Body))
	require.Equal(t, machineapi.DispositionAccepted, r1.JSON200.Disposition)
	r2, err := nc.c.SubmitResultWithResponse(env.Ctx, job.JobId, result)
	require.NoError(t, err)
	require.Equal(t, machineapi.DispositionAlreadyCommitted, r2.JSON200.Disposition)
	result.Verdict.Status, result.Verdict.Cases[0].Status = machineapi.VerdictStatusWA, machineapi.VerdictStatusWA
	result.Verdict.Score, result.Verdict.Cases[0].Score = 0, 0
	r3, err := nc.c.SubmitResultWithResponse(env.Ctx, job.JobId, result)
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, r3.StatusCode())
	require.Equal(t, machineapi.ErrorCodeResultConflict, r3.JSON409.Code)

	// Artifacts are refused once the lease is over.
	resp, err = nc.raw.DownloadArtifact(env.Ctx, job.JobId, c.OutputSha256, &machineapi.DownloadArtifactParams{XKeceLeaseEpoch: job.LeaseEpoch})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusConflict, resp.StatusCode)
}

func idStr(id int64) string { return strconv.FormatInt(id, 10) }

// The slot cycle over HTTP: the session says the control plane takes a
// claim with a result; a result with one answers the next job in full (as
// claim does); the same call again answers ALREADY_COMMITTED and the same
// lease; a refused result claims nothing; a malformed claim is a 400.
func TestResultCarriesTheNextClaim(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	manID := env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 100})
	n := env.NewNode("cpp", 1, 4)
	nc := joinAndOpen(t, env, n.JoinCode, "boot-cycle-1")
	require.NotNil(t, nc.session.ResultClaims)
	require.True(t, *nc.session.ResultClaims)
	env.ForceEnable(n.ID)
	first := env.Enqueue("ALGO", "cycle-1", "cpp17", "int main(){}", manID)
	second := env.Enqueue("ALGO", "cycle-2", "cpp17", "int main(){return 0;}", manID)

	cl, err := nc.c.ClaimJobsWithResponse(env.Ctx, machineapi.ClaimRequest{FreeSlots: 1, WaitMs: 2000})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, cl.StatusCode(), string(cl.Body))
	require.Len(t, cl.JSON200.Jobs, 1)
	job := cl.JSON200.Jobs[0]
	require.Equal(t, idStr(first), job.JobId)

	result := machineapi.ResultRequest{LeaseEpoch: job.LeaseEpoch, Outcome: machineapi.OutcomeVerdict, Verdict: &machineapi.Verdict{
		Status: machineapi.VerdictStatusAC, Score: 100, MaxScore: 100,
		Cases: []machineapi.CaseResult{{CaseId: "c1", Status: machineapi.VerdictStatusAC, Score: 100, TimeMs: 2}}},
		Claim: &machineapi.ResultClaim{FreeSlots: 1, RequestId: "cycle-request-1"}}
	r1, err := nc.c.SubmitResultWithResponse(env.Ctx, job.JobId, result)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r1.StatusCode(), string(r1.Body))
	require.Equal(t, machineapi.DispositionAccepted, r1.JSON200.Disposition)
	require.Equal(t, machineapi.JobStateCompleted, r1.JSON200.JobState)
	require.NotNil(t, r1.JSON200.Jobs)
	require.Len(t, *r1.JSON200.Jobs, 1)
	next := (*r1.JSON200.Jobs)[0]
	require.Equal(t, idStr(second), next.JobId)
	require.Equal(t, "int main(){return 0;}", next.Submission.Source)
	require.Len(t, next.Manifest.Cases, 1)
	require.Positive(t, next.LeaseRemainingMs)

	// The answer was lost: the node sends the same call again.
	r2, err := nc.c.SubmitResultWithResponse(env.Ctx, job.JobId, result)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r2.StatusCode(), string(r2.Body))
	require.Equal(t, machineapi.DispositionAlreadyCommitted, r2.JSON200.Disposition)
	require.Len(t, *r2.JSON200.Jobs, 1)
	require.Equal(t, next.JobId, (*r2.JSON200.Jobs)[0].JobId)
	require.Equal(t, next.LeaseEpoch, (*r2.JSON200.Jobs)[0].LeaseEpoch)

	// A different result for the committed lease: 409, and no claim.
	env.Enqueue("ALGO", "cycle-3", "cpp17", "int main(){}", manID)
	conflict := result
	conflict.Verdict = &machineapi.Verdict{Status: machineapi.VerdictStatusWA, Score: 0, MaxScore: 100,
		Cases: []machineapi.CaseResult{{CaseId: "c1", Status: machineapi.VerdictStatusWA, Score: 0, TimeMs: 2}}}
	conflict.Claim = &machineapi.ResultClaim{FreeSlots: 1, RequestId: "cycle-request-2"}
	r3, err := nc.c.SubmitResultWithResponse(env.Ctx, job.JobId, conflict)
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, r3.StatusCode())
	require.Equal(t, machineapi.ErrorCodeResultConflict, r3.JSON409.Code)
	var running int
	require.NoError(t, env.DB.QueryRowContext(env.Ctx, `SELECT COUNT(*) FROM judge_job WHERE state = 'RUNNING'`).Scan(&running))
	require.Equal(t, 1, running, "the refused result leased nothing")

	// A malformed claim is refused before anything is written.
	bad := result
	bad.LeaseEpoch = next.LeaseEpoch
	bad.Claim = &machineapi.ResultClaim{FreeSlots: 0, RequestId: "cycle-request-3"}
	r4, err := nc.c.SubmitResultWithResponse(env.Ctx, next.JobId, bad)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, r4.StatusCode(), string(r4.Body))
	require.NoError(t, env.DB.QueryRowContext(env.Ctx, `SELECT COUNT(*) FROM judge_job WHERE state = 'RUNNING'`).Scan(&running))
	require.Equal(t, 1, running)
}
