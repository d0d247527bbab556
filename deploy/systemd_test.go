package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	hardening := map[string]string{"NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes",
		"ProtectHome": "yes", "Restart": "on-failure"}
	common := func(u unitFile) {
		require.NotEmpty(t, u.one(t, "Unit", "Description"))
		require.Equal(t, "multi-user.target", u.one(t, "Install", "WantedBy"), u.path)
		for k, v := range hardening {
			require.Equal(t, v, u.one(t, "Service", k), "%s %s", u.path, k)
		}
		user := u.one(t, "Service", "User")
		require.NotContains(t, []string{"", "root", "0", "nobody"}, user, "%s needs a dedicated user", u.path)
		require.NotContains(t, u.sections["Service"], "DynamicUser", "%s: a dedicated, stable user owns the state", u.path)
		rs, err := systemdDuration(u.one(t, "Service", "RestartSec"))
		require.NoError(t, err)
		require.GreaterOrEqual(t, rs, time.Second, "%s restarts too fast", u.path)
		require.Contains(t, u.one(t, "Service", "RestartPreventExitStatus"), "2", "%s: a settings mistake (exit 2) must not loop", u.path)
	}

	ctl := parseUnit(t, controlUnit)
	common(ctl)
	require.Equal(t, "/etc/kece/control.env", ctl.one(t, "Service", "EnvironmentFile"))
	require.Equal(t, "/usr/local/bin/kece-control migrate up", ctl.one(t, "Service", "ExecStartPre"))
	require.Equal(t, "/usr/local/bin/kece-control serve", ctl.one(t, "Service", "ExecStart"))
	require.Equal(t, mustEnv(t, controlEnv).active["KECE_ARTIFACT_DIR"], ctl.one(t, "Service", "ReadWritePaths"),
		"the only writable path is the example's artifact directory")
	require.Empty(t, ctl.one(t, "Service", "CapabilityBoundingSet"))
	stop, err := systemdDuration(ctl.one(t, "Service", "TimeoutStopSec"))
	require.NoError(t, err)
	require.Greater(t, stop, 20*time.Second, "kece-control gives in-flight requests 20s on shutdown")

	bound := stopBound(t)
	code, sql := parseUnit(t, nodeCodeUnit), parseUnit(t, nodeSQLUnit)
	for _, u := range []unitFile{code, sql} {
		common(u)
		require.Equal(t, "/etc/kece/node-%i.env", u.one(t, "Service", "EnvironmentFile"))
		require.Equal(t, "/usr/local/bin/kece-node", u.one(t, "Service", "ExecStart"))
		require.Equal(t, "SIGTERM", u.one(t, "Service", "KillSignal"))
		stop, err := systemdDuration(u.one(t, "Service", "TimeoutStopSec"))
		require.NoError(t, err)
		require.Greater(t, stop, bound, "%s: TimeoutStopSec must exceed drain grace + cleanup", u.path)
		require.Equal(t, "kece/node-%i", u.one(t, "Service", "StateDirectory"))
		require.NotContains(t, u.sections["Service"], "CacheDirectory", "%s: cache and workspace share one mount (hard links)", u.path)
		require.Contains(t, u.one(t, "Service", "ExecStartPre"), "KECE_POOL", "%s checks the pool fits the template", u.path)
	}
	require.Equal(t, "docker", code.one(t, "Service", "SupplementaryGroups"))
	require.Contains(t, code.one(t, "Unit", "Conflicts"), "kece-node-sql@%i.service")
	require.Contains(t, sql.one(t, "Unit", "Conflicts"), "kece-node@%i.service")
	require.NotContains(t, sql.sections["Service"], "SupplementaryGroups", "the mysql pool has no Docker socket")
	require.NotContains(t, strings.Join(sql.get("Unit", "Wants"), " "), "docker")
	hidden := strings.Fields(sql.one(t, "Service", "InaccessiblePaths"))
	require.Contains(t, hidden, "-/run/docker.sock")
	require.Contains(t, hidden, "-/var/run/docker.sock")
	require.Empty(t, sql.one(t, "Service", "CapabilityBoundingSet"))
	require.Equal(t, "KECE_JUDGE_MYSQL_DSN_FILE=%d/judge-dsn", sql.one(t, "Service", "Environment"))
	require.Equal(t, "judge-dsn:/etc/kece/node-%i.judge-dsn", sql.one(t, "Service", "LoadCredential"))
	// The code template's capabilities are exactly what per-job uids need.
	caps := strings.Fields(code.one(t, "Service", "AmbientCapabilities"))
	require.ElementsMatch(t, []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE"}, caps)
	require.Equal(t, "0022", code.one(t, "Service", "UMask"), "sandbox uids must read what the engine writes")
	require.ElementsMatch(t, caps, strings.Fields(code.one(t, "Service", "CapabilityBoundingSet")))
	// ExecStartPre guards really refuse the wrong pool.
	for _, c := range []struct {
		u    unitFile
		pool string
		ok   bool
	}{{code, "cpp", true}, {code, "arkts", true}, {code, "mysql", false}, {code, "", false},
		{sql, "mysql", true}, {sql, "cpp", false}, {sql, "", false}} {
		cmd := c.u.one(t, "Service", "ExecStartPre")
		require.True(t, strings.HasPrefix(cmd, "/bin/sh -c '") && strings.HasSuffix(cmd, "'"), cmd)
		script := strings.NewReplacer("$$", "$", "%i", "x").Replace(cmd[len("/bin/sh -c '") : len(cmd)-1])
		out, err := runWithEnv(t, []string{"KECE_POOL=" + c.pool}, "/bin/sh", "-c", script)
		require.Equal(t, c.ok, err == nil, "%s with KECE_POOL=%q: %v %s", c.u.path, c.pool, err, out)
	}
}

// TestSystemdAnalyzeVerify runs systemd's own checker when it is installed
// (optional tooling: skipped otherwise). Binaries are replaced by stubs so
// it can check the rest; any warning fails.
func TestSystemdAnalyzeVerify(t *testing.T) {
	t.Parallel()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	for _, b := range []string{"kece-control", "kece-node"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, b), []byte("#!/bin/sh\n"), 0o755))
	}
	for _, u := range []string{controlUnit, nodeCodeUnit, nodeSQLUnit} {
		data, err := os.ReadFile(repo(u))
		require.NoError(t, err)
		data = bytes.ReplaceAll(data, []byte("/usr/local/bin/"), []byte(bin+"/"))
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(u)), data, 0o644))
	}
	// Exposure thresholds are systemd's score x10 (0 best, 100 worst): the
	// code template pays for chown capabilities and the docker group.
	for name, threshold := range map[string]string{"kece-control.service": "20",
		"kece-node@cpp-01.service": "25", "kece-node-sql@mysql-01.service": "20"} {
		cmd := exec.Command(sa, "verify", "./"+name)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "systemd-analyze verify %s: %s", name, out)
		require.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify %s warns", name)
		cmd = exec.Command(sa, "security", "--offline=true", "--threshold="+threshold, "./"+name)
		cmd.Dir = dir
		out, err = cmd.CombinedOutput()
		require.NoError(t, err, "systemd-analyze security %s above %s:\n%s", name, threshold, out)
	}
	// The check is live: a broken copy is reported.
	bad := filepath.Join(dir, "kece-broken.service")
	data, err := os.ReadFile(filepath.Join(dir, "kece-control.service"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bad, bytes.Replace(data, []byte("TimeoutStopSec=30s"), []byte("TimeoutStopSec=banana"), 1), 0o644))
	cmd := exec.Command(sa, "verify", "./kece-broken.service")
	cmd.Dir = dir
	out, _ := cmd.CombinedOutput()
	require.Contains(t, string(out), "banana")
}
