package main

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/worker"
)

func TestConfigureRefusesWithClearErrors(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	base := map[string]string{
		"KECE_CONTROL_URL": "http://127.0.0.1:1", "KECE_CREDENTIAL_FILE": filepath.Join(dir, "cred"),
		"KECE_LOCAL_SLOTS": "2", "KECE_CACHE_DIR": filepath.Join(dir, "cache"), "KECE_WORKSPACE": filepath.Join(dir, "ws"),
	}
	getenv := func(over map[string]string) func(string) string {
		return func(k string) string {
			if v, ok := over[k]; ok {
				return v
			}
			return base[k]
		}
	}
	for name, c := range map[string]struct {
		env  map[string]string
		want string
	}{
		"unknown pool":      {map[string]string{"KECE_POOL": "rust"}, "KECE_POOL"},
		"bad slots":         {map[string]string{"KECE_POOL": "mysql", "KECE_LOCAL_SLOTS": "many"}, "KECE_LOCAL_SLOTS"},
		"bad duration":      {map[string]string{"KECE_POOL": "mysql", "KECE_HEARTBEAT_INTERVAL": "often"}, "KECE_HEARTBEAT_INTERVAL"},
		"code and file":     {map[string]string{"KECE_POOL": "mysql", "KECE_JOIN_CODE": "kjc_x", "KECE_JOIN_CODE_FILE": "/x"}, "not both"},
		"zero slots":        {map[string]string{"KECE_POOL": "mysql", "KECE_LOCAL_SLOTS": "0"}, "KECE_LOCAL_SLOTS"},
		"mysql without dsn": {map[string]string{"KECE_POOL": "mysql"}, "KECE_JUDGE_MYSQL_DSN_FILE: required for the mysql pool"},
		"code without ws":   {map[string]string{"KECE_POOL": "cpp", "KECE_WORKSPACE": ""}, "KECE_WORKSPACE"},
		"bad cache size":    {map[string]string{"KECE_POOL": "mysql", "KECE_CACHE_MAX_BYTES": "lots"}, "KECE_CACHE_MAX_BYTES"},
	} {
		_, err := configure(nil, getenv(c.env), log)
		require.Error(t, err, name)
		require.Contains(t, err.Error(), c.want, name)
	}

	// A readable DSN file is refused; a 0600 one builds the SQL executor
	// (without contacting anything) and never the Docker one.
	dsn := filepath.Join(dir, "dsn")
	require.NoError(t, os.WriteFile(dsn, []byte("root@tcp(127.0.0.1:1)/\n"), 0o644))
	_, err := configure(nil, getenv(map[string]string{"KECE_POOL": "mysql", "KECE_JUDGE_MYSQL_DSN_FILE": dsn}), log)
	require.ErrorContains(t, err, "chmod 0600")
	require.NoError(t, os.Chmod(dsn, 0o600))
	cfg, err := configure(nil, getenv(map[string]string{"KECE_POOL": "mysql", "KECE_JUDGE_MYSQL_DSN_FILE": dsn}), log)
	require.NoError(t, err)
	require.Equal(t, 2, cfg.LocalSlots)
	require.NotNil(t, cfg.NewBackend)

	// A code pool never reads the DSN file, even a missing one.
	cfg, err = configure(nil, getenv(map[string]string{"KECE_POOL": "cpp", "KECE_JUDGE_MYSQL_DSN_FILE": filepath.Join(dir, "absent")}), log)
	require.NoError(t, err)
	require.Equal(t, "cpp", cfg.Pool)

	cfg, err = configure([]string{"--local-slots", "3", "--cache-max", "2GiB"}, getenv(map[string]string{"KECE_POOL": "mysql", "KECE_JUDGE_MYSQL_DSN_FILE": dsn}), log)
	require.NoError(t, err)
	require.Equal(t, 3, cfg.LocalSlots, "flags override the environment")
	require.Equal(t, int64(2<<30), cfg.CacheMaxBytes)
}

// Every duration flag has an environment variable; unset KECE_LOCAL_SLOTS
// takes the host-sized default; the join code may come from a 0600 file.
func TestConfigureEnvironmentAndDefaults(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	dsn := filepath.Join(dir, "dsn")
	require.NoError(t, os.WriteFile(dsn, []byte("root@tcp(127.0.0.1:1)/\n"), 0o600))
	codeFile := filepath.Join(dir, "code")
	require.NoError(t, os.WriteFile(codeFile, []byte("kjc_from-file\n"), 0o600))
	env := map[string]string{
		"KECE_POOL": "mysql", "KECE_CONTROL_URL": "http://127.0.0.1:1", "KECE_CREDENTIAL_FILE": filepath.Join(dir, "cred"),
		"KECE_CACHE_DIR": filepath.Join(dir, "cache"), "KECE_JUDGE_MYSQL_DSN_FILE": dsn, "KECE_JOIN_CODE_FILE": codeFile,
		"KECE_HEARTBEAT_INTERVAL": "3s", "KECE_RENEW_INTERVAL": "4s", "KECE_CLAIM_WAIT": "5s", "KECE_SAFETY_MARGIN": "1s",
		"KECE_DRAIN_GRACE": "1m", "KECE_HEALTH_INTERVAL": "7s", "KECE_JANITOR_INTERVAL": "8s", "KECE_RESULT_CLAIMS": "false",
	}
	cfg, err := configure(nil, func(k string) string { return env[k] }, log)
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, cfg.HeartbeatInterval)
	require.Equal(t, 4*time.Second, cfg.RenewInterval)
	require.Equal(t, 5*time.Second, cfg.ClaimWait)
	require.Equal(t, time.Second, cfg.SafetyMargin)
	require.Equal(t, time.Minute, cfg.DrainGrace)
	require.Equal(t, 7*time.Second, cfg.HealthInterval)
	require.Equal(t, 8*time.Second, cfg.JanitorInterval)
	require.True(t, cfg.NoResultClaims)
	require.Equal(t, "kjc_from-file", cfg.JoinCode)
	cpus, mem := hostResources()
	require.Equal(t, worker.DefaultLocalSlots("mysql", cpus, mem), cfg.LocalSlots)
	require.GreaterOrEqual(t, cfg.LocalSlots, 1)
	require.True(t, strings.HasPrefix(cfg.Version, "kece-node "), cfg.Version)

	// A join code file others can read is refused.
	require.NoError(t, os.Chmod(codeFile, 0o644))
	_, err = configure(nil, func(k string) string { return env[k] }, log)
	require.ErrorContains(t, err, "chmod 0600")
}

func TestVersionAndUsageExitCodes(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	env := func(string) string { return "" }
	require.Equal(t, exitOK, run([]string{"version"}, &out, &errb, env))
	require.True(t, strings.HasPrefix(out.String(), "kece-node "), out.String())
	v := out.String()
	out.Reset()
	require.Equal(t, exitOK, run([]string{"--version"}, &out, &errb, env))
	require.Equal(t, v, out.String())
	require.Equal(t, exitConfig, run([]string{"jion"}, &out, &errb, env))
	require.Contains(t, errb.String(), `unknown command "jion"`)
	errb.Reset()
	require.Equal(t, exitConfig, run([]string{"join", "--pool", "cpp"}, &out, &errb, env))
	require.Contains(t, errb.String(), "--credential-file")
	errb.Reset()
	require.Equal(t, exitConfig, run([]string{"join", "--pool", "cpp", "--credential-file", "/nonexistent/cred"}, &out, &errb, env))
	require.Contains(t, errb.String(), "--control-url")
	require.Contains(t, errb.String(), "--join-code-file (or --join-code) is required")
	errb.Reset()
	require.Equal(t, exitConfig, run([]string{"healthcheck", "--listen", "off"}, &out, &errb, env))
	require.Contains(t, errb.String(), "KECE_LISTEN is off")
	errb.Reset()
	require.Equal(t, exitConfig, run([]string{"run"}, &out, &errb, env))
	require.Contains(t, errb.String(), "KECE_POOL")
}

func TestHealthURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"127.0.0.1:9464": "http://127.0.0.1:9464/healthz",
		":9464":          "http://127.0.0.1:9464/healthz",
		"0.0.0.0:9464":   "http://127.0.0.1:9464/healthz",
		"[::]:9464":      "http://[::1]:9464/healthz",
		"node-a:80":      "http://node-a:80/healthz",
	} {
		got, err := healthURL(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := healthURL("9464")
	require.Error(t, err)
}
