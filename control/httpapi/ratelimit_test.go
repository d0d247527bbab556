package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/ratelimit"
	"github.com/kece-oj/kece/control/replica"
	"github.com/kece-oj/kece/control/store"
)

// rateEnv is a control plane whose business tokens get burst 5 at 1/s.
func rateEnv(t *testing.T) *controltest.Env {
	t.Helper()
	return controltest.Start(t, controltest.Options{Replica: replica.Config{RateLimit: &ratelimit.Config{Default: ratelimit.Limit{Rate: 1, Burst: 5}}}})
}

// limitedGet is one business request and what a client of the contract
// sees of it.
type limitedGet struct {
	status     int
	code       string
	retryAfter string
}

func bizGet(t *testing.T, env *controltest.Env, token string) limitedGet {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, env.URL+"/api/v1/submissions/ALGO/none", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := limitedGet{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	out.code, _ = apiError(t, body)
	if resp.StatusCode == http.StatusTooManyRequests {
		resp.Body = io.NopCloser(bytes.NewReader(body))
		conforms(t, resp, body)
	}
	return out
}

// A burst from one business token gets its burst through and 429
// RATE_LIMITED with Retry-After for the rest, never a 5xx; a second token
// and a judge node going at the same time are not limited.
func TestBurstFromOneTokenIsLimitedAndNothingElseIs(t *testing.T) {
	t.Parallel()
	env := rateEnv(t)
	other, err := env.Store.Tokens().CreateToken(env.Ctx, store.TokenBusiness, "other-backend")
	require.NoError(t, err)
	n := env.NewNode("cpp", 2, 2)
	nc := joinAndOpen(t, env, n.JoinCode, "boot-rate")
	env.ForceEnable(n.ID)

	const burst = 40
	start := time.Now()
	results := make([]limitedGet, burst)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i] = bizGet(t, env, env.Business) })
	}
	// The node heartbeats and claims as fast as it can meanwhile.
	nodeStatuses := make([]int, 0, 20)
	for range 10 {
		hb, err := nc.c.SendHeartbeatWithResponse(env.Ctx, machineapi.HeartbeatRequest{RuntimeVersion: "g++ 12",
			Dependencies: []machineapi.Dependency{{Name: "docker", Healthy: true}}, LocalSlots: 2})
		require.NoError(t, err)
		cl, err := nc.c.ClaimJobsWithResponse(env.Ctx, machineapi.ClaimRequest{FreeSlots: 2, WaitMs: 0})
		require.NoError(t, err)
		nodeStatuses = append(nodeStatuses, hb.StatusCode(), cl.StatusCode())
	}
	wg.Wait()
	elapsed := time.Since(start)

	admitted, limited := 0, 0
	for _, r := range results {
		require.Less(t, r.status, 500, "no 5xx in a burst: %+v", r)
		switch r.status {
		case http.StatusNotFound:
			admitted++
			require.Equal(t, "SUBMISSION_NOT_FOUND", r.code)
		case http.StatusTooManyRequests:
			limited++
			require.Equal(t, "RATE_LIMITED", r.code)
			secs, err := strconv.Atoi(r.retryAfter)
			require.NoError(t, err, "Retry-After is whole seconds: %q", r.retryAfter)
			require.Equal(t, 1, secs, "at 1/s the next request is at most a second away, rounded up")
		default:
			t.Fatalf("unexpected answer %+v", r)
		}
	}
	// The burst, plus what the rate refilled while the requests ran.
	require.GreaterOrEqual(t, admitted, 5)
	require.LessOrEqual(t, admitted, 5+int(elapsed/time.Second)+1)
	require.Equal(t, burst, admitted+limited)
	require.Positive(t, limited)
	t.Logf("burst=%d admitted=%d limited=%d elapsed=%s", burst, admitted, limited, elapsed)

	for _, s := range nodeStatuses {
		require.Equal(t, http.StatusOK, s, "a node's heartbeats and claims are never limited")
	}
	for range 5 {
		r := bizGet(t, env, other)
		require.Equal(t, http.StatusNotFound, r.status, "another token has its own bucket: %+v", r)
	}
	for range 20 {
		status, _ := callWith(t, http.MethodGet, env.URL+"/api/v1/admin/judge-host-groups", env.Admin)
		require.Equal(t, http.StatusOK, status, "the admin API is not limited")
	}
	for range 20 {
		status, _ := callWith(t, http.MethodGet, env.URL+"/api/v1/system/judgers/summary", "")
		require.Equal(t, http.StatusOK, status, "the public summary has no token to charge")
	}
}

// A token's own limit wins over the default, read from its row at every
// request: a tighter one, an unlimited one, and back to the default.
func TestTokenOwnRateLimitIsHonoured(t *testing.T) {
	t.Parallel()
	env := rateEnv(t)
	tight, err := env.Store.Tokens().IssueToken(env.Ctx, store.TokenSpec{Kind: store.TokenBusiness, Name: "tight",
		RateLimit: &ratelimit.Limit{Rate: 0.01, Burst: 2}})
	require.NoError(t, err)
	free, err := env.Store.Tokens().IssueToken(env.Ctx, store.TokenSpec{Kind: store.TokenBusiness, Name: "free",
		RateLimit: &ratelimit.Limit{}})
	require.NoError(t, err)

	for i := range 3 {
		r := bizGet(t, env, tight)
		if i < 2 {
			require.Equal(t, http.StatusNotFound, r.status)
			continue
		}
		require.Equal(t, http.StatusTooManyRequests, r.status)
		require.Equal(t, "100", r.retryAfter, "at 0.01/s the next request is 100 s away")
	}
	for range 30 {
		require.Equal(t, http.StatusNotFound, bizGet(t, env, free).status, "rate 0: unlimited, above the default burst of 5")
	}
	// Back to the default (burst 5): the next request sees it.
	require.NoError(t, env.Store.Tokens().SetTokenRateLimit(env.Ctx, "free", nil, ""))
	admitted := 0
	for range 10 {
		if bizGet(t, env, free).status == http.StatusNotFound {
			admitted++
		}
	}
	require.GreaterOrEqual(t, admitted, 5)
	require.Less(t, admitted, 10)
}

// The admin API sets a token's budget at creation and later, returns it to
// the default, lists it, and refuses a nonsensical one with 400
// REQUEST_INVALID naming the field.
func TestAdminAPISetsTokenRateLimits(t *testing.T) {
	t.Parallel()
	env := rateEnv(t)
	adm := adminClient(t, env)

	cr, err := adm.CreateBusinessTokenWithResponse(env.Ctx, adminapi.BusinessTokenCreate{Name: "slow",
		RateLimit: &adminapi.RateLimit{Rate: 0.01, Burst: 1}})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, cr.StatusCode(), string(cr.Body))
	require.Equal(t, &adminapi.RateLimit{Rate: 0.01, Burst: 1}, cr.JSON201.BusinessToken.RateLimit)
	slow := cr.JSON201.Token
	require.Equal(t, http.StatusNotFound, bizGet(t, env, slow).status)
	require.Equal(t, http.StatusTooManyRequests, bizGet(t, env, slow).status)

	// Raised through the API: the next request sees it.
	sr, err := adm.SetBusinessTokenRateLimitWithResponse(env.Ctx, "slow", adminapi.RateLimitUpdate{RateLimit: &adminapi.RateLimit{Rate: 1000, Burst: 50}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, sr.StatusCode(), string(sr.Body))
	require.Equal(t, &adminapi.RateLimit{Rate: 1000, Burst: 50}, sr.JSON200.RateLimit)
	require.Equal(t, http.StatusNotFound, bizGet(t, env, slow).status)

	// Back to the default: no rateLimit of its own in the list.
	sr, err = adm.SetBusinessTokenRateLimitWithResponse(env.Ctx, "slow", adminapi.RateLimitUpdate{})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, sr.StatusCode(), string(sr.Body))
	require.Nil(t, sr.JSON200.RateLimit)
	lr, err := adm.ListBusinessTokensWithResponse(env.Ctx)
	require.NoError(t, err)
	for _, tok := range lr.JSON200.Tokens {
		require.Nil(t, tok.RateLimit, "%s has the default", tok.Name)
	}

	for _, tc := range []struct {
		body  string
		field string
	}{
		{`{"rateLimit":{"rate":5,"burst":0}}`, "rateLimit.burst"},
		{`{"rateLimit":{"rate":0,"burst":5}}`, "rateLimit.burst"},
		{`{"rateLimit":{"rate":-1,"burst":5}}`, ""},
		{`{"rateLimit":{"rate":5}}`, ""},
	} {
		r := do(t, http.MethodPost, env.URL+"/api/v1/admin/business-tokens/slow/rate-limit", env.Admin, tc.body)
		require.Equal(t, http.StatusBadRequest, r.status, tc.body)
		code, field := apiError(t, r.body)
		require.Equal(t, "REQUEST_INVALID", code, tc.body)
		require.Equal(t, tc.field, field, tc.body)
		r = do(t, http.MethodPost, env.URL+"/api/v1/admin/business-tokens", env.Admin, `{"name":"bad",`+tc.body[1:])
		require.Equal(t, http.StatusBadRequest, r.status, "create refuses it too: %s", tc.body)
	}
	r := do(t, http.MethodPost, env.URL+"/api/v1/admin/business-tokens/nobody/rate-limit", env.Admin, `{}`)
	require.Equal(t, http.StatusNotFound, r.status)
	code, _ := apiError(t, r.body)
	require.Equal(t, "TOKEN_NOT_FOUND", code)
}
