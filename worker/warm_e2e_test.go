package worker_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/engine/code"
	"github.com/kece-oj/kece/worker"
)

// warmContainers counts the started-ahead sandboxes whose work dirs are
// under ws.
func warmContainers(t *testing.T, ws string) int {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	require.NoError(t, err)
	defer cli.Close()
	list, err := cli.ContainerList(context.Background(), client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", code.LabelRole+"=warm"),
	})
	require.NoError(t, err)
	n := 0
	for _, c := range list.Items {
		for _, m := range c.Mounts {
			if strings.HasPrefix(m.Source, ws+"/") {
				n++
				break
			}
		}
	}
	return n
}

// A code node keeps its sandboxes started before its jobs: they judge like
// any, the pool is refilled, and a drain removes the waiting ones.
func TestNodeKeepsWarmSandboxes(t *testing.T) {
	t.Parallel()
	requireDocker(t, "python")
	e := env(t, 20*time.Second)
	man := e.PublishCode(manifest.Limits{TimeMs: 2000, MemoryMb: 256, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 1})
	nd := e.NewNode("python", 2, 4)
	e.ForceEnable(nd.ID)
	ws := filepath.Join(t.TempDir(), "ws")
	factory, err := worker.NewCodeBackend(worker.CodeBackendConfig{Pool: "python", WarmSandboxes: 2,
		Executor: code.Config{Workspace: ws, SupervisorPath: supervisorBinary(t)}})
	require.NoError(t, err)
	cfg := nodeConfig(t, e.URL, "python", nd.JoinCode, nil)
	cfg.NewBackend, cfg.LocalSlots = factory, 2
	n := runNode(t, cfg)
	require.Eventually(t, func() bool { return warmContainers(t, ws) == 2 }, time.Minute, 50*time.Millisecond)

	var jobs []int64
	for i := range 4 {
		jobs = append(jobs, e.Enqueue("ALGO", "warm-"+string(rune('a'+i)), "python3", "a, b = map(int, input().split())\nprint(a + b)\n", man))
	}
	for _, id := range jobs {
		j := waitJob(t, e, id, 2*time.Minute, "completed", completed)
		require.Equal(t, "AC", j.Verdict, string(j.Result))
	}
	require.Eventually(t, func() bool { return warmContainers(t, ws) == 2 }, time.Minute, 50*time.Millisecond, "the pool refills")

	n.Drain()
	select {
	case <-n.done:
	case <-time.After(time.Minute):
		t.Fatal("node did not stop after the drain")
	}
	require.NoError(t, n.err)
	require.Zero(t, warmContainers(t, ws), "a drain removes the waiting sandboxes")
}
