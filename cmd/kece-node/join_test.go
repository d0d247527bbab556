package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/controltest"
)

type result struct {
	code           int
	stdout, stderr string
}

func runCmd(env map[string]string, args ...string) result {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb, func(k string) string { return env[k] })
	return result{code, out.String(), errb.String()}
}

// kece-node join against a real control plane: a code of another pool's
// node is refused without being spent, the right pool joins with the same
// code, the credential is stored 0600, and a second join is refused locally
// before anything is sent.
func TestJoinStoresTheCredentialAndRefusesAnotherPool(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	n := env.NewNode("java", 1, 2)
	dir := t.TempDir()
	cred := filepath.Join(dir, "state", "credential.json")

	r := runCmd(nil, "join", "--control-url", env.URL, "--pool", "cpp", "--credential-file", cred, "--join-code", n.JoinCode)
	require.Equal(t, exitRefused, r.code, r.stderr)
	require.Contains(t, r.stderr, "another pool")
	require.Contains(t, r.stderr, "the code is still valid")
	_, err := os.Stat(cred)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Equal(t, 0, countRows(t, env, `SELECT COUNT(*) FROM judge_join_code WHERE consumed_at IS NOT NULL`))

	// The code from a 0600 file, the rest from the environment.
	codeFile := filepath.Join(dir, "code")
	require.NoError(t, os.WriteFile(codeFile, []byte(n.JoinCode+"\n"), 0o600))
	vars := map[string]string{"KECE_CONTROL_URL": env.URL, "KECE_POOL": "java", "KECE_CREDENTIAL_FILE": cred}
	r = runCmd(vars, "join", "--code-file", codeFile)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "joined: node ")
	require.NotContains(t, r.stdout, "kcr_", "the secret is never printed")
	st, err := os.Stat(cred)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	ents, err := os.ReadDir(filepath.Dir(cred))
	require.NoError(t, err)
	require.Len(t, ents, 1, "no temporary file is left behind")

	// Joined: a second join is refused before the code is sent.
	r = runCmd(vars, "join", "--code", "kjc_anything-at-all")
	require.Equal(t, exitConfig, r.code, r.stderr)
	require.Contains(t, r.stderr, "credential file already exists")

	// A spent code and an unknown code are refusals for good (exit 3).
	r = runCmd(nil, "join", "--control-url", env.URL, "--pool", "java", "--credential-file", filepath.Join(dir, "other"), "--join-code", n.JoinCode)
	require.Equal(t, exitRefused, r.code, r.stderr)
	require.Contains(t, r.stderr, "JOIN_CODE_USED")
	r = runCmd(nil, "join", "--control-url", env.URL, "--pool", "java", "--credential-file", filepath.Join(dir, "other"), "--join-code", "kjc_not-a-real-code")
	require.Equal(t, exitRefused, r.code, r.stderr)
	require.Contains(t, r.stderr, "JOIN_CODE_INVALID")

	// Bad usage is exit 2 and names the flag.
	r = runCmd(nil, "join", "--control-url", env.URL, "--pool", "rust", "--credential-file", "relative", "--code", "x")
	require.Equal(t, exitConfig, r.code)
	require.Contains(t, r.stderr, `--pool "rust" is not a pool`)
	require.Contains(t, r.stderr, "--credential-file")
}

func countRows(t *testing.T, env *controltest.Env, q string) int {
	t.Helper()
	var n int
	require.NoError(t, env.DB.QueryRowContext(env.Ctx, q).Scan(&n))
	return n
}

// kece-node healthcheck exits 0 on 200 and 1 on 503 or no answer.
func TestHealthcheckExitCodes(t *testing.T) {
	t.Parallel()
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"pool":"cpp"}`))
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	r := runCmd(map[string]string{"KECE_LISTEN": addr}, "healthcheck")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `"pool":"cpp"`)
	require.Empty(t, runCmd(nil, "healthcheck", "--listen", addr, "--quiet").stdout)

	status = http.StatusServiceUnavailable
	r = runCmd(nil, "healthcheck", "--listen", addr)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "503")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	free := ln.Addr().String()
	require.NoError(t, ln.Close())
	r = runCmd(nil, "healthcheck", "--listen", free)
	require.Equal(t, exitFailure, r.code)
	require.Contains(t, r.stderr, "connection refused")
}
