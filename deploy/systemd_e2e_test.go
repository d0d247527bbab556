package deploy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/dbtest"
)

// sdHost is a Debian container with systemd as PID 1, standing in for a
// judge host: the release tarball unpacked at /opt/kece, the host's Docker
// socket, and each code node's state directory at the same path inside and
// outside (the host's dockerd bind-mounts sandboxes from it).
type sdHost struct {
	t  *testing.T
	id string
}

func (h *sdHost) exec(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", append([]string{"exec", h.id}, args...)...).CombinedOutput()
	return string(out), err
}

func (h *sdHost) must(ctx context.Context, args ...string) string {
	h.t.Helper()
	out, err := h.exec(ctx, args...)
	require.NoError(h.t, err, "%s: %s", strings.Join(args, " "), out)
	return out
}

func (h *sdHost) show(ctx context.Context, unit, props string) string {
	h.t.Helper()
	return strings.TrimSpace(h.must(ctx, "systemctl", "show", "-p", props, "--value", unit))
}

// judgeHostRecipe is the operations guide's recipe with the operator's
// values: NODE, POOL and CONTROL_URL, and the join command kecectl printed
// in place of the example line. extra runs just before daemon-reload.
func judgeHostRecipe(t *testing.T, node, pool, url, join, extra string) string {
	t.Helper()
	r := recipe(t, "judge-host")
	vars := regexp.MustCompile(`(?m)^NODE=\S+ POOL=\S+ CONTROL_URL=\S+$`)
	require.Regexp(t, vars, r)
	r = vars.ReplaceAllLiteralString(r, fmt.Sprintf("NODE=%s POOL=%s CONTROL_URL=%s", node, pool, url))
	joinRE := regexp.MustCompile(`(?m)^kece-node join .*$`)
	require.Regexp(t, joinRE, r)
	r = joinRE.ReplaceAllLiteralString(r, join)
	require.Contains(t, r, "systemctl daemon-reload\n")
	return "set -eux\ncd /opt/kece\n" + strings.Replace(r, "systemctl daemon-reload\n", extra+"systemctl daemon-reload\n", 1)
}

// systemd for real: the judge-host recipe of docs/operations.md executed as
// written inside a Debian container booted with systemd, for a cpp node
// (kece-node@) and a mysql node (kece-node-sql@) against a control plane on
// this host. Each joins with the printed command, is verified, enabled and
// judges; then the faults: stop drains a running job, restart opens a new
// session, a killed node's lease is taken over after systemd restarts it,
// a revoked node exits 3 and is not restarted, journalctl shows JSON lines.
func TestSystemdEndToEnd(t *testing.T) {
	requireDocker(t)
	requireDockerImage(t, "cpp")
	if os.Geteuid() != 0 {
		t.Skip("needs root: host state directories for the node")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	bin := stampedBins(t)
	// The control database, opened before the container starts so that it
	// is dropped only after the container (and kece-control) is gone.
	needTCP(t, "judge MariaDB", "127.0.0.1:33062", "KECE_REQUIRE_MYSQL")
	_, dsn := dbtest.Open(t)

	// The release tarball of this machine's architecture, unpacked.
	dist := t.TempDir()
	rel := exec.CommandContext(ctx, repo("scripts/release.sh"), stampedVersion)
	rel.Env = append(os.Environ(), "DIST="+dist, "TARGETS=linux/"+runtime.GOARCH)
	out, err := rel.CombinedOutput()
	require.NoError(t, err, "%s", out)
	untar(t, filepath.Join(dist, "kece-"+stampedVersion+"-linux-"+runtime.GOARCH+".tar.gz"), dist)
	relDir := filepath.Join(dist, "kece-"+stampedVersion+"-linux-"+runtime.GOARCH)
	img, err := exec.CommandContext(ctx, repo("scripts/systemd-image.sh")).Output()
	require.NoError(t, err)

	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	sfx := hex.EncodeToString(rnd[:])
	cppNode, sqlNode := "sd-cpp-"+sfx, "sd-sql-"+sfx
	cppDir := "/var/lib/kece/node-" + cppNode
	useHostStateRoot(t)
	require.NoError(t, os.MkdirAll(cppDir, 0o700))
	t.Cleanup(func() { _ = os.RemoveAll(cppDir) })
	run := []string{"run", "-d", "--name", "kece-systemd-" + sfx, "--cap-add", "SYS_ADMIN", "--security-opt", "seccomp=unconfined",
		"--tmpfs", "/run", "--tmpfs", "/run/lock", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro", "--network", "host",
		"-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", cppDir + ":" + cppDir, "-v", relDir + ":/opt/kece:ro",
		strings.TrimSpace(string(img)), "/lib/systemd/systemd"}
	cid, err := exec.CommandContext(ctx, "docker", run...).Output()
	require.NoError(t, err)
	h := &sdHost{t: t, id: strings.TrimSpace(string(cid))}
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", h.id).Run() })
	booted := time.Now()
	require.Eventually(t, func() bool {
		s, _ := h.exec(ctx, "systemctl", "is-system-running")
		return strings.TrimSpace(s) == "running" || strings.TrimSpace(s) == "degraded"
	}, time.Minute, 200*time.Millisecond, "systemd never came up")
	figure(t, "systemd booted in %s; %s since the test started", time.Since(booted).Round(100*time.Millisecond), time.Since(start).Round(time.Second))
	p := startControlUnit(t, ctx, h, bin, dsn)
	figure(t, "kece-control.service: installed by the recipe, migrated and serving %s after boot", time.Since(booted).Round(100*time.Millisecond))
	biz := p.business(t)
	// The docker group inside must be the socket's.
	st, err := os.Stat("/var/run/docker.sock")
	require.NoError(t, err)
	h.must(ctx, "groupadd", "-g", fmt.Sprint(statGID(st)), "docker")

	// Two host adjustments, both because the "host" is a container whose
	// Docker daemon is the real host's: the sandbox supervisor and the
	// listen ports must be host paths and free host ports.
	for _, n := range []struct{ name, pool, extra string }{
		{cppNode, "cpp", `install -m 0755 bin/kece-sandbox-init "/var/lib/kece/node-$NODE/kece-sandbox-init"
sed -i -e "s|^KECE_SUPERVISOR=.*|KECE_SUPERVISOR=/var/lib/kece/node-$NODE/kece-sandbox-init|" -e "s|^KECE_LISTEN=.*|KECE_LISTEN=` + freeAddr(t) + `|" "/etc/kece/node-$NODE.env"
`},
		// The container quirk of the mysql unit: systemd here leaves
		// LoadCredential='s /run/credentials/<unit>/ readable by root
		// only (on a host it is a per-unit file system the unit's user
		// reads), so kece-node (User=kece-node) gets "permission denied".
		// The unit keeps LoadCredential=; a drop-in points
		// KECE_JUDGE_MYSQL_DSN_FILE at a copy the node's user owns.
		{sqlNode, "mysql", `echo 'root@tcp(127.0.0.1:33062)/' > "/etc/kece/node-$NODE.judge-dsn"
install -m 0600 -o kece-node -g kece-node "/etc/kece/node-$NODE.judge-dsn" "/etc/kece/node-$NODE.judge-dsn.container"
mkdir -p "/etc/systemd/system/kece-node-sql@$NODE.service.d"
printf '[Service]\nEnvironment=KECE_JUDGE_MYSQL_DSN_FILE=/etc/kece/node-%%i.judge-dsn.container\n' > "/etc/systemd/system/kece-node-sql@$NODE.service.d/container.conf"
sed -i -e "s|^KECE_LISTEN=.*|KECE_LISTEN=` + freeAddr(t) + `|" "/etc/kece/node-$NODE.env"
`},
	} {
		script := judgeHostRecipe(t, n.name, n.pool, p.url, p.createNode(ctx, n.name, n.pool), n.extra)
		h.must(ctx, "sh", "-c", script)
		unit := "kece-node@" + n.name
		if n.pool == "mysql" {
			unit = "kece-node-sql@" + n.name
		}
		if h.show(ctx, unit, "ActiveState") != "active" {
			st, _ := h.exec(ctx, "systemctl", "status", "--no-pager", "-l", unit)
			j, _ := h.exec(ctx, "journalctl", "-u", unit, "--no-pager", "-n", "30")
			t.Fatalf("%s did not start:\n%s\n%s", unit, st, j)
		}
		t.Cleanup(func() {
			if t.Failed() {
				jctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				j, _ := h.exec(jctx, "journalctl", "-u", unit, "--no-pager", "-o", "cat", "-n", "40")
				t.Logf("%s at the failure:\n%s", unit, j)
			}
		})
		owner := h.must(ctx, "stat", "-c", "%U %a", "/var/lib/kece/node-"+n.name+"/credential")
		require.Equal(t, "kece-node 600", strings.TrimSpace(owner), "join as root gave the credential to the unit's user")
		p.waitOnline(ctx, n.name, 2*time.Minute)
		p.verifyEnable(ctx, n.name)
	}
	cppMan := publishAPlusB(t, ctx, biz, 10000)
	require.Equal(t, "AC", verdict(t, ctx, biz, enqueue(t, ctx, biz, cppMan, "cpp17", cppAPlusB)))
	require.Equal(t, "AC", verdict(t, ctx, biz, enqueue(t, ctx, biz, publishSQL(t, ctx, biz), "mysql", sqlAnswer)))
	figure(t, "systemd: kece-control and both nodes installed by the recipes, joined, verified, enabled and judged %s after boot (%s since the test started)",
		time.Since(booted).Round(time.Second), time.Since(start).Round(time.Second))

	unit := "kece-node@" + cppNode
	running := func() string {
		id := enqueue(t, ctx, biz, cppMan, "cpp17", cppSlowAPlusB)
		require.Eventually(t, func() bool { return status(t, ctx, biz, id, 0).Status == "JUDGING" }, time.Minute, 100*time.Millisecond)
		return id
	}
	// systemctl stop drains: the running job settles before stop returns.
	id := running()
	t0 := time.Now()
	h.must(ctx, "systemctl", "stop", unit)
	require.Equal(t, "AC", string(status(t, ctx, biz, id, 0).Status), "the running job settled before the unit stopped")
	require.Equal(t, "0", h.show(ctx, unit, "ExecMainStatus"))
	figure(t, "systemctl stop drained in %s; the running job settled AC", time.Since(t0).Round(100*time.Millisecond))

	// restart opens a new session.
	session := func(epoch int) {
		t.Helper()
		require.Eventually(t, func() bool {
			return strings.Contains(h.must(ctx, "journalctl", "-u", unit, "-o", "cat", "--no-pager"),
				`"msg":"node running"`) && strings.Contains(h.must(ctx, "journalctl", "-u", unit, "-o", "cat", "--no-pager"),
				fmt.Sprintf(`"session_epoch":%d`, epoch))
		}, time.Minute, 250*time.Millisecond, "session %d never opened", epoch)
	}
	h.must(ctx, "systemctl", "start", unit)
	session(2)
	t0 = time.Now()
	h.must(ctx, "systemctl", "restart", unit)
	session(3)
	figure(t, "systemctl restart: new session (epoch 3) %s after the restart began", time.Since(t0).Round(100*time.Millisecond))

	// A killed node: systemd restarts it (RestartSec=10s), the new session
	// takes the old one's lease back and the job is judged again.
	id = running()
	t0 = time.Now()
	h.must(ctx, "systemctl", "kill", "--signal=SIGKILL", unit)
	require.Equal(t, "AC", verdict(t, ctx, biz, id))
	require.Equal(t, "1", h.show(ctx, unit, "NRestarts"))
	// The new process leased the job again: its second attempt, the next lease epoch.
	require.Regexp(t, `"msg":"job leased".*"lease_epoch":2,"kind":"SUBMISSION","attempt":2`,
		h.must(ctx, "journalctl", "-u", unit, "-o", "cat", "--no-pager"))
	figure(t, "SIGKILL with a job running: restarted by systemd, lease taken over, verdict %s after the kill (RestartSec=10s)",
		time.Since(t0).Round(100*time.Millisecond))

	// Revoked: exit 3, not restarted (RestartPreventExitStatus=2 3).
	p.ctl(ctx, "node", "revoke", cppNode, "--reason", "e2e: stolen host")
	require.Eventually(t, func() bool { return h.show(ctx, unit, "ActiveState") != "active" }, time.Minute, 200*time.Millisecond)
	require.Equal(t, "3", h.show(ctx, unit, "ExecMainStatus"))
	require.Never(t, func() bool {
		return h.show(ctx, unit, "NRestarts") != "1" || h.show(ctx, unit, "ActiveState") == "active"
	},
		12*time.Second, time.Second, "a revoked node is not restarted (RestartSec=10s would have)")

	// journalctl -u shows the node's JSON lines.
	lines := strings.Split(strings.TrimSpace(h.must(ctx, "journalctl", "-u", unit, "-o", "cat", "--no-pager", "-n", "20")), "\n")
	var jsonLines int
	for _, l := range lines {
		var v map[string]any
		if json.Unmarshal([]byte(l), &v) == nil && v["msg"] != nil {
			jsonLines++
		}
	}
	require.Greater(t, jsonLines, 5, "journalctl -u %s:\n%s", unit, strings.Join(lines, "\n"))

	// cgroup v1 here: say what the unit's limits came to.
	sqlUnit := "kece-node-sql@" + sqlNode
	pid := h.show(ctx, sqlUnit, "MainPID")
	cg, _ := h.exec(ctx, "grep", "memory", "/proc/"+pid+"/cgroup")
	figure(t, "cgroup: %s MemoryMax=%s TasksMax=%s; memory cgroup of the process: %s", sqlUnit,
		h.show(ctx, sqlUnit, "MemoryMax"), h.show(ctx, sqlUnit, "TasksMax"), strings.TrimSpace(cg))
}

// startControlUnit runs the operations guide's control-host recipe in the
// container with a listen port free on this host and dsn's database, and
// returns the plane that kece-control.service serves, with an admin and a
// business token made by the service user from the DSN file. Every wait is
// bounded; a failure prints the unit's journal.
func startControlUnit(t *testing.T, ctx context.Context, h *sdHost, bin, dsn string) *plane {
	t.Helper()
	journal := func() string {
		st, _ := h.exec(ctx, "systemctl", "status", "--no-pager", "-l", "kece-control")
		j, _ := h.exec(ctx, "journalctl", "-u", "kece-control", "--no-pager", "-n", "60")
		return st + "\n" + j
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kece-control at the failure:\n%s", journal())
		}
	})
	p := &plane{t: t, bin: bin, dsn: dsn, addr: freeAddr(t)}
	p.url = "http://" + p.addr
	r := recipe(t, "control-host")
	vars := regexp.MustCompile(`(?m)^LISTEN=\S+ DSN='[^']*'$`)
	require.Regexp(t, vars, r)
	// The DSN as an operator writes it: no driver options (the binary sets them).
	plain := strings.SplitN(dsn, "?", 2)[0]
	r = vars.ReplaceAllLiteralString(r, fmt.Sprintf("LISTEN=%s DSN='%s'", p.addr, plain))
	// The test's timings (as startPlane's), an operator's edit of the env file.
	timings := `printf 'KECE_LEASE_TTL=10s\nKECE_REAP_INTERVAL=500ms\nKECE_HEARTBEAT_INTERVAL=1s\nKECE_RENEW_INTERVAL=3s\n' >> /etc/kece/control.env` + "\n"
	require.Contains(t, r, "systemctl daemon-reload\n")
	r = "set -eux\ncd /opt/kece\n" + strings.Replace(r, "systemctl daemon-reload\n", timings+"systemctl daemon-reload\n", 1)
	if out, err := h.exec(ctx, "sh", "-c", r); err != nil {
		t.Fatalf("control-host recipe: %v\n%s\n%s", err, out, journal())
	}
	require.Equal(t, "kece 640", strings.TrimSpace(h.must(ctx, "stat", "-c", "%G %a", "/etc/kece/control.dsn")))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if r, err := http.Get(p.url + "/healthz"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				break
			}
		}
		if state := h.show(ctx, "kece-control", "ActiveState"); state == "failed" || time.Now().After(deadline) {
			t.Fatalf("kece-control.service never answered /healthz (state %s):\n%s", state, journal())
		}
		time.Sleep(200 * time.Millisecond) // the poll interval of another process's /healthz
	}
	require.Equal(t, "kece", h.show(ctx, "kece-control", "User"))
	// The hardening took effect on the running process, not just in the file:
	// no privileges to gain, no capabilities, a seccomp filter.
	ps := h.must(ctx, "cat", "/proc/"+h.show(ctx, "kece-control", "MainPID")+"/status")
	for _, want := range []string{`(?m)^NoNewPrivs:\s+1$`, `(?m)^Seccomp:\s+2$`, `(?m)^CapEff:\s+0+$`, `(?m)^CapBnd:\s+0+$`} {
		require.Regexp(t, want, ps, "kece-control's /proc/PID/status")
	}
	// Tokens as the guide's First start makes them: the service user, the DSN file.
	token := func(kind, name string) string {
		out := h.must(ctx, "runuser", "-u", "kece", "--", "env", "KECE_MYSQL_DSN_FILE=/etc/kece/control.dsn",
			"kece-control", "token", "create", "--kind", kind, "--name", name)
		return strings.TrimSpace(out)
	}
	p.admin, p.biz = token("admin", "e2e-admin"), token("business", "e2e-oj")
	p.ctl(ctx, "host-group", "create", "--name", "e2e-host", "--slots", "16")
	return p
}

func statGID(fi os.FileInfo) uint32 { return fi.Sys().(*syscall.Stat_t).Gid }
