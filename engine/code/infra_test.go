package code

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/internal/sockproxy"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	sup := supervisorBinary(t)
	ok := Config{NodeID: "n1", Workspace: t.TempDir(), SupervisorPath: sup}
	require.NoError(t, ok.Validate())
	for name, mut := range map[string]func(*Config){
		"no node":         func(c *Config) { c.NodeID = "" },
		"relative ws":     func(c *Config) { c.Workspace = "ws" },
		"no supervisor":   func(c *Config) { c.SupervisorPath = "/nonexistent/kece-sandbox-init" },
		"not executable":  func(c *Config) { c.SupervisorPath = "/etc/hostname" },
		"dynamic binary":  func(c *Config) { c.SupervisorPath = "/bin/ls" },
		"negative pids":   func(c *Config) { c.PidsLimit = -1 },
		"nproc over pids": func(c *Config) { c.PidsLimit, c.ProcessesPerRun = 10, 20 },
	} {
		c := ok
		mut(&c)
		require.Error(t, c.Validate(), name)
		_, err := New(c)
		requireClass(t, err, engine.InfraConfig)
	}
}

// TestSeccompProfileErrors: an unloadable profile is a configuration error,
// never a silent fallback to no profile.
func TestSeccompProfileErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := Config{NodeID: "n1", Workspace: filepath.Join(dir, "ws"), SupervisorPath: supervisorBinary(t)}

	c := base
	c.SeccompProfilePath = filepath.Join(dir, "missing.json")
	_, err := New(c)
	requireClass(t, err, engine.InfraConfig)

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"defaultAction": "SCMP_ACT_ALLOW", `), 0o644))
	c.SeccompProfilePath = bad
	_, err = New(c)
	requireClass(t, err, engine.InfraConfig)

	require.NoError(t, os.WriteFile(bad, []byte(`{"defaultAction": "SCMP_ACT_PERHAPS"}`), 0o644))
	_, err = New(c)
	requireClass(t, err, engine.InfraConfig)

	// Well-formed for us but refused by the daemon/runtime: still CONFIG.
	b := setup(t, "cpp")
	require.NoError(t, os.WriteFile(bad, []byte(`{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_NOPE"], "syscalls": []}`), 0o644))
	c = base
	c.NodeID = b.nodeID
	c.SeccompProfilePath = bad
	x, err := New(c)
	require.NoError(t, err)
	defer x.Close()
	_, err = x.Execute(context.Background(), b.task(t, "cpp", cppSum, tcase{in: "1 2", exp: "3"}), nil)
	requireClass(t, err, engine.InfraConfig)
	require.Contains(t, err.Error(), "seccomp")
	require.NoError(t, b.leftovers(t))

	// A custom profile that loads is used (it denies socket for AF_UNIX too).
	strict := strings.Replace(builtinSeccomp, `"value": 1, "op": "SCMP_CMP_NE"`, `"value": 99, "op": "SCMP_CMP_NE"`, 1)
	require.NoError(t, os.WriteFile(bad, []byte(strict), 0o644))
	x2, err := New(c)
	require.NoError(t, err)
	defer x2.Close()
	src := `#include <sys/socket.h>
#include <cstdio>
int main(){ puts(socket(AF_UNIX, SOCK_STREAM, 0) < 0 ? "denied" : "allowed"); }`
	v, err := x2.Execute(context.Background(), b.task(t, "cpp", src, tcase{exp: "denied"}), nil)
	require.NoError(t, err)
	require.Equal(t, engine.StatusAccepted, v.Status, "%+v", v)
	v = b.run(t, b.task(t, "cpp", src, tcase{exp: "allowed"}))
	require.Equal(t, engine.StatusAccepted, v.Status, "built-in profile allows AF_UNIX: %+v", v)
}

const cppSum = `#include <cstdio>
int main(){long long a,b; if(scanf("%lld %lld",&a,&b)!=2) return 3; printf("%lld\n",a+b); return 0;}`

func TestImageMissing(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	task := b.task(t, "cpp", cppSum, tcase{in: "1 2", exp: "3"})
	task.Runtime.Image = "kece/runtime-cpp:does-not-exist"
	_, err := b.x.Execute(context.Background(), task, nil)
	requireClass(t, err, engine.InfraImageMissing)

	task.Runtime.Image = "kece/runtime-cpp@sha256:" + strings.Repeat("ab", 32)
	_, err = b.x.Execute(context.Background(), task, nil)
	requireClass(t, err, engine.InfraImageMissing)

	// An image without the runtime: the compile command cannot start. That is
	// the image's fault, never the user's CE.
	pyImage, err := ImageTag("python")
	require.NoError(t, err)
	task.Runtime.Image = pyImage
	_, err = b.x.Execute(context.Background(), task, nil)
	requireClass(t, err, engine.InfraConfig)
	require.NoError(t, b.leftovers(t))
}

func TestCorruptInput(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	task := b.task(t, "cpp", cppSum, tcase{in: "1 2", exp: "3"})
	require.NoError(t, os.Remove(task.Cases[0].ExpectedPath))
	_, err := b.x.Execute(context.Background(), task, nil)
	requireClass(t, err, engine.InfraCorruptInput)

	task = b.task(t, "cpp", cppSum, tcase{in: "1 2", exp: "3"})
	require.NoError(t, os.Remove(task.Cases[0].InputPath))
	require.NoError(t, os.Mkdir(task.Cases[0].InputPath, 0o755))
	_, err = b.x.Execute(context.Background(), task, nil)
	requireClass(t, err, engine.InfraCorruptInput)
}

// TestCancellation: a job cancelled mid-case returns CANCELLED and leaves no
// container behind within the cleanup bound.
func TestCancellation(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	task := b.task(t, "cpp", readTestdata(t, "prog.cpp"), tcase{in: "sum 1 1", exp: "2"}, tcase{in: "sleep", exp: "woke"})
	task.Limits.WallTime = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelled := make(chan time.Time, 1)
	progress := engine.ProgressFunc(func(p engine.Progress) {
		if p.CasesDone == 1 { // cancel while the sleeper (1 min wall) runs
			time.AfterFunc(500*time.Millisecond, func() { cancelled <- time.Now(); cancel() })
		}
	})
	_, err := b.x.Execute(ctx, task, progress)
	requireClass(t, err, engine.InfraCancelled)
	at := <-cancelled
	require.Less(t, time.Since(at), CleanupTimeoutDefault, "stopped and removed within the cleanup bound")
	require.NoError(t, b.leftovers(t), "Execute returns only after removing its containers")
}

// newDockerProxy forwards a short-named unix socket to the real daemon;
// its Cut looks to the executor exactly like a daemon that stopped.
func newDockerProxy(t *testing.T) (*sockproxy.Proxy, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "kdp")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := sockproxy.Docker(dir)
	require.NoError(t, p.Up())
	t.Cleanup(p.Cut)
	return p, p.Host()
}

// TestDaemonStoppedMidRun: losing the daemon mid-case is DAEMON_UNREACHABLE,
// not a verdict, and Janitor later removes the container it could not.
func TestDaemonStoppedMidRun(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	proxy, host := newDockerProxy(t)
	x, err := New(Config{NodeID: b.nodeID, Workspace: filepath.Join(b.dir, "ws2"), SupervisorPath: supervisorBinary(t),
		DockerHost: host, CleanupTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer x.Close()
	task := b.task(t, "cpp", readTestdata(t, "prog.cpp"), tcase{in: "sum 1 1", exp: "2"}, tcase{in: "sleep", exp: "woke"})
	task.Limits.WallTime = time.Minute
	_, err = x.Execute(context.Background(), task, engine.ProgressFunc(func(p engine.Progress) {
		if p.CasesDone == 1 { // cut while the sleeper runs
			time.AfterFunc(500*time.Millisecond, proxy.Cut)
		}
	}))
	requireClass(t, err, engine.InfraDaemonUnreachable)
	require.Error(t, b.leftovers(t), "the executor could not reach the daemon to remove its container")

	removed, err := b.x.Janitor(context.Background(), b.nodeID, nil)
	require.NoError(t, err)
	require.Equal(t, 1, removed)
	require.NoError(t, b.leftovers(t))
}

func TestJanitorOnlyTouchesItsNode(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	ctx := context.Background()
	mk := func(node string) string { return b.sleeper(t, map[string]string{LabelNode: node}) }
	mk(b.nodeID)
	mk(b.nodeID)
	other := mk(b.nodeID + "-other")
	defer b.x.cli.ContainerRemove(ctx, other, client.ContainerRemoveOptions{Force: true})

	ws := b.x.cfg.Workspace
	require.NoError(t, os.MkdirAll(filepath.Join(ws, b.nodeID+"-job7-3-abcdef", "box"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, b.nodeID+"x-job7-3-abcdef"), 0o755))

	removed, err := b.x.Janitor(ctx, b.nodeID, nil)
	require.NoError(t, err)
	require.Equal(t, 2, removed)
	require.NoError(t, b.leftovers(t))
	require.NoDirExists(t, filepath.Join(ws, b.nodeID+"-job7-3-abcdef"), "this node's leftover work dir")
	require.DirExists(t, filepath.Join(ws, b.nodeID+"x-job7-3-abcdef"), "another node's work dir")
	_, err = b.x.cli.ContainerInspect(ctx, other, client.ContainerInspectOptions{})
	require.NoError(t, err, "another node's container is untouched")

	_, err = b.x.Janitor(ctx, "", nil)
	requireClass(t, err, engine.InfraConfig)
}

// Sweep, the periodic janitor of a running node, removes only containers of
// leases the node no longer holds: what a removal during a Docker outage
// left running. A live lease's container, one without job labels and
// another node's are kept.
func TestSweepRemovesOnlyDeadLeases(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	ctx := context.Background()
	mk := func(labels map[string]string) string { return b.sleeper(t, labels) }
	dead := mk(map[string]string{LabelNode: b.nodeID, LabelJob: "7", LabelLeaseEpoch: "1"})
	oldEpoch := mk(map[string]string{LabelNode: b.nodeID, LabelJob: "8", LabelLeaseEpoch: "1"})
	live := mk(map[string]string{LabelNode: b.nodeID, LabelJob: "8", LabelLeaseEpoch: "2"})
	unlabelled := mk(map[string]string{LabelNode: b.nodeID})
	other := mk(map[string]string{LabelNode: b.nodeID + "-other", LabelJob: "7", LabelLeaseEpoch: "1"})
	defer b.x.cli.ContainerRemove(ctx, other, client.ContainerRemoveOptions{Force: true})

	var asked []string
	removed, err := b.x.Sweep(ctx, b.nodeID, func(job string, epoch int64) bool {
		asked = append(asked, fmt.Sprintf("%s/%d", job, epoch))
		return job == "8" && epoch == 2
	})
	require.NoError(t, err)
	require.Equal(t, 2, removed)
	require.ElementsMatch(t, []string{"7/1", "8/1", "8/2"}, asked, "asked about each labelled lease of this node")
	exists := func(id string) bool {
		_, err := b.x.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		return err == nil
	}
	require.False(t, exists(dead), "a lease the node no longer holds")
	require.False(t, exists(oldEpoch), "an earlier epoch of a job the node holds again")
	require.True(t, exists(live), "the live lease's container")
	require.True(t, exists(unlabelled), "a container without a lease")
	require.True(t, exists(other), "another node's container")

	_, err = b.x.Sweep(ctx, "", func(string, int64) bool { return false })
	requireClass(t, err, engine.InfraConfig)
	removed, err = b.x.Janitor(ctx, b.nodeID, nil) // what is left of this node
	require.NoError(t, err)
	require.Equal(t, 2, removed)
	require.NoError(t, b.leftovers(t))
}

// A janitor whose start call failed (the daemon was down) succeeds first
// from the periodic call, while the node may already judge: it removes the
// leftovers but keeps the containers and work directories of live leases.
func TestJanitorKeepsLiveLeases(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	ctx := context.Background()
	live := b.sleeper(t, map[string]string{LabelNode: b.nodeID, LabelJob: "7", LabelLeaseEpoch: "3"})
	defer b.x.cli.ContainerRemove(ctx, live, client.ContainerRemoveOptions{Force: true})
	dead := b.sleeper(t, map[string]string{LabelNode: b.nodeID, LabelJob: "7", LabelLeaseEpoch: "2"})
	ws := b.x.cfg.Workspace
	liveDir, deadDir := filepath.Join(ws, b.nodeID+"-7-3-abcdef"), filepath.Join(ws, b.nodeID+"-7-2-abcdef")
	require.NoError(t, os.MkdirAll(liveDir, 0o755))
	require.NoError(t, os.MkdirAll(deadDir, 0o755))

	removed, err := b.x.Janitor(ctx, b.nodeID, func(job string, epoch int64) bool { return job == "7" && epoch == 3 })
	require.NoError(t, err)
	require.Equal(t, 1, removed)
	_, err = b.x.cli.ContainerInspect(ctx, dead, client.ContainerInspectOptions{})
	require.Error(t, err, "the ended lease's container is removed")
	_, err = b.x.cli.ContainerInspect(ctx, live, client.ContainerInspectOptions{})
	require.NoError(t, err, "the live lease's container is kept")
	require.DirExists(t, liveDir, "the live lease's work dir is kept")
	require.NoDirExists(t, deadDir, "the ended lease's work dir is removed")
}

// sleeper starts a container of the cpp image that sleeps, with labels.
func (b *testBundle) sleeper(t *testing.T, labels map[string]string) string {
	t.Helper()
	image, err := ImageTag("cpp")
	require.NoError(t, err)
	ctx := context.Background()
	c, err := b.x.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, Cmd: []string{"sleep", "600"}, Labels: labels},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	require.NoError(t, err)
	_, err = b.x.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{})
	require.NoError(t, err)
	return c.ID
}

func TestProbe(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp", "java", "python", "arkts")
	for pool, want := range map[string]string{"cpp": "g++", "java": "openjdk", "python": "Python 3", "arkts": "v"} {
		spec, err := DefaultRuntime(pool)
		require.NoError(t, err)
		v, err := b.x.Probe(context.Background(), spec)
		require.NoError(t, err, pool)
		require.Contains(t, v, want, pool)
	}
	spec, err := DefaultRuntime("cpp")
	require.NoError(t, err)
	spec.Image = "kece/runtime-cpp:does-not-exist"
	_, err = b.x.Probe(context.Background(), spec)
	requireClass(t, err, engine.InfraImageMissing)
	require.NoError(t, b.leftovers(t))
}

func TestImageTagMatchesBuildScript(t *testing.T) {
	t.Parallel()
	for _, pool := range []string{"cpp", "java", "python", "arkts"} {
		out, err := exec.Command("../../deploy/images/build-local.sh", "--print-tag", pool).CombinedOutput()
		require.NoError(t, err, string(out))
		tag, err := ImageTag(pool)
		require.NoError(t, err)
		require.Equal(t, tag, strings.TrimSpace(string(out)))
		spec, err := DefaultRuntime(pool)
		require.NoError(t, err)
		require.Equal(t, tag, spec.Image)
	}
	_, err := DefaultRuntime("mysql")
	require.Error(t, err)
	_, err = ImageTag("base")
	require.Error(t, err)
}

// The profile shipped for operators is the built-in one.
func TestShippedSeccompProfileIsBuiltin(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../deploy/images/seccomp-kece.json")
	require.NoError(t, err)
	require.Equal(t, strings.TrimSpace(builtinSeccomp), strings.TrimSpace(string(b)))
	_, err = loadSeccomp("../../deploy/images/seccomp-kece.json")
	require.NoError(t, err)
}

// The daemon refusing the container (the docker CLI's exit 125 class) is
// CONTAINER_CREATE, not a verdict.
func TestContainerCreateRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	x, err := New(Config{NodeID: b.nodeID, Workspace: filepath.Join(b.dir, "ws2"), SupervisorPath: supervisorBinary(t),
		ContainerCPUs: 4096}) // more CPUs than any host has
	require.NoError(t, err)
	defer x.Close()
	_, err = x.Execute(context.Background(), b.task(t, "cpp", cppSum, tcase{in: "1 2", exp: "3"}), nil)
	requireClass(t, err, engine.InfraContainerCreate)
	require.Contains(t, err.Error(), "CPU")
	require.NoError(t, b.leftovers(t))
}

// make build compiles every command with the Makefile's CGO_ENABLED=1; the
// supervisor must still come out static (it imports no cgo and no net).
func TestSupervisorIsStaticWithCgoEnabled(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "kece-sandbox-init")
	cmd := exec.Command("go", "build", "-o", out, "../../cmd/kece-sandbox-init")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, string(b))
	require.NoError(t, checkStatic(out))
	require.Error(t, checkStatic("/bin/ls"))
}

// TestSupervisorKilledMidRun: a supervisor that dies mid-case (here SIGKILLed
// from outside) is an infrastructure fault that says how it ended, never a
// verdict, and the container is removed.
func TestSupervisorKilledMidRun(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	task := b.task(t, "cpp", readTestdata(t, "prog.cpp"), tcase{in: "sum 1 1", exp: "2"}, tcase{in: "sleep", exp: "woke"})
	task.Limits.WallTime = time.Minute
	kill := func() {
		list, err := b.x.cli.ContainerList(context.Background(), client.ContainerListOptions{
			Filters: make(client.Filters).Add("label", LabelNode+"="+b.nodeID),
		})
		if err != nil || len(list.Items) != 1 {
			t.Errorf("want the job's one container, got %v (%v)", list.Items, err)
			return
		}
		_, err = b.x.cli.ContainerKill(context.Background(), list.Items[0].ID, client.ContainerKillOptions{Signal: "KILL"})
		assert.NoError(t, err)
	}
	_, err := b.x.Execute(context.Background(), task, engine.ProgressFunc(func(p engine.Progress) {
		if p.CasesDone == 1 { // while the sleeper runs
			time.AfterFunc(500*time.Millisecond, kill)
		}
	}))
	requireClass(t, err, engine.InfraInternal)
	require.Contains(t, err.Error(), "exit 137")
	require.NoError(t, b.leftovers(t))
}

// TestSupervisorEnd: only a SIGKILLed supervisor in a container that saw an
// OOM kill is reported as out of memory; the daemon's OOMKilled alone is
// not enough (cgroup v1 sets it for any OOM in the container, such as a
// program's memory limit earlier in the job).
func TestSupervisorEnd(t *testing.T) {
	t.Parallel()
	cause := io.ErrUnexpectedEOF
	for _, c := range []struct {
		name  string
		st    container.State
		class engine.InfraClass
		msg   string
	}{
		{"oom victim", container.State{Status: "exited", ExitCode: 137, OOMKilled: true}, engine.InfraResourceExhausted, "OOM-killed"},
		{"killed, no oom", container.State{Status: "exited", ExitCode: 137}, engine.InfraInternal, "exit 137 oom false"},
		{"crashed after a program's oom", container.State{Status: "exited", ExitCode: 2, OOMKilled: true}, engine.InfraInternal, "exit 2 oom true"},
		{"still running", container.State{Status: "running", OOMKilled: true}, engine.InfraInternal, "status running"},
	} {
		err := supervisorEnd(c.st, cause, "panic: boom")
		require.Equal(t, c.class, engine.ClassOf(err), c.name)
		require.Contains(t, err.Error(), c.msg, c.name)
		require.Contains(t, err.Error(), "panic: boom", c.name)
		require.Contains(t, err.Error(), cause.Error(), c.name)
	}
}
