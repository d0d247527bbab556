package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
)

// A testlib checker with its header as a checker file is published through
// the business API; a node's partial result is checked against the manifest
// (scores out of range are 422 RESULT_INVALID naming the field), then stored
// and shown as PARTIAL with its score on the business status, the settlement
// event and the admin job detail.
func TestPartialCreditOverHTTP(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	ctx, c := b.env.Ctx, b.c

	m := codeManifest(t, c, "1\n", "ANSWER\n")
	m.Cases = append(m.Cases, m.Cases[0])
	m.Cases[1].CaseId, m.Cases[0].Weight, m.Cases[1].Weight = "c2", 40, 60
	src, hdr := []byte("#include \"testlib.h\"\nint main(){}\n"), []byte("// the setter's testlib.h\n")
	proto, pts := businessapi.CheckerProtocolTestlib, 100.0
	files := []businessapi.CheckerFile{{Name: "testlib.h", Sha256: digestOf(hdr), Size: int64(len(hdr))}}
	m.Checker = businessapi.Checker{Type: businessapi.CheckerTypeSpecial, Special: &businessapi.SpecialChecker{
		Language: "cpp17", SourceSha256: upload(t, c, src), SourceSize: int64(len(src)),
		Protocol: &proto, MaxPoints: &pts, Files: &files}}

	// The header is not uploaded yet: refused, naming the file.
	pm, err := c.PublishManifestWithResponse(ctx, m)
	require.NoError(t, err)
	conforms(t, pm.HTTPResponse, pm.Body)
	require.Equal(t, http.StatusUnprocessableEntity, pm.StatusCode(), string(pm.Body))
	code, field := apiError(t, pm.Body)
	require.Equal(t, "ARTIFACT_MISSING", code)
	require.Equal(t, "checker.special.files[0].sha256", field)
	upload(t, c, hdr)
	manID := publish(t, c, m)
	gm, err := c.GetManifestWithResponse(ctx, manID)
	require.NoError(t, err)
	require.Equal(t, m, gm.JSON200.Manifest, "protocol, maxPoints and files round-trip")

	en, err := c.EnqueueSubmissionWithResponse(ctx, nil, businessapi.SubmissionCreate{SubmissionType: "ALGO", SubmissionId: "p-1",
		Language: "cpp17", Source: "int main(){}", ManifestId: manID})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, en.StatusCode(), string(en.Body))

	n := b.env.NewNode("cpp", 2, 4)
	nc := joinAndOpen(t, b.env, n.JoinCode, "boot-partial-1")
	b.env.ForceEnable(n.ID)
	cl, err := nc.c.ClaimJobsWithResponse(ctx, machineapi.ClaimRequest{FreeSlots: 1, WaitMs: 1000})
	require.NoError(t, err)
	require.Len(t, cl.JSON200.Jobs, 1)
	job := cl.JSON200.Jobs[0]
	sp := job.Manifest.Checker.Special
	require.Equal(t, machineapi.CheckerProtocolTestlib, *sp.Protocol)
	require.Equal(t, "testlib.h", (*sp.Files)[0].Name)
	dl, err := nc.c.DownloadArtifactWithResponse(ctx, job.JobId, digestOf(hdr), &machineapi.DownloadArtifactParams{XKeceLeaseEpoch: job.LeaseEpoch})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, dl.StatusCode(), "a checker file is an artifact of the job")
	require.Equal(t, hdr, dl.Body)

	partial := func() *machineapi.Verdict {
		return &machineapi.Verdict{Status: machineapi.VerdictStatusPARTIAL, Score: 55.0001, MaxScore: 100,
			Cases: []machineapi.CaseResult{{CaseId: "c1", Status: machineapi.VerdictStatusAC, Score: 40},
				{CaseId: "c2", Status: machineapi.VerdictStatusPARTIAL, Score: 15.0001, Message: "points 25.00016"}}}
	}
	for _, tc := range []struct {
		name  string
		mut   func(v *machineapi.Verdict)
		field string
	}{
		{"case above its weight", func(v *machineapi.Verdict) { v.Cases[1].Score, v.Score = 60.5, 100.5 }, "verdict.cases[1].score"},
		{"sum differs", func(v *machineapi.Verdict) { v.Score = 56 }, "verdict.score"},
		{"finer than 1/10000", func(v *machineapi.Verdict) { v.Cases[1].Score, v.Score = 15.00015, 55.00015 }, "verdict.score"},
		{"job status against the rule", func(v *machineapi.Verdict) { v.Status = machineapi.VerdictStatusAC }, "verdict.status"},
	} {
		v := partial()
		tc.mut(v)
		res, err := nc.c.SubmitResultWithResponse(ctx, job.JobId, machineapi.ResultRequest{LeaseEpoch: job.LeaseEpoch,
			Outcome: machineapi.OutcomeVerdict, Verdict: v})
		require.NoError(t, err)
		require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode(), tc.name+": "+string(res.Body))
		code, field := apiError(t, res.Body)
		require.Equal(t, "RESULT_INVALID", code, tc.name)
		require.Equal(t, tc.field, field, tc.name)
	}
	res, err := nc.c.SubmitResultWithResponse(ctx, job.JobId, machineapi.ResultRequest{LeaseEpoch: job.LeaseEpoch,
		Outcome: machineapi.OutcomeVerdict, Verdict: partial()})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode(), string(res.Body))

	st, err := c.GetSubmissionWithResponse(ctx, "ALGO", "p-1", nil)
	require.NoError(t, err)
	conforms(t, st.HTTPResponse, st.Body)
	require.Equal(t, businessapi.SubmissionStatusCodePARTIAL, st.JSON200.Status)
	require.Equal(t, businessapi.VerdictStatusPARTIAL, st.JSON200.Verdict.Status)
	require.Equal(t, 55.0001, st.JSON200.Verdict.Score)
	require.Equal(t, 15.0001, st.JSON200.Verdict.Cases[1].Score)
	require.Equal(t, businessapi.VerdictStatusPARTIAL, st.JSON200.Verdict.Cases[1].Status)

	ev, err := c.ClaimSettlementEventsWithResponse(ctx, businessapi.EventClaimRequest{Consumer: "biz-p", Max: 10, LeaseMs: 60000})
	require.NoError(t, err)
	conforms(t, ev.HTTPResponse, ev.Body)
	require.Len(t, ev.JSON200.Events, 1)
	require.Equal(t, businessapi.SubmissionStatusCodePARTIAL, ev.JSON200.Events[0].Payload.Status)
	require.Equal(t, 55.0001, ev.JSON200.Events[0].Payload.Verdict.Score)

	gj, err := adminClient(t, b.env).GetJudgeJobWithResponse(ctx, job.JobId)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, gj.StatusCode(), string(gj.Body))
	require.Equal(t, adminapi.VerdictStatusPARTIAL, gj.JSON200.Verdict.Status)
	require.Equal(t, 55.0001, gj.JSON200.Verdict.Score)
	require.Equal(t, 15.0001, gj.JSON200.Verdict.Cases[1].Score)
}
