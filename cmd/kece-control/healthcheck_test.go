package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHealthcheck(t *testing.T) {
	t.Parallel()
	var status atomic.Int32
	status.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/healthz", r.URL.Path)
		w.WriteHeader(int(status.Load()))
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	_, port, _ := strings.Cut(addr, ":")
	hc := func(env map[string]string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"healthcheck"}, args...), &out, &errb, func(k string) string { return env[k] })
		return code, out.String(), errb.String()
	}
	code, out, _ := hc(nil, "--listen", addr)
	require.Equal(t, 0, code)
	require.Equal(t, `{"status":"ok"}`, out)
	// The image's form: a wildcard listen address from the environment, quiet.
	code, out, _ = hc(map[string]string{"KECE_LISTEN": "0.0.0.0:" + port}, "--quiet")
	require.Equal(t, 0, code)
	require.Empty(t, out)
	status.Store(http.StatusServiceUnavailable)
	code, _, errOut := hc(nil, "--listen", addr)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "503")
	srv.Close()
	code, _, errOut = hc(nil, "--listen", addr)
	require.Equal(t, 1, code, errOut)
	code, _, errOut = hc(nil, "--listen", "nonsense")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "KECE_LISTEN")
}
