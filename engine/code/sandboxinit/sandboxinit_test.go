package sandboxinit

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The supervisor kills every process it can see after each run, so it must
// refuse to serve anywhere but as PID 1 of a sandbox (this test process is not).
func TestServeRefusesOutsideSandbox(t *testing.T) {
	t.Parallel()
	require.Equal(t, 2, Main([]string{"kece-sandbox-init", "serve"}))
	require.Equal(t, 2, Main([]string{"kece-sandbox-init"}))
	require.Equal(t, 2, Main([]string{"kece-sandbox-init", "launch"}))
}

func TestReadBounded(t *testing.T) {
	t.Parallel()
	s, trunc := readBounded(strings.NewReader(strings.Repeat("x", 100000)), 10)
	require.Equal(t, "xxxxxxxxxx", s)
	require.True(t, trunc)
	s, trunc = readBounded(strings.NewReader("short"), 10)
	require.Equal(t, "short", s)
	require.False(t, trunc)
}

func TestProcCPUOfOwnProcess(t *testing.T) {
	t.Parallel()
	burn(50 * time.Millisecond)
	require.GreaterOrEqual(t, procCPU(os.Getpid()), 40*time.Millisecond)
	require.Zero(t, procCPU(-1))
}

// burn spins until this process used at least d more CPU.
func burn(d time.Duration) {
	end := selfCPU() + d
	for selfCPU() < end {
	}
}

func TestSelfCPUCountsEveryThread(t *testing.T) {
	t.Parallel()
	before := selfCPU()
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := 0
			for j := 0; j < 20_000_000; j++ {
				x += j
			}
			_ = x
		}()
	}
	wg.Wait()
	require.Greater(t, selfCPU(), before)
}

// The counter files of cgroup v1 (cpuacct alone or co-mounted) and v2 are
// found and parsed in that order; a root without any means the fallback.
func TestCgroupCounterV1AndV2(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, rel, body string
		want            time.Duration
		v2              bool
	}{
		{"v1 cpuacct", "cpuacct/cpuacct.usage", "1500000000\n", 1500 * time.Millisecond, false},
		{"v1 co-mounted", "cpu,cpuacct/cpuacct.usage", "42\n", 42, false},
		{"v2", "cpu.stat", "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n", 2500 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			p := filepath.Join(root, tc.rel)
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, []byte(tc.body), 0o644))
			c, ok := findCgroupCounter(root)
			require.True(t, ok)
			require.Equal(t, tc.v2, c.v2)
			got, ok := c.read()
			require.True(t, ok)
			require.Equal(t, tc.want, got)
		})
	}
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "cpu.stat"), []byte("nr_periods 0\n"), 0o644))
	_, ok := findCgroupCounter(root)
	require.False(t, ok, "a cpu.stat without usage_usec is not a counter")
}

// The supervisor's own CPU never counts: a fake cgroup counter that moves
// exactly with this process's CPU (as the container's would with only the
// supervisor running) measures zero, and one that moves by 30 ms more
// measures those 30 ms.
func TestMeterSubtractsSupervisor(t *testing.T) {
	root := t.TempDir() // not parallel: other tests' CPU would move selfCPU
	p := filepath.Join(root, "cpuacct", "cpuacct.usage")
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	write := func(d time.Duration) {
		require.NoError(t, os.WriteFile(p, []byte(strconv.FormatInt(int64(d), 10)), 0o644))
	}
	first := selfCPU()
	write(first)
	c, ok := findCgroupCounter(root)
	require.True(t, ok)
	m := startMeter(c, true)
	// What this process spent between the counter's first value and the
	// meter's baseline is counted as the program's: usually microseconds,
	// but a GC cycle under a loaded make test made it a millisecond once.
	setup := selfCPU() - first
	burn(20 * time.Millisecond)
	write(selfCPU())
	require.LessOrEqual(t, m.live(), setup, "the 20 ms this process (the supervisor) burnt is not the program's")
	before := selfCPU()
	write(before + 30*time.Millisecond)
	var ru syscall.Rusage
	got := m.final(&ru)
	// The meter subtracts whatever this process (the "supervisor") spent
	// between the write and its read — under -race and GC that can be ms —
	// so the figure is 30 ms less exactly that; on top, at most what it
	// spent between the counter's first write and the meter's own baseline
	// (setup, measured above: a fixed 1 ms was 28 µs short in a loaded CI run).
	spent := selfCPU() - before
	require.LessOrEqual(t, got, 30*time.Millisecond+setup)
	require.GreaterOrEqual(t, got, 30*time.Millisecond-spent-time.Millisecond)
	// The rusage of the run is a floor.
	ru.Utime.Sec = 1
	require.Equal(t, time.Second, m.final(&ru))
}

// Without a cgroup counter the main process's rusage and the reaped orphans'
// make the figure.
func TestMeterFallback(t *testing.T) {
	t.Parallel()
	m := startMeter(cgroupCounter{}, false)
	var orphan, main syscall.Rusage
	orphan.Stime.Usec = 250_000
	m.reaped(&orphan)
	main.Utime.Sec = 1
	require.Equal(t, 1250*time.Millisecond, m.final(&main))
	require.GreaterOrEqual(t, m.live(), 250*time.Millisecond)
}

// The verdict and the reported figure come from one number; a kill decided on
// a live sample is never reported under it.
func TestCPUOutcome(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, tc := range []struct {
		final, atKill time.Duration
		limitMs       int64
		micros        int64
		exceeded      bool
	}{
		{1999 * ms, 0, 2000, 1999000, false},
		{2000 * ms, 0, 2000, 2000000, false},     // at the limit is within it
		{2000*ms + 999, 0, 2000, 2000000, false}, // reported as 2000000 µs: within
		{2000*ms + time.Microsecond, 0, 2000, 2000001, true},
		{2010 * ms, 2005 * ms, 2000, 2010000, true},
		{2004 * ms, 2005 * ms, 2000, 2005000, true}, // final read a hair under the kill sample
	} {
		micros, exceeded := cpuOutcome(tc.final, tc.atKill, tc.limitMs)
		require.Equal(t, tc.micros, micros, "%+v", tc)
		require.Equal(t, tc.exceeded, exceeded, "%+v", tc)
		require.Equal(t, exceeded, micros > tc.limitMs*1000, "the verdict follows the reported figure")
	}
}

func TestLookPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "prog")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data"), nil, 0o644))
	p, err := lookPath("prog", []string{"PATH=/nonexistent:" + dir})
	require.NoError(t, err)
	require.Equal(t, bin, p)
	_, err = lookPath("data", []string{"PATH=" + dir})
	require.Error(t, err, "not executable")
	p, err = lookPath("./main", nil)
	require.NoError(t, err)
	require.Equal(t, "./main", p)
}

func TestCleanEmptiesDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a", "b", "f"), []byte("x"), 0o644))
	require.NoError(t, os.Chmod(filepath.Join(dir, "a"), 0o000))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "g"), []byte("x"), 0o000))
	require.Equal(t, 0, clean(dir))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// When a program can first get EPIPE writing to the other side of an
// interaction, its stdin (written by that side) must already show the
// hang-up: the program that failed of the broken pipe is then known to have
// outlived the other side. The other side's supervisor holds an
// interactor's two FIFOs (its stdin first) or a manager's pair per process
// (stdin and stdout unused, then to and from each process); each round
// releases them while every program end watches for the EPIPE condition.
func TestReleasePipesHangsUpBeforeEPIPE(t *testing.T) {
	t.Parallel()
	type pair struct {
		toProg, fromProg [2]int // [read, write]
	}
	newPair := func() pair {
		var p pair
		require.NoError(t, syscall.Pipe2(p.toProg[:], syscall.O_CLOEXEC))
		require.NoError(t, syscall.Pipe2(p.fromProg[:], syscall.O_CLOEXEC))
		return p
	}
	shapes := map[string]struct {
		programs int
		held     func(ps []pair) []int
	}{
		"interactor": {1, func(ps []pair) []int { return []int{ps[0].fromProg[0], ps[0].toProg[1]} }},
		"manager": {2, func(ps []pair) []int {
			fds := []int{-1, -1}
			for _, p := range ps {
				fds = append(fds, p.toProg[1], p.fromProg[0])
			}
			return fds
		}},
	}
	for name, shape := range shapes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for range 200 {
				var ps []pair
				for range shape.programs {
					ps = append(ps, newPair())
				}
				held := holdPipes(shape.held(ps)...)
				seen := make(chan bool, len(ps))
				for _, p := range ps {
					go func() {
						fds := []unix.PollFd{{Fd: int32(p.fromProg[1]), Events: unix.POLLOUT}}
						for {
							if _, err := unix.Poll(fds, -1); err == nil && fds[0].Revents&unix.POLLERR != 0 {
								break
							}
							fds[0].Events = 0 // writable until the reader goes: wait for POLLERR alone
						}
						seen <- peerClosed(p.toProg[0])
					}()
				}
				releasePipes(held)
				for range ps {
					require.True(t, <-seen, "EPIPE before the hang-up of the program's stdin")
				}
				for _, p := range ps {
					closeFDs(p.toProg[0], p.fromProg[1])
				}
			}
		})
	}
}

// The copy command copies regular files and directories with their modes
// and times, follows no link and refuses anything else.
func TestCopyTree(t *testing.T) {
	t.Parallel()
	from, to := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(from, "p", "q"), 0o750))
	require.NoError(t, os.WriteFile(filepath.Join(from, "main"), []byte("binary"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(from, "p", "q", "A.class"), []byte("class"), 0o640))
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	require.NoError(t, os.Chtimes(filepath.Join(from, "main"), old, old))
	require.Equal(t, 0, Main([]string{"kece-sandbox-init", "copy", from, to}))

	st, err := os.Stat(filepath.Join(to, "main"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), st.Mode().Perm())
	require.True(t, st.ModTime().Equal(old), st.ModTime())
	b, err := os.ReadFile(filepath.Join(to, "p", "q", "A.class"))
	require.NoError(t, err)
	require.Equal(t, "class", string(b))
	st, err = os.Stat(filepath.Join(to, "p"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o750), st.Mode().Perm())

	// A symbolic link (here to a file outside the tree) is refused, not followed.
	outside := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(outside, []byte("secret"), 0o644))
	from2, to2 := t.TempDir(), t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(from2, "link")))
	require.Equal(t, 1, Main([]string{"kece-sandbox-init", "copy", from2, to2}))
	_, err = os.Lstat(filepath.Join(to2, "link"))
	require.ErrorIs(t, err, os.ErrNotExist)
	// A name already in the target is never overwritten.
	require.Equal(t, 1, Main([]string{"kece-sandbox-init", "copy", from, to}))
	require.Equal(t, 2, Main([]string{"kece-sandbox-init", "copy", from}))
}
