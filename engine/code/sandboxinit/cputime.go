package sandboxinit

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// How the CPU time of a run is measured (one measurement decides the verdict
// and is reported):
//
// The program and everything it starts (forked children, threads, a fork
// bomb's orphans, the JVM's JIT and GC threads) run in the container's cgroup,
// and the only other process there is this supervisor. So a run's CPU time is
// the cgroup's CPU counter delta minus the supervisor's own CPU delta
// (getrusage(RUSAGE_SELF), every thread of PID 1) over the same interval.
// Both counters are charged by the same scheduler accounting, so the
// supervisor's polling, log draining and Go runtime never count against the
// program, and the program's children always do.
//
// Without a readable cgroup counter the fallback is rusage: the main process's
// wait4 rusage (which includes the children it waited for) plus the rusage of
// every orphan PID 1 reaps. It misses children whose parent ignored SIGCHLD
// (the kernel reaps those without adding their time anywhere); the cgroup
// counter does not. Its live samples sum /proc (10 ms ticks) and may count a
// process twice while it is being reaped, so a kill may come a tick early;
// the figure reported is then the sample that decided.
//
// Live samples (for the kill decision, every cpuPollInterval) lag the final
// figure by at most a scheduler tick: the final figure is taken once every
// process of the run is dead and fully accounted.

// cgroupCounter reads a container-wide CPU counter.
type cgroupCounter struct {
	path string
	v2   bool // cpu.stat usage_usec; else cpuacct.usage (ns)
}

// cgroupCounterPaths are where a container sees its own cgroup's CPU counter:
// cgroup v1 (cpuacct alone or co-mounted with cpu) and cgroup v2.
var cgroupCounterPaths = []struct {
	rel string
	v2  bool
}{
	{"cpuacct/cpuacct.usage", false},
	{"cpu,cpuacct/cpuacct.usage", false},
	{"cpu.stat", true},
}

// findCgroupCounter returns the first readable counter under root
// (/sys/fs/cgroup in a container).
func findCgroupCounter(root string) (cgroupCounter, bool) {
	for _, p := range cgroupCounterPaths {
		c := cgroupCounter{path: filepath.Join(root, p.rel), v2: p.v2}
		if _, ok := c.read(); ok {
			return c, true
		}
	}
	return cgroupCounter{}, false
}

func (c cgroupCounter) read() (time.Duration, bool) {
	b, err := os.ReadFile(c.path)
	if err != nil {
		return 0, false
	}
	if !c.v2 {
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return time.Duration(ns), err == nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Duration(us) * time.Microsecond, err == nil
		}
	}
	return 0, false
}

// selfCPU is the CPU time of every thread of this process (not its children).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return rusageCPU(&ru)
}

func rusageCPU(ru *syscall.Rusage) time.Duration {
	return time.Duration(ru.Utime.Nano()) + time.Duration(ru.Stime.Nano())
}

// meter measures the CPU time of one run.
type meter struct {
	cg      cgroupCounter
	cgOK    bool
	cg0     time.Duration
	self0   time.Duration
	orphans atomic.Int64 // ns of rusage of processes PID 1 reaped (not the main one)
}

// startMeter takes the baselines; call it before the program is forked so its
// exec counts.
func startMeter(cg cgroupCounter, cgOK bool) *meter {
	m := &meter{cg: cg, cgOK: cgOK}
	if m.cgOK {
		// Counter first, then our own time, here and in every sample: the few
		// microseconds between the two reads then cancel out.
		m.cg0, m.cgOK = cg.read()
		m.self0 = selfCPU()
	}
	return m
}

// reaped adds the rusage of a process PID 1 reaped that is not the main one.
func (m *meter) reaped(ru *syscall.Rusage) { m.orphans.Add(int64(rusageCPU(ru))) }

// live is the run's CPU time so far.
func (m *meter) live() time.Duration {
	if m.cgOK {
		if now, ok := m.cg.read(); ok {
			return max(now-m.cg0-(selfCPU()-m.self0), 0)
		}
	}
	return procTreeCPU() + time.Duration(m.orphans.Load())
}

// final is the run's CPU time once every process of it is dead and reaped;
// main is the main process's wait4 rusage. The rusage sum is a lower bound
// of the true figure (it can miss auto-reaped children, never add anything),
// so the larger of the two is kept.
func (m *meter) final(main *syscall.Rusage) time.Duration {
	ru := rusageCPU(main) + time.Duration(m.orphans.Load())
	if m.cgOK {
		if now, ok := m.cg.read(); ok {
			return max(now-m.cg0-(selfCPU()-m.self0), ru)
		}
	}
	return ru
}

// procTreeCPU sums user+system time, own and of waited-for children, of every
// process but PID 1 (the fallback's live sample, 10 ms ticks).
func procTreeCPU() time.Duration {
	d, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var sum time.Duration
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil && pid != 1 {
			sum += procCPU(pid)
		}
	}
	return sum
}

// procCPU returns utime+stime+cutime+cstime of pid's thread group from /proc.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which may contain spaces) start at ") ".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0
	}
	var ticks int64
	for _, s := range f[11:15] {
		v, _ := strconv.ParseInt(s, 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ is 100 on linux
}
