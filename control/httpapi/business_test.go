package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
)

func bizClient(t *testing.T, url, token string) *businessapi.ClientWithResponses {
	t.Helper()
	c, err := businessapi.NewClientWithResponses(url, businessapi.WithRequestEditorFn(controltest.Bearer(token)))
	require.NoError(t, err)
	return c
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// apiError decodes an error body: code and details.field.
func apiError(t *testing.T, body []byte) (code, field string) {
	t.Helper()
	var e struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	}
	require.NoError(t, json.Unmarshal(body, &e), string(body))
	require.NotEmpty(t, e.Message)
	f, _ := e.Details["field"].(string)
	return e.Code, f
}

func upload(t *testing.T, c *businessapi.ClientWithResponses, content []byte) string {
	t.Helper()
	d := digestOf(content)
	r, err := c.UploadArtifactWithBodyWithResponse(context.Background(), d, "application/octet-stream", bytes.NewReader(content))
	require.NoError(t, err)
	require.Contains(t, []int{http.StatusOK, http.StatusCreated}, r.StatusCode(), string(r.Body))
	return d
}

func codeManifest(t *testing.T, c *businessapi.ClientWithResponses, in, out string) businessapi.Manifest {
	t.Helper()
	return businessapi.Manifest{Kind: businessapi.ManifestKindCode,
		Limits:  businessapi.Limits{TimeMs: 1000, MemoryMb: 256, OutputKb: 64},
		Checker: businessapi.Checker{Type: businessapi.CheckerTypeTolerant},
		Cases: []businessapi.ManifestCase{{CaseId: "c1", InputSha256: upload(t, c, []byte(in)), InputSize: int64(len(in)),
			OutputSha256: upload(t, c, []byte(out)), OutputSize: int64(len(out)), Weight: 100}}}
}

func publish(t *testing.T, c *businessapi.ClientWithResponses, m businessapi.Manifest) string {
	t.Helper()
	r, err := c.PublishManifestWithResponse(context.Background(), m)
	require.NoError(t, err)
	require.Contains(t, []int{http.StatusOK, http.StatusCreated}, r.StatusCode(), string(r.Body))
	if r.JSON201 != nil {
		return r.JSON201.ManifestId
	}
	return r.JSON200.ManifestId
}

// conforms checks a response against the business contract: status listed
// for the operation, body valid against its schema.
func conforms(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	require.NoError(t, contractErr(t, resp, body), "%s %s → %d %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, body)
}

func contractErr(t *testing.T, resp *http.Response, body []byte) error {
	t.Helper()
	sw, err := businessapi.GetSpec()
	require.NoError(t, err)
	sw.Servers = nil
	router, err := gorillamux.NewRouter(sw)
	require.NoError(t, err)
	route, params, err := router.FindRoute(resp.Request)
	require.NoError(t, err)
	in := &openapi3filter.RequestValidationInput{Request: resp.Request, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true}})
}

func (e *bizEnv) count(q string, args ...any) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.env.DB.QueryRowContext(e.env.Ctx, q, args...).Scan(&n))
	return n
}

type bizEnv struct {
	t   *testing.T
	env *controltest.Env
	c   *businessapi.ClientWithResponses
}

func startBiz(t *testing.T) *bizEnv {
	env := controltest.Start(t, controltest.Options{})
	return &bizEnv{t: t, env: env, c: bizClient(t, env.URL, env.Business)}
}

func TestBusinessRoundTrip(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	ctx, c := b.env.Ctx, b.c

	// Artifacts: created, then idempotent.
	content := []byte("1 2\n")
	d := digestOf(content)
	up, err := c.UploadArtifactWithBodyWithResponse(ctx, d, "application/octet-stream", bytes.NewReader(content))
	require.NoError(t, err)
	conforms(t, up.HTTPResponse, up.Body)
	require.Equal(t, http.StatusCreated, up.StatusCode(), string(up.Body))
	require.Equal(t, businessapi.ArtifactStored{Sha256: d, Size: 4}, *up.JSON201)
	up, err = c.UploadArtifactWithBodyWithResponse(ctx, d, "application/octet-stream", bytes.NewReader(content))
	require.NoError(t, err)
	conforms(t, up.HTTPResponse, up.Body)
	require.Equal(t, http.StatusOK, up.StatusCode(), string(up.Body))
	require.Equal(t, businessapi.ArtifactStored{Sha256: d, Size: 4}, *up.JSON200)

	// Manifests: created, same content → same id with 200, readable.
	m := codeManifest(t, c, "1 2\n", "3\n")
	pm, err := c.PublishManifestWithResponse(ctx, m)
	require.NoError(t, err)
	conforms(t, pm.HTTPResponse, pm.Body)
	require.Equal(t, http.StatusCreated, pm.StatusCode(), string(pm.Body))
	manID := pm.JSON201.ManifestId
	pm2, err := c.PublishManifestWithResponse(ctx, m)
	require.NoError(t, err)
	conforms(t, pm2.HTTPResponse, pm2.Body)
	require.Equal(t, http.StatusOK, pm2.StatusCode(), string(pm2.Body))
	require.Equal(t, *pm.JSON201, *pm2.JSON200)
	gm, err := c.GetManifestWithResponse(ctx, manID)
	require.NoError(t, err)
	conforms(t, gm.HTTPResponse, gm.Body)
	require.Equal(t, http.StatusOK, gm.StatusCode(), string(gm.Body))
	require.Equal(t, manID, gm.JSON200.ManifestId)
	require.Equal(t, pm.JSON201.Digest, gm.JSON200.Digest)
	require.Equal(t, m, gm.JSON200.Manifest)
	gm, err = c.GetManifestWithResponse(ctx, "999999")
	require.NoError(t, err)
	conforms(t, gm.HTTPResponse, gm.Body)
	require.Equal(t, http.StatusNotFound, gm.StatusCode())
	code, _ := apiError(t, gm.Body)
	require.Equal(t, "MANIFEST_NOT_FOUND", code)

	// Enqueue; the same request again is the same receipt; other content is a conflict.
	create := businessapi.SubmissionCreate{SubmissionType: "ALGO", SubmissionId: "s-1", Language: "cpp17",
		Source: "int main(){}", ManifestId: manID}
	en, err := c.EnqueueSubmissionWithResponse(ctx, nil, create)
	require.NoError(t, err)
	conforms(t, en.HTTPResponse, en.Body)
	require.Equal(t, http.StatusAccepted, en.StatusCode(), string(en.Body))
	require.Equal(t, businessapi.SubmissionStatusCodePending, en.JSON202.Status)
	require.Equal(t, int64(1), en.JSON202.Generation)
	jobID := en.JSON202.JobId
	again, err := c.EnqueueSubmissionWithResponse(ctx, nil, create)
	require.NoError(t, err)
	conforms(t, again.HTTPResponse, again.Body)
	require.Equal(t, http.StatusAccepted, again.StatusCode(), string(again.Body))
	require.Equal(t, *en.JSON202, *again.JSON202)
	other := create
	other.Source = "int main(){return 1;}"
	cf, err := c.EnqueueSubmissionWithResponse(ctx, nil, other)
	require.NoError(t, err)
	conforms(t, cf.HTTPResponse, cf.Body)
	require.Equal(t, http.StatusConflict, cf.StatusCode(), string(cf.Body))
	require.Equal(t, businessapi.ErrorCodeSubmissionConflict, cf.JSON409.Code)

	// Refusals that name the rule.
	for _, tc := range []struct {
		name      string
		mut       func(*businessapi.SubmissionCreate)
		code, fld string
	}{
		{"unknown language", func(s *businessapi.SubmissionCreate) { s.Language = "cobol" }, "LANGUAGE_UNSUPPORTED", "language"},
		{"unknown manifest", func(s *businessapi.SubmissionCreate) { s.ManifestId = "999999" }, "MANIFEST_NOT_FOUND", "manifestId"},
		{"sql language on a code manifest", func(s *businessapi.SubmissionCreate) { s.Language = "mysql" }, "MANIFEST_LANGUAGE_MISMATCH", "language"},
		{"reserved submission type", func(s *businessapi.SubmissionCreate) { s.SubmissionType = "KECE_CHECK" }, "REQUEST_INVALID", "submissionType"},
	} {
		req := create
		req.SubmissionId = "refused"
		tc.mut(&req)
		r, err := c.EnqueueSubmissionWithResponse(ctx, nil, req)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnprocessableEntity, r.StatusCode(), tc.name+": "+string(r.Body))
		code, field := apiError(t, r.Body)
		require.Equal(t, tc.code, code, tc.name)
		require.Equal(t, tc.fld, field, tc.name)
	}
	require.Equal(t, 1, b.count(`SELECT COUNT(*) FROM judge_job`), "refused requests write nothing")

	st, err := c.GetSubmissionWithResponse(ctx, "ALGO", "s-1", nil)
	require.NoError(t, err)
	conforms(t, st.HTTPResponse, st.Body)
	require.Equal(t, http.StatusOK, st.StatusCode(), string(st.Body))
	require.Equal(t, businessapi.SubmissionStatusCodePending, st.JSON200.Status)
	require.Equal(t, businessapi.WaitReasonWaitingForWorker, *st.JSON200.WaitReason)
	require.Equal(t, jobID, st.JSON200.JobId)
	for _, typ := range []string{"ALGO", "KECE_CHECK"} {
		nf, err := c.GetSubmissionWithResponse(ctx, typ, "nope", nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusNotFound, nf.StatusCode())
		code, _ := apiError(t, nf.Body)
		require.Equal(t, "SUBMISSION_NOT_FOUND", code)
	}

	// A node judges it: JUDGING, then WA with the verdict.
	n := b.env.NewNode("cpp", 2, 4)
	nc := joinAndOpen(t, b.env, n.JoinCode, "boot-biz-1")
	b.env.ForceEnable(n.ID)
	hb, err := nc.c.SendHeartbeatWithResponse(ctx, machineapi.HeartbeatRequest{RuntimeVersion: "g++ 12", Dependencies: []machineapi.Dependency{}, LocalSlots: 2})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, hb.StatusCode(), string(hb.Body))
	cl, err := nc.c.ClaimJobsWithResponse(ctx, machineapi.ClaimRequest{FreeSlots: 1, WaitMs: 1000})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, cl.StatusCode(), string(cl.Body))
	require.Len(t, cl.JSON200.Jobs, 1)
	job := cl.JSON200.Jobs[0]
	require.Equal(t, jobID, job.JobId)
	rn, err := nc.c.RenewLeasesWithResponse(ctx, machineapi.RenewRequest{Leases: []machineapi.LeaseProgress{
		{JobId: job.JobId, LeaseEpoch: job.LeaseEpoch, ProgressSeq: 1, Phase: machineapi.PhaseJudging, CasesDone: 0, CasesTotal: 1}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, rn.StatusCode(), string(rn.Body))
	st, err = c.GetSubmissionWithResponse(ctx, "ALGO", "s-1", nil)
	require.NoError(t, err)
	conforms(t, st.HTTPResponse, st.Body)
	require.Equal(t, businessapi.SubmissionStatusCodeJudging, st.JSON200.Status)
	require.Nil(t, st.JSON200.WaitReason)
	require.Equal(t, int32(1), st.JSON200.CasesTotal)
	res, err := nc.c.SubmitResultWithResponse(ctx, job.JobId, machineapi.ResultRequest{LeaseEpoch: job.LeaseEpoch,
		Outcome: machineapi.OutcomeVerdict, Verdict: &machineapi.Verdict{Status: machineapi.VerdictStatusWA, Score: 0, MaxScore: 100,
			Cases: []machineapi.CaseResult{{CaseId: "c1", Status: machineapi.VerdictStatusWA, Message: "line 1"}}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode(), string(res.Body))
	st, err = c.GetSubmissionWithResponse(ctx, "ALGO", "s-1", nil)
	require.NoError(t, err)
	conforms(t, st.HTTPResponse, st.Body)
	require.Equal(t, businessapi.SubmissionStatusCodeWA, st.JSON200.Status)
	require.Error(t, contractErr(t, st.HTTPResponse, bytes.Replace(st.Body, []byte(`"casesDone"`), []byte(`"casesDoneX"`), 1)),
		"the contract check can fail")
	require.NotNil(t, st.JSON200.Verdict)
	require.Equal(t, businessapi.VerdictStatusWA, st.JSON200.Verdict.Status)
	require.Equal(t, int64(100), st.JSON200.Verdict.MaxScore)
	require.Len(t, st.JSON200.Verdict.Cases, 1)
	require.Equal(t, "line 1", st.JSON200.Verdict.Cases[0].Message)

	// The settlement event: claimed once, acked, then gone; acking again is idempotent.
	ev, err := c.ClaimSettlementEventsWithResponse(ctx, businessapi.EventClaimRequest{Consumer: "biz-1", Max: 10, LeaseMs: 60000})
	require.NoError(t, err)
	conforms(t, ev.HTTPResponse, ev.Body)
	require.Equal(t, http.StatusOK, ev.StatusCode(), string(ev.Body))
	require.Len(t, ev.JSON200.Events, 1)
	e := ev.JSON200.Events[0]
	require.Equal(t, jobID, e.JobId)
	require.Equal(t, businessapi.SettlementEventTypeSettled, e.EventType)
	require.Equal(t, "s-1", e.SubmissionId)
	require.Equal(t, int32(1), e.DeliveryAttempt)
	require.Equal(t, businessapi.SubmissionStatusCodeWA, e.Payload.Status)
	require.Equal(t, businessapi.VerdictStatusWA, e.Payload.Verdict.Status)
	for i := 0; i < 2; i++ {
		ack, err := c.AckSettlementEventsWithResponse(ctx, businessapi.EventAckRequest{Consumer: "biz-1", EventIds: []string{e.EventId, "999999"}})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, ack.StatusCode(), string(ack.Body))
		require.Equal(t, []string{e.EventId}, ack.JSON200.Acked)
		require.Equal(t, []string{"999999"}, ack.JSON200.NotHeld)
	}
	ev, err = c.ClaimSettlementEventsWithResponse(ctx, businessapi.EventClaimRequest{Consumer: "biz-2", Max: 10, LeaseMs: 60000})
	require.NoError(t, err)
	conforms(t, ev.HTTPResponse, ev.Body)
	require.Empty(t, ev.JSON200.Events)

	// A judged submission cannot be cancelled; a rejudge makes generation 2,
	// which can be cancelled, twice.
	cn, err := c.CancelSubmissionWithResponse(ctx, "ALGO", "s-1", businessapi.ReasonRequest{Reason: "user withdrew"})
	require.NoError(t, err)
	conforms(t, cn.HTTPResponse, cn.Body)
	require.Equal(t, http.StatusConflict, cn.StatusCode(), string(cn.Body))
	require.Equal(t, businessapi.ErrorCodeSubmissionTerminal, cn.JSON409.Code)
	rj, err := c.RejudgeSubmissionWithResponse(ctx, "ALGO", "s-1", businessapi.ReasonRequest{Reason: "tests fixed"})
	require.NoError(t, err)
	conforms(t, rj.HTTPResponse, rj.Body)
	require.Equal(t, http.StatusAccepted, rj.StatusCode(), string(rj.Body))
	require.Equal(t, int64(2), rj.JSON202.Generation)
	require.NotEqual(t, jobID, rj.JSON202.JobId)
	st, err = c.GetSubmissionWithResponse(ctx, "ALGO", "s-1", nil)
	require.NoError(t, err)
	conforms(t, st.HTTPResponse, st.Body)
	require.Equal(t, businessapi.SubmissionStatusCodePending, st.JSON200.Status)
	require.Equal(t, rj.JSON202.JobId, st.JSON200.JobId)
	for i := 0; i < 2; i++ {
		cn, err = c.CancelSubmissionWithResponse(ctx, "ALGO", "s-1", businessapi.ReasonRequest{Reason: "user withdrew"})
		require.NoError(t, err)
		conforms(t, cn.HTTPResponse, cn.Body)
		require.Equal(t, http.StatusOK, cn.StatusCode(), string(cn.Body))
		require.Equal(t, businessapi.SubmissionStatusCodeCancelled, cn.JSON200.Status)
		require.Equal(t, int64(2), cn.JSON200.Generation)
	}
	require.Equal(t, 1, b.count(`SELECT COUNT(*) FROM judge_audit WHERE action = 'job.rejudge' AND actor LIKE 'BUSINESS:%' AND reason = 'tests fixed'`))
	for _, op := range []string{"rejudge", "cancel"} {
		var r interface{ StatusCode() int }
		var body []byte
		if op == "rejudge" {
			x, err := c.RejudgeSubmissionWithResponse(ctx, "ALGO", "missing", businessapi.ReasonRequest{Reason: "x"})
			require.NoError(t, err)
			r, body = x, x.Body
		} else {
			x, err := c.CancelSubmissionWithResponse(ctx, "ALGO", "missing", businessapi.ReasonRequest{Reason: "x"})
			require.NoError(t, err)
			r, body = x, x.Body
		}
		require.Equal(t, http.StatusNotFound, r.StatusCode(), op)
		code, _ := apiError(t, body)
		require.Equal(t, "SUBMISSION_NOT_FOUND", code, op)
	}

	// The public summary: no token needed; the node is ready in cpp.
	anon, err := businessapi.NewClientWithResponses(b.env.URL)
	require.NoError(t, err)
	sum, err := anon.GetJudgersSummaryWithResponse(ctx)
	require.NoError(t, err)
	conforms(t, sum.HTTPResponse, sum.Body)
	require.Equal(t, http.StatusOK, sum.StatusCode(), string(sum.Body))
	require.Equal(t, int32(5), sum.JSON200.TotalPools)
	require.Equal(t, int32(1), sum.JSON200.ReadyPools)
	require.Equal(t, businessapi.FreshnessStateLive, sum.JSON200.Freshness.State)
	require.WithinDuration(t, time.Now(), sum.JSON200.AsOf, time.Minute)
	for _, p := range sum.JSON200.Pools {
		if p.Pool == businessapi.PoolCpp {
			require.Equal(t, int32(1), p.ReadyNodes)
		} else {
			require.Zero(t, p.ReadyNodes)
		}
	}
	require.NotContains(t, string(sum.Body), "node-")
	require.NotContains(t, string(sum.Body), "127.0.0.1")
}

func TestSummaryFreshnessAndQueue(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	anon, err := businessapi.NewClientWithResponses(b.env.URL)
	require.NoError(t, err)
	sum, err := anon.GetJudgersSummaryWithResponse(b.env.Ctx)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, sum.StatusCode(), string(sum.Body))
	require.Equal(t, businessapi.FreshnessStateNoHeartbeats, sum.JSON200.Freshness.State)
	require.Nil(t, sum.JSON200.Freshness.NewestHeartbeatAgeMs)
	require.Zero(t, sum.JSON200.ReadyPools)

	manID := publish(t, b.c, codeManifest(t, b.c, "in", "out"))
	for i := 0; i < 3; i++ {
		r, err := b.c.EnqueueSubmissionWithResponse(b.env.Ctx, nil, businessapi.SubmissionCreate{SubmissionType: "ALGO",
			SubmissionId: fmt.Sprintf("q-%d", i), Language: "python3", Source: "print(1)", ManifestId: manID})
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, r.StatusCode(), string(r.Body))
		require.NotEmpty(t, r.JSON202.JobId)
	}
	// A node whose newest heartbeat is older than the offline threshold.
	n := b.env.NewNode("python", 1, 1)
	nc := joinAndOpen(t, b.env, n.JoinCode, "boot-stale")
	b.env.ForceEnable(n.ID)
	_, err = nc.c.SendHeartbeatWithResponse(b.env.Ctx, machineapi.HeartbeatRequest{RuntimeVersion: "py 3.11", Dependencies: []machineapi.Dependency{}, LocalSlots: 1})
	require.NoError(t, err)
	_, err = b.env.DB.ExecContext(b.env.Ctx, `UPDATE judge_node SET last_heartbeat_at = NOW(6) - INTERVAL 1 HOUR WHERE id = ?`, n.ID)
	require.NoError(t, err)
	sum, err = anon.GetJudgersSummaryWithResponse(b.env.Ctx)
	require.NoError(t, err)
	require.Equal(t, businessapi.FreshnessStateStale, sum.JSON200.Freshness.State)
	require.GreaterOrEqual(t, *sum.JSON200.Freshness.NewestHeartbeatAgeMs, int64(3600_000-1000))
	require.Zero(t, sum.JSON200.ReadyPools, "an offline node does not make its pool ready")
	for _, p := range sum.JSON200.Pools {
		if p.Pool == businessapi.PoolPython {
			require.Equal(t, int64(3), p.QueuedSubmissions)
			require.GreaterOrEqual(t, p.OldestWaitMs, int64(0))
			require.NotNil(t, p.WaitReason)
			require.Equal(t, businessapi.PoolWaitReasonNoReadyNode, *p.WaitReason)
		} else {
			require.Zero(t, p.QueuedSubmissions)
			require.Nil(t, p.WaitReason)
		}
		require.NotNil(t, p.MissingCapabilities, "an empty list, never null")
	}
}

// A file I/O submission waits while the pool's only ready node reports no
// problem types (an older node), and the summary says why; once the node's
// heartbeat reports file_io, nothing waits for a capable node.
func TestSummarySaysNoCapableNodeOverHTTP(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	anon, err := businessapi.NewClientWithResponses(b.env.URL)
	require.NoError(t, err)
	m := codeManifest(t, b.c, "in", "out")
	in, out := "sum.in", "sum.out"
	m.Io = &businessapi.FileIO{InputFile: &in, OutputFile: &out}
	manID := publish(t, b.c, m)
	r, err := b.c.EnqueueSubmissionWithResponse(b.env.Ctx, nil, businessapi.SubmissionCreate{SubmissionType: "ALGO",
		SubmissionId: "fio", Language: "python3", Source: "print(1)", ManifestId: manID})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, r.StatusCode(), string(r.Body))
	n := b.env.NewNode("python", 1, 1)
	nc := joinAndOpen(t, b.env, n.JoinCode, "boot-old")
	b.env.ForceEnable(n.ID)
	beat := func(features *[]machineapi.Feature) {
		t.Helper()
		hb, err := nc.c.SendHeartbeatWithResponse(b.env.Ctx, machineapi.HeartbeatRequest{RuntimeVersion: "py 3.11",
			Dependencies: []machineapi.Dependency{}, LocalSlots: 1, Features: features})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, hb.StatusCode(), string(hb.Body))
	}
	python := func() businessapi.PoolSummary {
		t.Helper()
		sum, err := anon.GetJudgersSummaryWithResponse(b.env.Ctx)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, sum.StatusCode(), string(sum.Body))
		for _, p := range sum.JSON200.Pools {
			if p.Pool == businessapi.PoolPython {
				return p
			}
		}
		t.Fatal("no python pool")
		return businessapi.PoolSummary{}
	}
	beat(nil)
	p := python()
	require.NotNil(t, p.WaitReason)
	require.Equal(t, businessapi.PoolWaitReasonNoCapableNode, *p.WaitReason)
	require.Equal(t, int64(1), p.UnrunnableSubmissions)
	require.Equal(t, []string{"file_io"}, p.MissingCapabilities)

	beat(&[]machineapi.Feature{machineapi.FeatureBatch, machineapi.FeatureFileIO})
	p = python()
	require.Nil(t, p.WaitReason)
	require.Zero(t, p.UnrunnableSubmissions)
	require.Empty(t, p.MissingCapabilities)

	bad, err := nc.c.SendHeartbeatWithResponse(b.env.Ctx, machineapi.HeartbeatRequest{RuntimeVersion: "py 3.11",
		Dependencies: []machineapi.Dependency{}, LocalSlots: 1, Features: &[]machineapi.Feature{"telepathy"}})
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, bad.StatusCode(), string(bad.Body))
	require.Contains(t, string(bad.Body), "REQUEST_INVALID")
	require.Contains(t, string(bad.Body), "/features/0")
}

// TestBusinessAuthMatrix (T17): only business tokens reach business routes;
// the summary is public; a business token is refused elsewhere.
func TestBusinessAuthMatrix(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	ctx := b.env.Ctx
	n := b.env.NewNode("cpp", 1, 1)
	anon := client(t, b.env.URL, "")
	j, err := anon.JoinNodeWithResponse(ctx, machineapi.JoinRequest{JoinCode: n.JoinCode})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, j.StatusCode(), string(j.Body))
	nc := openSession(t, b.env.URL, j.JSON201.Credential, "boot-auth")
	manID := publish(t, b.c, codeManifest(t, b.c, "a", "b"))
	d := digestOf([]byte("x"))

	routes := []struct{ method, path, body string }{
		{"PUT", "/api/v1/artifacts/" + d, "x"},
		{"POST", "/api/v1/manifests", `{"kind":"CODE","limits":{"timeMs":1,"memoryMb":1,"outputKb":1},"checker":{"type":"exact"},"cases":[]}`},
		{"GET", "/api/v1/manifests/" + manID, ""},
		{"POST", "/api/v1/submissions", `{"submissionType":"ALGO","submissionId":"auth-1","language":"cpp17","source":"x","manifestId":"` + manID + `"}`},
		{"GET", "/api/v1/submissions/ALGO/auth-1", ""},
		{"POST", "/api/v1/submissions/ALGO/auth-1/rejudge", `{"reason":"r"}`},
		{"POST", "/api/v1/submissions/ALGO/auth-1/cancel", `{"reason":"r"}`},
		{"POST", "/api/v1/settlement-events/claim", `{"consumer":"c","max":1,"leaseMs":1000}`},
		{"POST", "/api/v1/settlement-events/ack", `{"consumer":"c","eventIds":["1"]}`},
	}
	creds := map[string]string{
		"no token":        "",
		"admin token":     b.env.Admin,
		"node credential": j.JSON201.Credential,
		"node session":    nc.session.SessionToken,
		"garbage":         "kbt_not-a-real-token-at-all",
	}
	for name, tok := range creds {
		for _, r := range routes {
			resp := do(t, r.method, b.env.URL+r.path, tok, r.body)
			require.Equal(t, http.StatusUnauthorized, resp.status, "%s on %s %s: %s", name, r.method, r.path, resp.body)
			code, _ := apiError(t, resp.body)
			require.Equal(t, "UNAUTHENTICATED", code)
		}
	}
	require.Zero(t, b.count(`SELECT COUNT(*) FROM judge_job`), "refused requests write nothing")
	require.Zero(t, b.count(`SELECT COUNT(*) FROM judge_artifact WHERE sha256 = ?`, d))

	// The summary is public, with or without any token.
	for name, tok := range creds {
		resp := do(t, "GET", b.env.URL+"/api/v1/system/judgers/summary", tok, "")
		require.Equal(t, http.StatusOK, resp.status, name)
		require.NotContains(t, string(resp.body), "kat_")
		require.NotContains(t, string(resp.body), "kbt_")
	}
	// ... but only for reading.
	resp := do(t, "POST", b.env.URL+"/api/v1/system/judgers/summary", "", "{}")
	require.Equal(t, http.StatusUnauthorized, resp.status)

	// A business token is refused on admin and machine routes.
	resp = do(t, "GET", b.env.URL+"/api/v1/admin/judgers", b.env.Business, "")
	require.Equal(t, http.StatusUnauthorized, resp.status, string(resp.body))
	resp = do(t, "POST", b.env.URL+"/api/v1/internal/judgers/heartbeat", b.env.Business, `{"runtimeVersion":"x","dependencies":[],"localSlots":1}`)
	require.Equal(t, http.StatusUnauthorized, resp.status, string(resp.body))

	// And the business token does work on every route above.
	for _, r := range routes {
		resp := do(t, r.method, b.env.URL+r.path, b.env.Business, r.body)
		require.NotEqual(t, http.StatusUnauthorized, resp.status, "%s %s: %s", r.method, r.path, resp.body)
	}
}

type rawResp struct {
	status int
	body   []byte
}

func do(t *testing.T, method, url, token, body string) rawResp {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if method == "PUT" {
		req.Header.Set("Content-Type", "application/octet-stream")
	} else if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return rawResp{resp.StatusCode, b}
}
