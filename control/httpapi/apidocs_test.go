package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/httpapi"
)

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// The specs are served as written, without a token, and a docs page per
// spec lists every operation and schema with nothing loaded from elsewhere.
func TestAPIDocsServed(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	for _, name := range contracts.SpecNames() {
		want, err := contracts.Specs.ReadFile(name)
		require.NoError(t, err)
		resp, body := get(t, env.URL+"/openapi/"+name)
		require.Equal(t, http.StatusOK, resp.StatusCode, name)
		require.Equal(t, "application/yaml; charset=utf-8", resp.Header.Get("Content-Type"))
		require.Equal(t, string(want), body, "%s is served byte for byte", name)
	}

	resp, index := get(t, env.URL+"/docs/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, s := range []string{"admin", "business", "machine"} {
		require.Contains(t, index, `href="/docs/`+s+`"`)
		require.Contains(t, index, `href="/openapi/`+s+`.yaml"`)
	}

	resp, page := get(t, env.URL+"/docs/business")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
	for _, want := range []string{
		"KECE business API",
		`id="op-EnqueueSubmission"`, "/api/v1/submissions", "Idempotency-Key",
		`id="op-GetJudgersSummary"`, "none (public)",
		`id="schema-SettlementEvent"`, `<a href="#schema-Verdict">Verdict</a>`,
		"TOKEN_EXPIRED",
	} {
		require.Contains(t, page, want)
	}
	// Every operation of the spec is on the page.
	spec, err := contracts.Specs.ReadFile("business.yaml")
	require.NoError(t, err)
	for _, line := range strings.Split(string(spec), "\n") {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "operationId: "); ok {
			require.Contains(t, page, `id="op-`+id+`"`)
		}
	}
	for _, bad := range []string{"<script", "src=", "<link", "<img", "@import"} {
		require.NotContains(t, page, bad, "the page loads nothing from elsewhere")
	}
	resp, page = get(t, env.URL+"/docs/machine")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "/api/v1/internal/judgers/jobs/claim")
	resp, _ = get(t, env.URL+"/docs/nothing")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = get(t, env.URL+"/openapi/../migrations/00001_schema.sql")
	require.NotEqual(t, http.StatusOK, resp.StatusCode)
}

func TestAPIDocsCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{HTTP: httpapi.Config{DisableAPIDocs: true}})
	for _, path := range []string{"/openapi/business.yaml", "/docs/", "/docs/admin"} {
		resp, _ := get(t, env.URL+path)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
}
