package code

import (
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

// TestRunMemoryHeldToProblemLimit runs, in every runtime, programs whose
// memory the runtime itself does not bound (Java Unsafe and direct buffers,
// Node Buffers, C++ mmap, CPython bytearrays, and mmap over four forked
// processes that each stay under their own RLIMIT_AS). Each must be MLE, the
// user container's memory cgroup during the cases must be the run ceiling
// of docs/engine.md "Memory" (limit + extra + 64 MiB /tmp + 64 MiB
// overhead, not the compile budget), and the cgroup's peak usage while the
// case ran, read on the host, must stay within it.
func TestRunMemoryHeldToProblemLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pool, src  string
		limitMiB   int64
		ceilingMiB int64 // the documented figure, spelled out
		compileMiB int64 // what the container used to keep while running
		modes      []string
		cpu, wall  time.Duration
	}{
		{"java", "native.java", 256, 640, 1024 + 128, []string{"unsafe", "direct"}, 20 * time.Second, 40 * time.Second},
		{"arkts", "native.ets", 256, 512, 768 + 128, []string{"buffer"}, 20 * time.Second, 40 * time.Second},
		{"cpp", "native.cpp", 64, 192, 768 + 128, []string{"mmap", "forkmmap"}, 10 * time.Second, 20 * time.Second},
		{"python", "native.py", 64, 192, 256 + 128, []string{"bytearray", "forkmmap"}, 10 * time.Second, 20 * time.Second},
	} {
		t.Run(tc.pool, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.pool)
			var cases []tcase
			for _, m := range tc.modes {
				cases = append(cases, tcase{in: m + "\n", exp: "held\n"})
			}
			task := b.task(t, tc.pool, readTestdata(t, tc.src), cases...)
			task.Limits = engine.Limits{CPUTime: tc.cpu, WallTime: tc.wall, MemoryBytes: tc.limitMiB << 20, OutputBytes: 64 << 10}
			require.Greater(t, tc.compileMiB, tc.ceilingMiB, "the case must tell the run ceiling from the compile budget")

			m := &memoryMeter{t: t, cli: b.x.cli, jobID: task.JobID}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			v, err := b.x.Execute(ctx, task, engine.ProgressFunc(m.report))
			require.NoError(t, err)
			require.NoError(t, m.failure())
			require.Len(t, m.peaks, len(tc.modes), "%+v", v)
			t.Logf("runtime=%s run_cgroup_limit_mib=%d", tc.pool, m.limit>>20)
			for i, mode := range tc.modes {
				cr := v.Cases[i]
				peak := m.peaks[i]
				t.Logf("runtime=%s mode=%s limit_mib=%d ceiling_mib=%d compile_budget_mib=%d peak_mib=%.1f peak_scope=%s verdict=%s message=%q",
					tc.pool, mode, tc.limitMiB, tc.ceilingMiB, tc.compileMiB, float64(peak)/(1<<20), m.scope, cr.Status, clip(cr.Message, 80))
				require.Equal(t, engine.StatusMemoryLimitExceeded, cr.Status, "%s %s: %+v", tc.pool, mode, cr)
				// The kernel charges memory to a cgroup in batches, so its
				// recorded peak may pass the limit by part of one batch
				// (64 pages) before reclaim or the OOM killer acts.
				require.LessOrEqual(t, peak, tc.ceilingMiB<<20+chargeBatchBytes, "%s %s peak", tc.pool, mode)
			}
			require.Equal(t, tc.ceilingMiB<<20, m.limit, "run-phase memory cgroup of %s", tc.pool)
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
