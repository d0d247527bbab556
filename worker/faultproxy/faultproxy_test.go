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
