package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/store"
)

func callWith(t *testing.T, method, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct{ Code string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Code
}

// An expired token, and a rotated-out secret after its overlap, get 401
// TOKEN_EXPIRED on both token surfaces; during the overlap both secrets work.
func TestExpiredAndRotatedTokensOverHTTP(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	bizURL := env.URL + "/api/v1/submissions/ALGO/none"
	admURL := env.URL + "/api/v1/admin/judge-host-groups"

	biz, err := env.Store.Tokens().IssueToken(env.Ctx, store.TokenSpec{Kind: store.TokenBusiness, Name: "expiring", ExpiresIn: time.Hour})
	require.NoError(t, err)
	adm, err := env.Store.Tokens().IssueToken(env.Ctx, store.TokenSpec{Kind: store.TokenAdmin, Name: "expiring-admin", ExpiresIn: time.Hour})
	require.NoError(t, err)
	status, code := callWith(t, http.MethodGet, bizURL, biz)
	require.Equal(t, http.StatusNotFound, status, "authenticated: the submission simply does not exist")
	require.Equal(t, "SUBMISSION_NOT_FOUND", code)
	status, _ = callWith(t, http.MethodGet, admURL, adm)
	require.Equal(t, http.StatusOK, status)

	_, err = env.DB.Exec(`UPDATE judge_api_token SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE name IN ('expiring', 'expiring-admin')`)
	require.NoError(t, err)
	status, code = callWith(t, http.MethodGet, bizURL, biz)
	require.Equal(t, http.StatusUnauthorized, status)
	require.Equal(t, "TOKEN_EXPIRED", code)
	status, code = callWith(t, http.MethodGet, admURL, adm)
	require.Equal(t, http.StatusUnauthorized, status)
	require.Equal(t, "TOKEN_EXPIRED", code)
	status, code = callWith(t, http.MethodGet, bizURL, "kbt_unknown-token-of-enough-length")
	require.Equal(t, http.StatusUnauthorized, status)
	require.Equal(t, "UNAUTHENTICATED", code, "an unknown token is not called expired")

	// Rotation: the old and the new secret both work during the overlap.
	old := env.Business
	fresh, err := env.Store.Tokens().RotateToken(env.Ctx, store.RotateSpec{Kind: store.TokenBusiness, Name: tokenName(t, env, old), Overlap: time.Hour})
	require.NoError(t, err)
	for _, tok := range []string{old, fresh} {
		status, _ = callWith(t, http.MethodGet, bizURL, tok)
		require.Equal(t, http.StatusNotFound, status)
	}
	_, err = env.DB.Exec(`UPDATE judge_api_token SET prev_valid_until = NOW(6) - INTERVAL 1 SECOND WHERE prev_valid_until IS NOT NULL`)
	require.NoError(t, err)
	status, code = callWith(t, http.MethodGet, bizURL, old)
	require.Equal(t, http.StatusUnauthorized, status)
	require.Equal(t, "TOKEN_EXPIRED", code)
	status, _ = callWith(t, http.MethodGet, bizURL, fresh)
	require.Equal(t, http.StatusNotFound, status)

	// A second rotation during the first one's overlap retires the secret
	// in the middle at once: it is expired (it was UNAUTHENTICATED, as if
	// never issued), on the business and the admin surface alike.
	for _, k := range []struct {
		kind   store.TokenKind
		name   string
		secret string
		url    string
	}{{store.TokenBusiness, tokenName(t, env, fresh), fresh, bizURL}, {store.TokenAdmin, "", env.Admin, admURL}} {
		name := k.name
		if name == "" {
			id, err := env.Store.Tokens().AuthenticateToken(env.Ctx, store.TokenAdmin, k.secret)
			require.NoError(t, err)
			name = id.Name
		}
		second, err := env.Store.Tokens().RotateToken(env.Ctx, store.RotateSpec{Kind: k.kind, Name: name, Overlap: time.Hour})
		require.NoError(t, err)
		third, err := env.Store.Tokens().RotateToken(env.Ctx, store.RotateSpec{Kind: k.kind, Name: name, Overlap: time.Hour})
		require.NoError(t, err)
		status, code = callWith(t, http.MethodGet, k.url, k.secret)
		require.Equal(t, http.StatusUnauthorized, status, k.kind)
		require.Equal(t, "TOKEN_EXPIRED", code, k.kind)
		for _, tok := range []string{second, third} {
			status, _ = callWith(t, http.MethodGet, k.url, tok)
			require.NotEqual(t, http.StatusUnauthorized, status, "both secrets of the running overlap work")
		}
	}
}

func tokenName(t *testing.T, env *controltest.Env, tok string) string {
	t.Helper()
	id, err := env.Store.Tokens().AuthenticateToken(env.Ctx, store.TokenBusiness, tok)
	require.NoError(t, err)
	return id.Name
}
