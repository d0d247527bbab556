package code

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// memoryKind is one way of allocating memory and the verdict it must end in.
type memoryKind struct {
	mode   string
	status engine.Status // MLE unless said
	exp    string        // expected output of a case that must be AC
}

// offHeap lists, per language, the allocations its runtime does not bound
// by itself (docs/engine.md "Memory", the table of allocation kinds), then
// the checks that they left nothing behind: each program's "fits" mode
// (well under the limit, so AC) runs last in the same container.
var offHeap = []struct {
	lang, src  string
	limitMiB   int64
	ceilingMiB int64 // the documented run ceiling, spelled out
	kinds      []memoryKind
	cpu, wall  time.Duration
}{
	{"java17", "native.java", 256, 640, []memoryKind{{mode: "unsafe"}, {mode: "direct"}, {mode: "threads"}, {mode: "classes"}, fits}, 20 * time.Second, 40 * time.Second},
	{"arkts", "native.js", 256, 512, nodeKinds, 20 * time.Second, 40 * time.Second},
	{"javascript", "native.js", 256, 512, nodeKinds, 20 * time.Second, 40 * time.Second},
	{"cpp17", "native.c", 64, 192, cKinds, 10 * time.Second, 20 * time.Second},
	{"c17", "native.c", 64, 192, cKinds, 10 * time.Second, 20 * time.Second},
	{"python3", "native.py", 64, 192, []memoryKind{{mode: "bytearray"}, {mode: "mmap"}, {mode: "forkmmap"}, {mode: "memfd"}, fits}, 10 * time.Second, 20 * time.Second},
}

var (
	fits      = memoryKind{mode: "fits", status: engine.StatusAccepted, exp: "held\n"}
	nodeKinds = []memoryKind{{mode: "buffer"}, {mode: "unsafeslow"}, {mode: "wasm"}, {mode: "workers"}, {mode: "worker"}, fits}
	// System V IPC is refused by seccomp (ENOSYS): its objects outlive the
	// process that made them, so memory in them would stay charged to the
	// container for the cases after.
	cKinds = []memoryKind{{mode: "mmap"}, {mode: "forkmmap"}, {mode: "memfd"}, {mode: "memfdmap"},
		{mode: "sysvshm", status: engine.StatusAccepted, exp: "refused 38\n"}, fits}
)

// TestRunMemoryHeldToProblemLimit runs, in every language, programs that
// allocate memory their runtime does not bound by itself: Java Unsafe,
// direct buffers, thread stacks and metaspace; Node Buffers (pooled and
// allocUnsafeSlow), WebAssembly memory and worker heaps; C and C++ mmap,
// memfd (written, and mapped then unmapped) and mmap over four forked
// processes that each stay under their own RLIMIT_AS; CPython bytearrays,
// mmap objects, forked mmap and memfd. Each must be MLE, the user
// container's memory cgroup during the cases must be the run ceiling of
// docs/engine.md "Memory" (limit + extra + 64 MiB /tmp + 64 MiB overhead,
// not the compile budget), and the cgroup's peak usage while each case ran,
// read on the host, must stay within it. A last case well under the limit
// must then be AC: nothing was left charged to the container.
func TestRunMemoryHeldToProblemLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range offHeap {
		t.Run(tc.lang, func(t *testing.T) {
			t.Parallel()
			rt, err := RuntimeForLanguage(tc.lang)
			require.NoError(t, err)
			b := setup(t, rt.Pool)
			var cases []tcase
			for _, k := range tc.kinds {
				cases = append(cases, tcase{in: k.mode + "\n", exp: cmp.Or(k.exp, "held\n")})
			}
			task := b.task(t, rt.Pool, readTestdata(t, tc.src), cases...)
			task.Runtime = rt
			task.Limits = engine.Limits{CPUTime: tc.cpu, WallTime: tc.wall, MemoryBytes: tc.limitMiB << 20, OutputBytes: 16 << 20}
			require.Equal(t, tc.ceilingMiB<<20, b.x.containerMemory(tc.limitMiB<<20+rt.ExtraMemoryBytes), "documented ceiling of %s", tc.lang)
			compileMiB := b.x.containerMemory(max(rt.CompileMemoryBytes, tc.limitMiB<<20+rt.ExtraMemoryBytes)) >> 20

			m := &memoryMeter{t: t, cli: b.x.cli, jobID: task.JobID}
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			v, err := b.x.Execute(ctx, task, engine.ProgressFunc(m.report))
			require.NoError(t, err)
			require.NoError(t, m.failure())
			require.Len(t, m.peaks, len(tc.kinds), "%+v %s", v, v.CompileLog)
			t.Logf("lang=%s run_cgroup_limit_mib=%d compile_container_mib=%d", tc.lang, m.limit>>20, compileMiB)
			require.Equal(t, tc.ceilingMiB<<20, m.limit, "run-phase memory cgroup of %s", tc.lang)
			for i, k := range tc.kinds {
				cr, peak := v.Cases[i], m.peaks[i]
				t.Run(k.mode, func(t *testing.T) {
					t.Logf("lang=%s kind=%s limit_mib=%d ceiling_mib=%d peak_mib=%.1f peak_scope=%s maxrss_mib=%.1f verdict=%s message=%q",
						tc.lang, k.mode, tc.limitMiB, tc.ceilingMiB, float64(peak)/(1<<20), m.scope, float64(cr.MemoryKB)/1024, cr.Status, clip(cr.Message, 100))
					require.Equal(t, cmp.Or(k.status, engine.StatusMemoryLimitExceeded), cr.Status, "%s %s: %+v", tc.lang, k.mode, cr)
					// The kernel charges memory to a cgroup in batches, so its
					// recorded peak may pass the limit by part of one batch
					// (64 pages) before reclaim or the OOM killer acts.
					require.LessOrEqual(t, peak, tc.ceilingMiB<<20+chargeBatchBytes, "%s %s peak", tc.lang, k.mode)
				})
			}
			require.NoError(t, b.leftovers(t))
		})
	}
}

// chargeBatchBytes is the kernel's memory cgroup charge batch (64 pages).
const chargeBatchBytes = 64 * 4096

// memoryMeter reads the user container's memory cgroup from the host as the
// executor reports progress (it reports synchronously, with the container
// alive): the limit when judging starts, and the peak after every case. On
// cgroup v1 the peak is reset before each case, so it is that case's; on v2
// memory.peak cannot be reset on every kernel, so it covers the container's
// life (compile included), an upper bound of the case's.
type memoryMeter struct {
	t     *testing.T
	cli   *client.Client
	jobID string

	mu    sync.Mutex
	dir   string
	v2    bool
	scope string
	limit int64
	peaks []int64
	err   error
}

func (m *memoryMeter) report(p engine.Progress) {
	if p.Phase != engine.PhaseJudging {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return
	}
	if err := m.step(p.CasesDone); err != nil {
		m.err = err
	}
}

func (m *memoryMeter) step(done int) error {
	if done == 0 {
		dir, v2, err := containerCgroup(m.cli, m.jobID)
		if err != nil {
			return err
		}
		m.dir, m.v2 = dir, v2
		m.scope = "case"
		if v2 {
			m.scope = "container"
		}
		if m.limit, err = m.read("memory.limit_in_bytes", "memory.max"); err != nil {
			return err
		}
		return m.reset()
	}
	peak, err := m.read("memory.max_usage_in_bytes", "memory.peak")
	if err != nil {
		return err
	}
	m.peaks = append(m.peaks, peak)
	return m.reset()
}

func (m *memoryMeter) read(v1, v2 string) (int64, error) {
	name := v1
	if m.v2 {
		name = v2
	}
	b, err := os.ReadFile(filepath.Join(m.dir, name))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

func (m *memoryMeter) reset() error {
	if m.v2 {
		return nil
	}
	return os.WriteFile(filepath.Join(m.dir, "memory.max_usage_in_bytes"), []byte("0"), 0)
}

func (m *memoryMeter) failure() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil && m.dir == "" {
		return fmt.Errorf("no judging progress seen for job %s", m.jobID)
	}
	return m.err
}

// containerCgroup finds the host directory of the memory cgroup of the
// job's user container through its init process (cgroupfs or systemd
// driver alike) and says whether it is cgroup v2.
func containerCgroup(cli *client.Client, jobID string) (string, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{
		Filters: make(client.Filters).Add("label", LabelJob+"="+jobID).Add("label", LabelRole+"=user"),
	})
	if err != nil || len(list.Items) != 1 {
		return "", false, fmt.Errorf("user container of job %s: %d found, %v", jobID, len(list.Items), err)
	}
	in, err := cli.ContainerInspect(ctx, list.Items[0].ID, client.ContainerInspectOptions{})
	if err != nil || in.Container.State == nil || in.Container.State.Pid == 0 {
		return "", false, fmt.Errorf("inspect user container: %v", err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", in.Container.State.Pid))
	if err != nil {
		return "", false, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				return filepath.Join("/sys/fs/cgroup/memory", parts[2]), false, nil
			}
		}
		if parts[0] == "0" && parts[1] == "" {
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
				return filepath.Join("/sys/fs/cgroup", parts[2]), true, nil
			}
		}
	}
	return "", false, fmt.Errorf("no memory cgroup in /proc/%d/cgroup: %s", in.Container.State.Pid, b)
}
