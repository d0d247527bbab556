package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// buildNode builds kece-node as shipped, for tests that run the process.
func buildNode(t *testing.T) string {
	t.Helper()
	dir := openDir(t)
	out, err := exec.Command("go", "build", "-o", dir+"/", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return filepath.Join(dir, "kece-node")
}

// openDir is a temporary directory another user may enter (t.TempDir's
// parent is private to the test's user).
func openDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kece-node-exit-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	return dir
}

// startBinary runs bin with only env (no inherited KECE_ variables) and
// returns its exit code and stderr; it must end within a minute.
func startBinary(t *testing.T, bin string, env map[string]string, attr *syscall.SysProcAttr, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = attr
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), stderr.String()
		}
		require.NoError(t, err)
		return 0, stderr.String()
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("%v did not stop within a minute:\n%s", args, stderr.String())
		return 0, ""
	}
}

// Every bad setting stops the built binary at start with exit 2 (the
// units' RestartPreventExitStatus=2 3: not restarted in a loop) and a
// message naming it: the credential file's mode, owner and content
// included, which used to be found inside the running node (exit 1).
func TestBadSettingsExit2FromTheBuiltBinary(t *testing.T) {
	t.Parallel()
	bin := buildNode(t)
	dir := t.TempDir()
	file := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	cred := `{"nodeId":"7","pool":"cpp","hostGroupId":"1","credential":"kcn_x"}` + "\n"
	base := map[string]string{
		"KECE_POOL": "cpp", "KECE_CONTROL_URL": "http://127.0.0.1:1", "KECE_LOCAL_SLOTS": "1",
		"KECE_CACHE_DIR": filepath.Join(dir, "cache"), "KECE_WORKSPACE": filepath.Join(dir, "ws"),
		"KECE_CREDENTIAL_FILE": filepath.Join(dir, "absent"),
	}
	with := func(over map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range over {
			m[k] = v
		}
		return m
	}
	readable := file("cred-0644", cred, 0o644)
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"credential mode", with(map[string]string{"KECE_CREDENTIAL_FILE": readable}), nil,
			"KECE_CREDENTIAL_FILE " + readable + " has mode 0644"},
		{"credential content", with(map[string]string{"KECE_CREDENTIAL_FILE": file("cred-junk", "not json\n", 0o600)}), nil,
			"is not a node credential written by kece-node"},
		{"credential of another pool", with(map[string]string{"KECE_CREDENTIAL_FILE": file("cred-cpp", cred, 0o600), "KECE_POOL": "java"}), nil,
			"holds the credential of a cpp node, but KECE_POOL is java"},
		{"credential is a directory", with(map[string]string{"KECE_CREDENTIAL_FILE": t.TempDir()}), nil, "is not a regular file"},
		{"join code file mode", with(map[string]string{"KECE_JOIN_CODE_FILE": file("code", "kjc_x\n", 0o644)}), nil,
			"KECE_JOIN_CODE_FILE: " + filepath.Join(dir, "code") + " has mode 0644"},
		{"dsn file mode", with(map[string]string{"KECE_POOL": "mysql", "KECE_JUDGE_MYSQL_DSN_FILE": file("dsn", "root@tcp(127.0.0.1:1)/\n", 0o644)}), nil,
			"has mode 0644"},
		{"unknown pool", with(map[string]string{"KECE_POOL": "rust"}), nil, `KECE_POOL "rust" is not a pool`},
		{"bad duration flag", base, []string{"--renew-interval=-2s"}, `--renew-interval: "-2s": must not be negative`},
		{"old flag name, one dash", base, []string{"-heartbeat", "soon"}, `--heartbeat: "soon": not a duration`},
		{"bad slots", with(map[string]string{"KECE_LOCAL_SLOTS": "many"}), nil, `KECE_LOCAL_SLOTS: "many" must be a positive integer`},
		{"bad listen", with(map[string]string{"KECE_LISTEN": "9464"}), nil, `KECE_LISTEN: "9464" is not host:port`},
		{"bad log format", with(map[string]string{"KECE_LOG_FORMAT": "yaml"}), nil, `log format "yaml"`},
		{"unknown flag", base, []string{"--pool-size", "3"}, "unknown flag: --pool-size"},
	}
	for _, c := range cases {
		code, stderr := startBinary(t, bin, c.env, nil, c.args...)
		require.Equal(t, exitConfig, code, "%s: %s", c.name, stderr)
		require.Contains(t, stderr, c.want, c.name)
		// Only what an operator can fix: an executor that could not be
		// built because of a setting is not also called a wiring error.
		require.NotContains(t, stderr, "wiring", c.name)
	}
	// The owner: a credential file the node's user cannot read (it belongs
	// to another user) is a setting too. Needs root to run as another user.
	if os.Geteuid() != 0 {
		t.Log("not root: the owner case runs in CI (as root)")
		return
	}
	shared := openDir(t)
	rootCred := filepath.Join(shared, "credential")
	require.NoError(t, os.WriteFile(rootCred, []byte(cred), 0o600))
	env := with(map[string]string{"KECE_CREDENTIAL_FILE": rootCred, "KECE_CACHE_DIR": filepath.Join(shared, "cache"), "KECE_WORKSPACE": filepath.Join(shared, "ws")})
	code, stderr := startBinary(t, bin, env, &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}})
	require.Equal(t, exitConfig, code, stderr)
	require.Contains(t, stderr, "KECE_CREDENTIAL_FILE "+rootCred)
	require.Contains(t, stderr, "permission denied")
}
