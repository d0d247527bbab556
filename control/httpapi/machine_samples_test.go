package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/manifest"
)

// rawCall sends body to path and checks the server's answer against the
// machine spec's response schema for its status.
type rawCaller struct {
	t      *testing.T
	url    string
	router routers.Router
}

func newRawCaller(t *testing.T, url string) *rawCaller {
	sw, err := machineapi.GetSpec()
	require.NoError(t, err)
	sw.Servers = nil
	r, err := gorillamux.NewRouter(sw)
	require.NoError(t, err)
	return &rawCaller{t: t, url: url, router: r}
}

func (c *rawCaller) do(method, path, token string, body []byte) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url+path, bytes.NewReader(body))
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	// The answer must match the spec (status documented, body schema).
	vreq, _ := http.NewRequest(method, "http://x"+path, bytes.NewReader(body))
	vreq.Header = req.Header.Clone()
	route, params, err := c.router.FindRoute(vreq)
	require.NoError(c.t, err, path)
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(out)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	})
	require.NoError(c.t, err, "%s %s → %d %s", method, path, resp.StatusCode, out)
	return resp.StatusCode, out
}

func sample(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := contracts.Samples.ReadFile("samples/machine/" + name)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

func encode(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// The fixed samples of contracts/samples are what the real server accepts,
// and what it answers validates against the spec and decodes with the
// generated types.
func TestServerAcceptsAndProducesTheContractSamples(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	raw := newRawCaller(t, env.URL)
	manID := env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 40}, controltest.Case{In: "10 20\n", Out: "30\n", Weight: 60})
	// The samples name cases "1" and "2"; rename ours to match.
	_, err := env.DB.ExecContext(env.Ctx, `UPDATE judge_manifest SET body = REPLACE(REPLACE(body, '"caseId":"c1"', '"caseId":"1"'), '"caseId":"c2"', '"caseId":"2"') WHERE id = ?`, manID)
	require.NoError(t, err)
	n := env.NewNode("cpp", 16, 16)

	join := sample(t, "join-request.json")
	join["joinCode"] = n.JoinCode
	status, body := raw.do("POST", "/api/v1/internal/judgers/join", "", encode(t, join))
	require.Equal(t, http.StatusCreated, status, string(body))
	var jr machineapi.JoinResponse
	require.NoError(t, json.Unmarshal(body, &jr))
	status, body = raw.do("POST", "/api/v1/internal/judgers/join", "", encode(t, join))
	require.Equal(t, http.StatusGone, status, "a used code: %s", body)

	status, body = raw.do("POST", "/api/v1/internal/judgers/session", jr.Credential, encode(t, sample(t, "session-request.json")))
	require.Equal(t, http.StatusOK, status, string(body))
	var sr machineapi.SessionResponse
	require.NoError(t, json.Unmarshal(body, &sr))
	tok := sr.SessionToken
	env.ForceEnable(n.ID)

	status, body = raw.do("POST", "/api/v1/internal/judgers/heartbeat", tok, encode(t, sample(t, "heartbeat-request.json")))
	require.Equal(t, http.StatusOK, status, string(body))

	claimReq := sample(t, "claim-request.json")
	claimReq["waitMs"] = 0
	status, body = raw.do("POST", "/api/v1/internal/judgers/jobs/claim", tok, encode(t, claimReq))
	require.Equal(t, http.StatusOK, status, string(body))
	require.JSONEq(t, `{"jobs": []}`, string(body), "an empty claim looks like claim-response-empty.json")

	results := []string{"ac", "partial", "wa", "tle", "mle", "ole", "re", "ce", "error"}
	for i, r := range results {
		env.Enqueue("ALGO", "sample-"+r, "cpp17", "int main(){}", manID)
		claimReq["freeSlots"] = 1
		// A new claim, a new request id: the sample's id, once granted a
		// lease, answers only that lease (or nothing once it ended).
		claimReq["requestId"] = "claim-sample-" + r + "-0001"
		status, body = raw.do("POST", "/api/v1/internal/judgers/jobs/claim", tok, encode(t, claimReq))
		require.Equal(t, http.StatusOK, status, string(body))
		var cr machineapi.ClaimResponse
		require.NoError(t, json.Unmarshal(body, &cr))
		require.Len(t, cr.Jobs, 1, "job %d", i)
		job := cr.Jobs[0]

		renew := sample(t, "renew-request.json")
		leases := renew["leases"].([]any)[:1]
		leases[0].(map[string]any)["jobId"], leases[0].(map[string]any)["leaseEpoch"] = job.JobId, job.LeaseEpoch
		renew["leases"] = leases
		status, body = raw.do("POST", "/api/v1/internal/judgers/jobs/renew", tok, encode(t, renew))
		require.Equal(t, http.StatusOK, status, string(body))

		res := sample(t, "result-request-"+r+".json")
		res["leaseEpoch"] = job.LeaseEpoch
		status, body = raw.do("POST", "/api/v1/internal/judgers/jobs/"+job.JobId+"/result", tok, encode(t, res))
		require.Equal(t, http.StatusOK, status, "%s: %s", r, body)
		var rr machineapi.ResultResponse
		require.NoError(t, json.Unmarshal(body, &rr))
		require.Equal(t, machineapi.DispositionAccepted, rr.Disposition)
		status, body = raw.do("POST", "/api/v1/internal/judgers/jobs/"+job.JobId+"/result", tok, encode(t, res))
		require.Equal(t, http.StatusOK, status, string(body))
		require.Contains(t, string(body), `"ALREADY_COMMITTED"`)
		require.NotNil(t, job.QueuedMs, "a claim answer tells the queue wait")
		if ph, ok := res["phases"].(map[string]any); ok {
			// Other timings, the same result; the first post's are kept.
			ph["runMs"] = 99999
			status, body = raw.do("POST", "/api/v1/internal/judgers/jobs/"+job.JobId+"/result", tok, encode(t, res))
			require.Equal(t, http.StatusOK, status, string(body))
			require.Contains(t, string(body), `"ALREADY_COMMITTED"`)
			id, err := strconv.ParseInt(job.JobId, 10, 64)
			require.NoError(t, err)
			atts, err := env.Store.Jobs().Attempts(env.Ctx, id)
			require.NoError(t, err)
			require.NotNil(t, atts[0].Phases(), r)
			require.EqualValues(t, 9, atts[0].Phases().RunMs)
		}
	}

	// Error bodies: every error the server wrote above and below validates
	// against the spec (checked in do); a few explicit ones:
	status, _ = raw.do("POST", "/api/v1/internal/judgers/heartbeat", "", encode(t, sample(t, "heartbeat-request.json")))
	require.Equal(t, http.StatusUnauthorized, status)
	bad := sample(t, "claim-request.json")
	bad["freeSlots"] = 0
	status, body = raw.do("POST", "/api/v1/internal/judgers/jobs/claim", tok, encode(t, bad))
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, string(body), "REQUEST_INVALID")
	status, body = raw.do("POST", "/api/v1/internal/judgers/jobs/claim", tok, []byte(`{"freeSlots": 1, "waitMs": 0, "pool": "java"}`))
	require.Equal(t, http.StatusBadRequest, status, "a body naming a pool is refused, never obeyed: %s", body)
	huge := strings.Repeat("x", 9<<20)
	status, body = raw.do("POST", "/api/v1/internal/judgers/heartbeat", tok, []byte(`{"runtimeVersion":"`+huge+`"}`))
	require.Equal(t, http.StatusRequestEntityTooLarge, status, string(body[:min(len(body), 200)]))
}

// The default-deny middleware covers the whole internal prefix: a route added
// later without any auth of its own is still refused without a session.
func TestInternalPrefixIsDenyByDefault(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	reached := false
	env.Server.InternalMuxForTest().HandleFunc("GET /api/v1/internal/judgers/debug/added-later", func(w http.ResponseWriter, r *http.Request) {
		reached = true
	})
	for _, tok := range []string{"", "kns_1_1_forged", env.Admin, env.Business} {
		req, _ := http.NewRequest(http.MethodGet, env.URL+"/api/v1/internal/judgers/debug/added-later", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "token %q", tok)
	}
	require.False(t, reached)
}

// A new boot supersedes the old session: the old process is refused with
// SESSION_SUPERSEDED (it must stop, not log in again and fight).
func TestNewBootSupersedesOldSessionOverHTTP(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	n := env.NewNode("python", 1, 2)
	old := joinAndOpen(t, env, n.JoinCode, "boot-aaaaaaaa")
	same := openSession(t, env.URL, old.cred, "boot-aaaaaaaa")
	require.Equal(t, old.session.SessionEpoch, same.session.SessionEpoch)
	fresh := openSession(t, env.URL, old.cred, "boot-bbbbbbbb")
	require.Equal(t, old.session.SessionEpoch+1, fresh.session.SessionEpoch)
	hb, err := same.c.SendHeartbeatWithResponse(env.Ctx, machineapi.HeartbeatRequest{RuntimeVersion: "x", Dependencies: []machineapi.Dependency{}, LocalSlots: 1})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, hb.StatusCode())
	require.Equal(t, machineapi.ErrorCodeSessionSuperseded, hb.JSON401.Code)
	hb, err = fresh.c.SendHeartbeatWithResponse(env.Ctx, machineapi.HeartbeatRequest{RuntimeVersion: "x", Dependencies: []machineapi.Dependency{}, LocalSlots: 1})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, hb.StatusCode())
}

// A claim waiting on one replica is woken by an enqueue committed through
// another replica within a poll interval or so.
func TestCrossReplicaWakeUp(t *testing.T) {
	t.Parallel()
	a := controltest.Start(t, controltest.Options{})
	b := a.SecondReplica()
	manID := a.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "exact"},
		controltest.Case{In: "", Out: "", Weight: 1})
	n := a.NewNode("java", 1, 1)
	nc := joinAndOpen(t, a, n.JoinCode, "boot-cccccccc")
	a.ForceEnable(n.ID)
	done := make(chan time.Time, 1)
	go func() {
		r, err := nc.c.ClaimJobsWithResponse(a.Ctx, machineapi.ClaimRequest{FreeSlots: 1, WaitMs: 10000})
		if err == nil && r.JSON200 != nil && len(r.JSON200.Jobs) == 1 {
			done <- time.Now()
		}
		close(done)
	}()
	require.Eventually(t, func() bool { return a.Server.ParkedClaimsForTest() == 1 }, 5*time.Second, time.Millisecond, "the poll parks")
	at := time.Now()
	b.Enqueue("ALGO", "x1", "java17", "class Main{}", manID)
	got, ok := <-done
	require.True(t, ok, "the waiter got the job")
	require.Less(t, got.Sub(at), 1500*time.Millisecond)
}
