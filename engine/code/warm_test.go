package code

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// prewarm runs b's pool of n started sandboxes of pool's image until the
// test ends, and waits until it is full.
func (b *testBundle) prewarm(t *testing.T, pool string, n int) (image string, stop func()) {
	t.Helper()
	rt, err := DefaultRuntime(pool)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.x.Prewarm(ctx, []engine.RuntimeSpec{rt}, n)
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	b.waitWarm(t, rt.Image, n)
	return rt.Image, stop
}

func (b *testBundle) waitWarm(t *testing.T, image string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return b.x.warm.count(image) == n }, time.Minute, 20*time.Millisecond)
}

// warmIDs are the containers waiting in the pool for image.
func (b *testBundle) warmIDs(image string) []string {
	b.x.warm.mu.Lock()
	defer b.x.warm.mu.Unlock()
	var ids []string
	for _, w := range b.x.warm.ready[image] {
		ids = append(ids, w.s.id)
	}
	return ids
}

func (b *testBundle) containerGone(t *testing.T, id string) bool {
	t.Helper()
	_, err := b.x.cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	return cerrdefs.IsNotFound(err)
}

// A job takes a started sandbox, judges as in one started for it, and the
// sandbox is removed with the job: the next job gets another one, and the
// pool refills.
func TestWarmSandboxServesOneJob(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	image, stop := b.prewarm(t, "cpp", 2)
	before := b.warmIDs(image)
	src := readTestdata(t, "prog.cpp")
	seen := map[string]bool{}
	for round := range 3 {
		ids := b.warmIDs(image)
		v := b.run(t, b.task(t, "cpp", src, tcase{in: "sum 1 2", exp: "3"}, tcase{in: "sum 2 2", exp: "5"}))
		require.Equal(t, []engine.Status{engine.StatusAccepted, engine.StatusWrongAnswer}, statuses(v), "round %d", round)
		require.True(t, v.Phases.SandboxWarm, "round %d took a started sandbox", round)
		// The one it took (the newest) is gone with the job.
		b.x.removing.Wait()
		took := ids[len(ids)-1]
		require.False(t, seen[took], "a sandbox served a second job")
		seen[took] = true
		require.True(t, b.containerGone(t, took), "the taken sandbox was removed with its job")
		b.waitWarm(t, image, 2)
	}
	require.NotContains(t, b.warmIDs(image), before[1])
	// Stopping the pool removes every waiting sandbox and its work dir.
	waiting := b.warmIDs(image)
	stop()
	for _, id := range waiting {
		require.True(t, b.containerGone(t, id))
	}
	require.NoError(t, b.leftovers(t))
	ents, err := os.ReadDir(filepath.Join(b.dir, "ws"))
	require.NoError(t, err)
	for _, e := range ents {
		require.Equal(t, CompileCacheDirName, e.Name(), "only the compile cache stays in the workspace")
	}
}

// The janitor's late and periodic sweeps keep the waiting sandboxes and
// remove those of an earlier process.
func TestWarmSandboxesAndTheJanitor(t *testing.T) {
	t.Parallel()
	b := setup(t, "python")
	image, stop := b.prewarm(t, "python", 1)
	// A pool of an earlier process of the same node: its sandbox is a
	// leftover to every sweep of this one.
	old, err := New(Config{NodeID: b.nodeID, Workspace: filepath.Join(b.dir, "ws"), SupervisorPath: supervisorBinary(t), NoCompileCache: true})
	require.NoError(t, err)
	defer old.Close()
	octx, ocancel := context.WithCancel(context.Background())
	require.NoError(t, old.newWarm(octx, image, 0))
	oldID := old.warm.ready[image][0].s.id
	ocancel()

	n, err := b.x.Sweep(context.Background(), b.nodeID, func(string, int64) bool { return false })
	require.NoError(t, err)
	require.Equal(t, 1, n, "the sweep removed the earlier process's sandbox only")
	require.True(t, b.containerGone(t, oldID))
	require.Len(t, b.warmIDs(image), 1)
	_, err = b.x.Janitor(context.Background(), b.nodeID, nil)
	require.NoError(t, err)
	require.Len(t, b.warmIDs(image), 1)
	require.False(t, b.containerGone(t, b.warmIDs(image)[0]), "the janitor kept the waiting sandbox")
	v := b.run(t, b.task(t, "python", "print(int(input())*2)", tcase{in: "21", exp: "42"}))
	require.Equal(t, engine.StatusAccepted, v.Status)
	require.True(t, v.Phases.SandboxWarm, "the sandbox the janitor kept still serves")
	b.x.removing.Wait()
	stop()
	require.NoError(t, b.leftovers(t))
}

// A task whose sandbox needs what a warm one lacks starts its own, and a
// warm sandbox of an image that has since moved is not used.
func TestWarmSandboxOnlyWhereItFits(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	image, _ := b.prewarm(t, "cpp", 1)
	task := b.task(t, "cpp", readTestdata(t, "fileio.cpp"), tcase{in: "sum 3 4", exp: "7"})
	task.IO = engine.FileIO{InputFile: "sum.in", OutputFile: "sum.out"}
	require.Positive(t, ioWorkBytes(task))
	v := b.run(t, task)
	require.Equal(t, engine.StatusAccepted, v.Status)
	require.False(t, v.Phases.SandboxWarm, "a file I/O task starts its own sandbox")
	require.Len(t, b.warmIDs(image), 1, "and leaves the waiting one")

	// The image tag moved since the sandbox started: it is removed, the job
	// starts a sandbox of the image it names now.
	b.x.warm.mu.Lock()
	b.x.warm.ready[image][0].imageID = "sha256:" + strings.Repeat("0", 64)
	stale := b.x.warm.ready[image][0].s.id
	b.x.warm.mu.Unlock()
	v = b.run(t, b.task(t, "cpp", readTestdata(t, "prog.cpp"), tcase{in: "sum 1 2", exp: "3"}))
	require.Equal(t, engine.StatusAccepted, v.Status)
	require.False(t, v.Phases.SandboxWarm)
	b.x.removing.Wait()
	require.True(t, b.containerGone(t, stale))
}

// A job whose memory differs from the one a sandbox started with gets its
// own: a program filling 950 MiB under a 1 GiB limit is judged in a taken
// sandbox that started with the smaller compile budget of the pool.
func TestWarmSandboxTakesTheJobsMemory(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	b.prewarm(t, "cpp", 1)
	src := `#include <cstdio>
#include <cstdlib>
#include <cstring>
int main() {
	size_t n = 950u << 20;
	volatile char *p = (volatile char *)malloc(n);
	if (!p) return 3;
	for (size_t i = 0; i < n; i += 4096) p[i] = 1;
	long s = 0;
	for (size_t i = 0; i < n; i += 4096) s += p[i];
	printf("%d\n", s == (long)(n / 4096));
}
`
	task := b.task(t, "cpp", src, tcase{exp: "1"})
	task.Limits.MemoryBytes = 1 << 30
	task.Limits.CPUTime = 4 * time.Second
	v := b.run(t, task)
	require.True(t, v.Phases.SandboxWarm)
	require.Equal(t, engine.StatusAccepted, v.Status, "%+v", v.Cases)
}
