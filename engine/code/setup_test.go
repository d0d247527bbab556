package code

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// supervisorOnce builds cmd/kece-sandbox-init once per test binary.
var supervisorOnce struct {
	sync.Once
	path string
	err  error
}

func supervisorBinary(t testing.TB) string {
	t.Helper()
	supervisorOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kece-sup-")
		if err != nil {
			supervisorOnce.err = err
			return
		}
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		out := filepath.Join(dir, "kece-sandbox-init")
		cmd := exec.Command("go", "build", "-o", out, "./cmd/kece-sandbox-init")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			supervisorOnce.err = fmt.Errorf("build supervisor: %v: %s", err, b)
			return
		}
		supervisorOnce.path = out
	})
	require.NoError(t, supervisorOnce.err)
	return supervisorOnce.path
}

// requireDocker skips (or fails under KECE_REQUIRE_DOCKER=1) without a daemon
// and the local image of pool.
func requireDocker(t testing.TB, pools ...string) {
	t.Helper()
	strict := os.Getenv("KECE_REQUIRE_DOCKER") == "1"
	miss := func(format string, args ...any) {
		t.Helper()
		if strict {
			t.Fatalf("KECE_REQUIRE_DOCKER=1: "+format, args...)
		}
		t.Skipf(format+" (set KECE_REQUIRE_DOCKER=1 to fail instead)", args...)
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		miss("docker client: %v", err)
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		miss("docker daemon not reachable: %v", err)
		return
	}
	for _, p := range pools {
		tag, err := ImageTag(p)
		require.NoError(t, err)
		if _, err := cli.ImageInspect(ctx, tag); err != nil {
			miss("image %s missing (run deploy/images/build-local.sh): %v", tag, err)
			return
		}
	}
}

type testBundle struct {
	x      *Executor
	nodeID string
	dir    string
}

func setup(t *testing.T, pools ...string) *testBundle {
	t.Helper()
	requireDocker(t, pools...)
	dir := t.TempDir()
	node := fmt.Sprintf("test-%s-%d", filepath.Base(dir), time.Now().UnixNano())
	x, err := New(Config{NodeID: node, Workspace: filepath.Join(dir, "ws"), SupervisorPath: supervisorBinary(t)})
	require.NoError(t, err)
	t.Cleanup(func() { x.Close() })
	return &testBundle{x: x, nodeID: node, dir: dir}
}

// tcase is one test case given as text.
type tcase struct {
	in, exp string
	weight  int64
}

// task builds a task with the default runtime of pool and local case files.
func (b *testBundle) task(t *testing.T, pool, src string, cases ...tcase) engine.Task {
	t.Helper()
	rt, err := DefaultRuntime(pool)
	require.NoError(t, err)
	if len(cases) == 0 {
		cases = []tcase{{in: "", exp: ""}}
	}
	task := engine.Task{
		NodeID: b.nodeID, JobID: fmt.Sprintf("job-%d", time.Now().UnixNano()), LeaseEpoch: 1,
		Runtime: rt, Source: []byte(src),
		Limits: engine.Limits{CPUTime: 2 * time.Second, MemoryBytes: 256 << 20, OutputBytes: 1 << 20},
	}
	if pool == "java" || pool == "arkts" {
		task.Limits.CPUTime = 4 * time.Second
	}
	cdir := t.TempDir()
	for i, c := range cases {
		in := filepath.Join(cdir, fmt.Sprintf("%d.in", i))
		exp := filepath.Join(cdir, fmt.Sprintf("%d.out", i))
		require.NoError(t, os.WriteFile(in, []byte(c.in), 0o644))
		require.NoError(t, os.WriteFile(exp, []byte(c.exp), 0o644))
		w := c.weight
		if w == 0 {
			w = 1
		}
		task.Cases = append(task.Cases, engine.Case{ID: fmt.Sprint(i + 1), InputPath: in, ExpectedPath: exp, Weight: w})
	}
	return task
}

func (b *testBundle) run(t *testing.T, task engine.Task) engine.Verdict {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	v, err := b.x.Execute(ctx, task, engine.NoProgress)
	require.NoError(t, err)
	return v
}

// leftovers reports containers still labelled with this bundle's node once
// the removals under way have ended: a verdict's sandboxes are removed
// after Execute returns (cleanupAfter), by b.x or by another executor a
// test made for the same node, within the cleanup timeout.
func (b *testBundle) leftovers(t testing.TB) error {
	t.Helper()
	b.x.removing.Wait()
	deadline := time.Now().Add(2 * CleanupTimeoutDefault)
	for {
		list, err := b.x.cli.ContainerList(context.Background(), client.ContainerListOptions{
			All: true, Filters: make(client.Filters).Add("label", LabelNode+"="+b.nodeID),
		})
		require.NoError(t, err)
		if len(list.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d containers left for node %s", len(list.Items), b.nodeID)
		}
		time.Sleep(50 * time.Millisecond) // poll interval while another executor's removals finish
	}
}
