package faultproxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/worker/faultproxy"
)

func TestRules(t *testing.T) {
	t.Parallel()
	var handled atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		_, _ = io.WriteString(w, "hello "+r.URL.Path)
	}))
	t.Cleanup(up.Close)
	p := faultproxy.New(up.URL)
	t.Cleanup(p.Close)
	get := func(path string) (string, error) {
		resp, err := http.Post(p.URL()+path, "text/plain", strings.NewReader("x"))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	drop := p.Add(faultproxy.Rule{PathContains: "/drop", Action: faultproxy.DropResponse, Times: 1})
	_, err := get("/drop")
	require.Error(t, err, "the answer is cut")
	require.Equal(t, int64(1), handled.Load(), "after the server handled it")
	<-drop.Fired()
	body, err := get("/drop")
	require.NoError(t, err, "Times: 1")
	require.Equal(t, "hello /drop", body)

	p.Add(faultproxy.Rule{PathContains: "/block", Action: faultproxy.Block})
	before := handled.Load()
	_, err = get("/block")
	require.Error(t, err)
	require.Equal(t, before, handled.Load(), "a blocked request never reaches the server")

	p.Add(faultproxy.Rule{PathContains: "/rewrite", Action: faultproxy.Rewrite, Body: func(b []byte) []byte { return []byte(strings.ToUpper(string(b))) }})
	body, err = get("/rewrite")
	require.NoError(t, err)
	require.Equal(t, "HELLO /REWRITE", body)

	p.Add(faultproxy.Rule{PathContains: "/slow", Action: faultproxy.DelayResponse, Delay: 200 * time.Millisecond})
	start := time.Now()
	body, err = get("/slow")
	require.NoError(t, err)
	require.Equal(t, "hello /slow", body)
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	require.Equal(t, 2, p.Count("POST", "/drop"))

	every := p.Add(faultproxy.Rule{PathContains: "/every", Action: faultproxy.DropResponse, Every: 3})
	cutN := 0
	for range 9 {
		if _, err := get("/every"); err != nil {
			cutN++
		}
	}
	require.Equal(t, 3, cutN, "every third answer is cut")
	require.Equal(t, 3, every.Hits())
	p.Remove(every)
	for range 3 {
		_, err := get("/every")
		require.NoError(t, err, "removed")
	}

	p.Add(faultproxy.Rule{PathContains: "/busy", Action: faultproxy.Respond, Status: http.StatusTooManyRequests,
		Header: http.Header{"Retry-After": {"1"}}, Body: func([]byte) []byte { return []byte(`{"code":"RATE_LIMITED"}`) }})
	before = handled.Load()
	resp, err := http.Get(p.URL() + "/busy")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.JSONEq(t, `{"code":"RATE_LIMITED"}`, string(b))
	require.Equal(t, before, handled.Load(), "answered by the proxy")
}

// A client that gives up cancels its request upstream, unless the proxy
// keeps abandoned requests (a load balancer's way): then the server
// handles it to its end for no one. A held request reaches the server
// only after its client left, body and all.
func TestKeepAbandonedAndHoldRequest(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	ended := make(chan string, 10)
	stop := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The whole body first: the server notices a client that leaves
		// only once it has read it.
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/wait" {
			select {
			case <-release:
				ended <- "done"
			case <-r.Context().Done():
				ended <- "cancelled"
			case <-stop:
			}
			return
		}
		ended <- "handled " + r.URL.Path + " " + string(b)
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(stop) }) // runs first: a failed test ends the waiting handler
	p := faultproxy.New(up.URL)
	t.Cleanup(p.Close)
	impatient := &http.Client{Timeout: 100 * time.Millisecond}
	post := func(path string) error {
		resp, err := impatient.Post(p.URL()+path, "text/plain", strings.NewReader("claim-1"))
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	next := func() string {
		select {
		case s := <-ended:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("the upstream handler did not end")
			return ""
		}
	}

	require.Error(t, post("/wait"))
	require.Equal(t, "cancelled", next(), "by default the client's leaving cancels the request upstream")

	p.KeepAbandoned(true)
	require.Error(t, post("/wait"))
	close(release)
	require.Equal(t, "done", next(), "kept open after the client left")
	// Whether an abandoned answer is counted late depends on when the
	// proxy sees its client gone (the count is the chaos run's figure, not
	// a rule), so only the held request below is counted here.
	before := p.Late()

	p.KeepAbandoned(false)
	held := p.Add(faultproxy.Rule{PathContains: "/late", Action: faultproxy.HoldRequest, Delay: 300 * time.Millisecond, Times: 1})
	start := time.Now()
	require.Error(t, post("/late"), "the client gives up before the request is sent on")
	require.Equal(t, "handled /late claim-1", next())
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	require.Equal(t, 1, held.Hits())
	require.Eventually(t, func() bool { return p.Late() > before }, 5*time.Second, 10*time.Millisecond)
}
