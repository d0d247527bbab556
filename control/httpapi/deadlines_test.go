package httpapi_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/replica"
)

// slowBody sends the headers of a POST with a 4 KiB body, then trickles one
// byte every 50 ms (a slowloris), and returns when the server answered or
// closed the connection, with the status (0 when closed without one).
func slowBody(t *testing.T, base, path, token string) (int, []byte, time.Duration) {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	defer conn.Close()
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n", path, u.Host)
	if token != "" {
		head += "Authorization: Bearer " + token + "\r\n"
	}
	start := time.Now()
	_, err = conn.Write([]byte(head + "\r\n{"))
	require.NoError(t, err)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	// The test's own bound: far above the server's, far below "forever".
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server held the slow body for 20 s")
		return 0, nil, time.Since(start)
	}
	defer resp.Body.Close()
	var body json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body, time.Since(start)
}

// A body that trickles in is cut at the body-read bound, on the
// unauthenticated join and on every other small-body endpoint, with 408
// REQUEST_TIMEOUT (or a closed connection), not held for as long as the
// client keeps sending. Without the per-request deadline each of these stays
// open until the test's own 20 s bound.
func TestSlowBodyIsCutAtTheBound(t *testing.T) {
	t.Parallel()
	const bound = 500 * time.Millisecond
	env := controltest.Start(t, controltest.Options{HTTP: httpapi.Config{BodyReadTimeout: bound}})
	n := env.NewNode("cpp", 1, 1)
	nc := joinAndOpen(t, env, n.JoinCode, "boot-slow")
	for _, c := range []struct{ path, token string }{
		{"/api/v1/internal/judgers/join", ""},
		{"/api/v1/internal/judgers/session", nc.cred},
		{"/api/v1/internal/judgers/jobs/claim", nc.session.SessionToken},
		{"/api/v1/submissions", env.Business},
		{"/api/v1/admin/judge-host-groups", env.Admin},
	} {
		status, body, took := slowBody(t, env.URL, c.path, c.token)
		require.Less(t, took, bound+3*time.Second, "%s held for %s", c.path, took)
		if status != 0 {
			require.Equal(t, http.StatusRequestTimeout, status, "%s: %s", c.path, body)
			require.Contains(t, string(body), `"REQUEST_TIMEOUT"`, c.path)
		}
	}
}

// The read deadline ends with the body: a claim long-poll that waits longer
// than the body bound is neither cancelled nor cut, and answers after its wait.
func TestLongPollOutlivesTheBodyBound(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{HTTP: httpapi.Config{BodyReadTimeout: 50 * time.Millisecond,
		WriteTimeout: 50 * time.Millisecond}})
	n := env.NewNode("cpp", 1, 1)
	nc := joinAndOpen(t, env, n.JoinCode, "boot-poll")
	env.ForceEnable(n.ID)
	start := time.Now()
	r, err := nc.c.ClaimJobsWithResponse(env.Ctx, machineapi.ClaimRequest{FreeSlots: 1, WaitMs: 600})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
	require.Empty(t, r.JSON200.Jobs)
	require.GreaterOrEqual(t, time.Since(start), 550*time.Millisecond, "the long-poll waited")
}

// Headers are bounded in size on the API listener: 431, not an allocation
// the client chooses.
func TestHeaderSizeIsBounded(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	req, err := http.NewRequest(http.MethodGet, env.URL+"/api/v1/system/judgers/summary", nil)
	require.NoError(t, err)
	req.Header.Set("X-Filler", strings.Repeat("a", 2*httpapi.MaxHeaderBytesDefault))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
}

// Every path no route serves answers JSON with a machine code, inside the
// API prefixes and outside them, and a known path with another method is 405
// METHOD_NOT_ALLOWED with Allow; handlers mounted by other packages are
// served and take part in both answers.
func TestUnroutedAnswersJSON(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{Mount: func(s *httpapi.Server, _ *replica.Replica) {
		s.Mount("/console/", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("console")) }))
		s.Mount("GET /status", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("status")) }))
	}})
	cases := []struct {
		method, path, token string
		status              int
		code, allow         string
	}{
		{"GET", "/nope", "", http.StatusNotFound, "NOT_FOUND", ""},
		{"GET", "/", "", http.StatusNotFound, "NOT_FOUND", ""},
		{"GET", "/api/v2/anything", "", http.StatusNotFound, "NOT_FOUND", ""},
		{"GET", "/api/v1/nope", env.Business, http.StatusNotFound, "NOT_FOUND", ""},
		{"GET", "/api/v1/admin/nope", env.Admin, http.StatusNotFound, "NOT_FOUND", ""},
		{"POST", "/healthz", "", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "GET"},
		{"DELETE", "/metrics", "", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "GET"},
		{"POST", "/status", "", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "GET"},
		{"DELETE", "/api/v1/submissions", env.Business, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", ""},
		{"GET", "/api/v1/admin/judge-host-groups/1/x/y", env.Admin, http.StatusNotFound, "NOT_FOUND", ""},
	}
	for _, c := range cases {
		req, err := http.NewRequest(c.method, env.URL+c.path, nil)
		require.NoError(t, err)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var body struct{ Code, Message string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body), "%s %s is not JSON", c.method, c.path)
		resp.Body.Close()
		require.Equal(t, c.status, resp.StatusCode, "%s %s", c.method, c.path)
		require.Equal(t, c.code, body.Code, "%s %s", c.method, c.path)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		if c.allow != "" {
			require.Contains(t, resp.Header.Get("Allow"), c.allow, "%s %s", c.method, c.path)
		}
	}
	for path, want := range map[string]string{"/console/x": "console", "/status": "status", "/healthz": "ok\n"} {
		r := do(t, "GET", env.URL+path, "", "")
		require.Equal(t, http.StatusOK, r.status, path)
		require.Equal(t, want, string(r.body), path)
	}
}
