package httpapi_test

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/replica"
	"github.com/kece-oj/kece/internal/sockproxy"
	"github.com/kece-oj/kece/telemetry"
)

// While the control database is unreachable every API call answers 503
// UNAVAILABLE with Retry-After, and the replica logs the outage once at
// WARN with its cause, not one ERROR per request; when the database answers
// again it says so once at INFO and requests succeed.
func TestDatabaseOutageIsOne503WarningThenRecovery(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	cfg, err := mysql.ParseDSN(env.DSN)
	require.NoError(t, err)
	// In front of the database, a proxy that can be cut (clients see
	// connection refused) and restored on the same address.
	proxy := sockproxy.New("tcp", "127.0.0.1:0", cfg.Addr)
	require.NoError(t, proxy.Up())
	t.Cleanup(proxy.Cut)
	cfg.Addr = proxy.Addr()
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	logs := &syncBuffer{}
	log, err := telemetry.NewLogger(logs, telemetry.LogConfig{Format: "json", Level: "debug"})
	require.NoError(t, err)
	rep, err := replica.New(replica.Config{}, db, env.Artifacts, log)
	require.NoError(t, err)
	srv, err := httpapi.New(httpapi.Config{}, rep.HTTPDeps(), log)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rep.Run(ctx) }()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); cancel(); <-done })

	get := func() *http.Response {
		req, err := http.NewRequest(http.MethodGet, hs.URL+"/api/v1/submissions/ALGO/nope", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+env.Business)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	require.Equal(t, http.StatusNotFound, get().StatusCode, "the database answers through the proxy")

	proxy.Cut()
	for i := 0; i < 20; i++ {
		resp := get()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
	}
	outageLines := func() (warn, info, errs int, cause string) {
		for _, l := range logs.lines(t) {
			switch {
			case l["level"] == "ERROR":
				errs++
			case strings.HasPrefix(l["msg"].(string), "control database unavailable"):
				warn++
				require.Equal(t, "WARN", l["level"])
				cause, _ = l["cause"].(string)
			case l["msg"] == "control database reachable again":
				info++
			case l["msg"] == "http request":
				require.Equal(t, "INFO", l["level"], "503s of an outage are not WARN each")
			}
		}
		return
	}
	warn, info, errs, cause := outageLines()
	require.Equal(t, 1, warn, "one warning for the outage")
	require.Zero(t, info)
	require.Zero(t, errs, "an outage is not an error per request")
	require.NotEmpty(t, cause, "the warning names the cause")

	require.NoError(t, proxy.Up())
	require.Eventually(t, func() bool { _, info, _, _ := outageLines(); return info == 1 }, 15*time.Second, 20*time.Millisecond)
	require.Equal(t, http.StatusNotFound, get().StatusCode)
	warn, _, errs, _ = outageLines()
	require.Equal(t, 1, warn)
	require.Zero(t, errs)
}
