package httpapi_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/store"
)

// The liveness check a node sends the replica holding its long-poll every
// second: no credential, "ok", counted on the machine surface under its own
// route, and no access-log line (a fleet would fill the log with them).
func TestLivenessAnswersWithoutCredentialOrLogLine(t *testing.T) {
	t.Parallel()
	e := startObserved(t, store.Config{})
	before := e.scrape(t)
	for range 3 {
		resp, err := http.Get(e.URL + contracts.LivenessPath)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "ok\n", string(body))
		require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	}
	after := e.scrape(t)
	moved(t, before, after, 3, "kece_control_http_request_duration_seconds_count",
		"surface", "machine", "route", contracts.LivenessPath, "method", "get", "status_code", "200")
	for _, l := range e.logs.lines(t) {
		require.NotEqual(t, contracts.LivenessPath, l["route"], "a liveness check was logged: %v", l)
	}
}

// What one liveness check costs a replica, next to /healthz (which pings
// the database): go test ./control/httpapi -run '^$' -bench Liveness.
func BenchmarkLiveness(b *testing.B) {
	e := controltest.Start(b, controltest.Options{Store: store.Config{LeaseTTL: time.Minute}})
	c := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	for _, path := range []string{contracts.LivenessPath, "/healthz"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				resp, err := c.Get(e.URL + path)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: HTTP %d", path, resp.StatusCode)
				}
			}
		})
	}
}
