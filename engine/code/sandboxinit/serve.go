package sandboxinit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// cpuPollInterval is how often the CPU time of a running program is sampled
// (see cputime.go); RLIMIT_CPU is only the backstop (whole seconds, always
// above the limit: see startLocked).
const cpuPollInterval = 10 * time.Millisecond

// cgroupRoot is where a container sees its own cgroup hierarchy.
const cgroupRoot = "/sys/fs/cgroup"

// Main is the entry point of cmd/kece-sandbox-init.
func Main(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kece-sandbox-init serve | clean <dir> | copy <from> <to> | version")
		return 2
	}
	switch args[1] {
	case "serve":
		// After every run the supervisor kills every other process it can
		// see (kill(-1)); that is only safe as PID 1 of a sandbox namespace.
		if os.Getpid() != 1 {
			fmt.Fprintln(os.Stderr, "kece-sandbox-init: serve must run as PID 1 of a sandbox container")
			return 2
		}
		if err := serve(os.Stdin, os.Stdout, args[0]); err != nil {
			fmt.Fprintln(os.Stderr, "kece-sandbox-init:", err)
			return 1
		}
		return 0
	case "clean":
		if len(args) != 3 {
			return 2
		}
		return clean(args[2])
	case "copy":
		if len(args) != 4 {
			return 2
		}
		return copyCmd(args[2], args[3])
	case "version":
		fmt.Println(Version)
		return 0
	}
	fmt.Fprintln(os.Stderr, "kece-sandbox-init: unknown command", args[1])
	return 2
}

// serve answers requests until stdin closes.
func serve(in io.Reader, out io.Writer, self string) error {
	if err := prepareSelf(); err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	if err := enc.Encode(Hello{Version: Version, PID: os.Getpid()}); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	cg, cgOK := findCgroupCounter(cgroupRoot)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var req Request
		var res Result
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			res.SetupError = fmt.Sprintf("bad request: %v", err)
		} else {
			res = run(self, req, cg, cgOK)
		}
		res.ID = req.ID
		if err := enc.Encode(res); err != nil {
			return fmt.Errorf("answer: %w", err)
		}
	}
	return sc.Err()
}

// run executes one request and always returns a Result. cg is the
// container's CPU counter (cgOK false: none readable, rusage fallback).
func run(self string, req Request, cg cgroupCounter, cgOK bool) Result {
	res := Result{}
	if len(req.Argv) == 0 || req.CPUMillis <= 0 || req.WallMillis <= 0 || req.UID <= 0 || req.GID <= 0 {
		res.SetupError = "request needs argv, cpu_ms, wall_ms and a non-root uid and gid"
		return res
	}
	if req.Pipes != nil && (req.Stdin != "" || req.Stdout != "" || req.Files != nil) {
		res.SetupError = "pipes exclude stdin, stdout and files"
		return res
	}
	logR, logW, err := os.Pipe()
	if err != nil {
		res.SetupError = fmt.Sprintf("log pipe: %v", err)
		return res
	}
	defer logR.Close()
	rio, err := openStdio(req, logW)
	if err != nil {
		logW.Close()
		res.SetupError = err.Error()
		return res
	}
	defer rio.close()
	var placed []string
	if req.Files != nil {
		placed, err = placeFiles(req.Files, req.Dir)
		// The run uid's clean below cannot remove these: they are root's.
		defer removeFiles(placed)
		if err != nil {
			logW.Close()
			res.SetupError = err.Error()
			return res
		}
	}
	oomBefore := oomKills()
	// Baselines before the fork: the program's exec counts as its time.
	m := startMeter(cg, cgOK)
	start := time.Now()
	files := []uintptr{rio.fds[0], rio.fds[1], logW.Fd()}
	for _, fd := range rio.pipeFDs[min(2, len(rio.pipeFDs)):] {
		files = append(files, uintptr(fd))
	}
	pid, err := startTraced(req, files)
	logW.Close()
	var held []int
	if req.Pipes != nil {
		// Ours are closed now that the program holds them; the copies in
		// held stay open until the program is reaped (see holdPipes).
		held = holdPipes(rio.pipeFDs...)
		defer func() { releasePipes(held) }()
	}
	if err != nil {
		res.SetupError = err.Error()
		// The log pipe's write end is closed; drain what the child wrote.
		res.Log, _ = readBounded(logR, req.LogBytes)
		return res
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		res.Log, res.LogTruncated = readBounded(logR, req.LogBytes)
	}()
	ws, ru, atKill := supervise(pid, req, m, &res)
	res.WallMicros = time.Since(start).Microseconds()
	if len(held) > 0 {
		res.PeerClosed = peerClosed(held[0])
		releasePipes(held)
		held = nil
	}

	// Whatever the program left behind (daemons, children holding the log
	// pipe) dies now: we are PID 1, so kill(-1) reaches every other process.
	_ = syscall.Kill(-1, syscall.SIGKILL)
	reapAll(m.reaped)
	wg.Wait()

	// Every process of the run is dead: the final figure is complete.
	res.CPUMicros, res.CPUExceeded = cpuOutcome(m.final(&ru), atKill, req.CPUMillis)
	res.MaxRSSKB = ru.Maxrss
	if ws.Signaled() {
		res.Signal = int(ws.Signal())
	} else {
		res.ExitCode = ws.ExitStatus()
	}
	res.OOMKilled = oomKills() > oomBefore
	if req.Files != nil && req.Files.Output != "" {
		if res.OutputFile, err = collectOutput(req.Files, req.UID, req.GID); err != nil {
			res.SetupError = err.Error()
		}
	}
	if req.CleanDir != "" {
		cleanDir(self, req.CleanDir, req.UID, req.GID)
	}
	return res
}

// runIO is what a run's program gets as descriptors 0 and 1, and the FIFOs
// of an interactive or communication run; the supervisor's copies of the
// files close when the run ends.
type runIO struct {
	fds     [2]uintptr
	pipeFDs []int // every FIFO descriptor, the program's stdin first
	files   []*os.File
}

func (r *runIO) close() {
	for _, f := range r.files {
		f.Close()
	}
}

// openStdio opens a run's stdin and stdout: the request's FIFOs (stdin
// /dev/null and stdout the log pipe where a FIFO does not stand in), or its
// stdin file and a new stdout file (the log pipe when it names none).
func openStdio(req Request, logW *os.File) (*runIO, error) {
	r := &runIO{}
	if req.Pipes != nil {
		in, out, extra, err := openPipes(req.Pipes)
		if err != nil {
			return nil, err
		}
		r.pipeFDs = append([]int{in, out}, extra...)
		devNull, err := openStdin("")
		if err != nil {
			closeFDs(r.pipeFDs...)
			return nil, err
		}
		r.files = append(r.files, devNull)
		r.fds = [2]uintptr{devNull.Fd(), logW.Fd()}
		if in >= 0 {
			r.fds[0] = uintptr(in)
		}
		if out >= 0 {
			r.fds[1] = uintptr(out)
		}
		return r, nil
	}
	stdin, err := openStdin(req.Stdin)
	if err != nil {
		return nil, err
	}
	r.files = append(r.files, stdin)
	stdout := logW
	if req.Stdout != "" {
		f, err := os.OpenFile(req.Stdout, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
		if err != nil {
			stdin.Close()
			return nil, fmt.Errorf("stdout: %v", err)
		}
		r.files = append(r.files, f)
		stdout = f
	}
	r.fds = [2]uintptr{stdin.Fd(), stdout.Fd()}
	return r, nil
}

// supervise waits for the program pid to end, killing its process group
// at the wall limit or when the meter shows it over its CPU limit (setting
// res.WallExceeded or res.CPUExceeded). Until the main process ends it
// reaps whatever else ends too (orphans are reparented to PID 1): no
// zombie holds a pid, and the fallback measure gets their rusage. Nothing
// else of ours has children during a run. atKill is the live sample that
// decided a CPU kill (0: none).
func supervise(pid int, req Request, m *meter, res *Result) (ws syscall.WaitStatus, ru syscall.Rusage, atKill time.Duration) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			var w syscall.WaitStatus
			var r syscall.Rusage
			got, err := syscall.Wait4(-1, &w, 0, &r)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil {
				return
			}
			if got == pid {
				ws, ru = w, r
				return
			}
			m.reaped(&r)
		}
	}()
	wall := time.NewTimer(time.Duration(req.WallMillis) * time.Millisecond)
	defer wall.Stop()
	tick := time.NewTicker(cpuPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return ws, ru, atKill
		case <-wall.C:
			res.WallExceeded = true
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		case <-tick.C:
			if res.CPUExceeded {
				continue
			}
			if used := m.live(); overCPU(used, req.CPUMillis) {
				atKill = used
				res.CPUExceeded = true
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// overCPU is the one CPU limit rule, in whole microseconds (the unit
// reported), so a TLE never reports a figure equal to the limit.
func overCPU(d time.Duration, limitMillis int64) bool { return d.Microseconds() > limitMillis*1000 }

// cpuOutcome turns the final measurement into the reported figure and the
// verdict: one figure decides and is reported. A kill was decided on a live
// sample of the same measure (atKill, 0 if none), which the final one can
// only exceed; it is kept as a floor against the microseconds between reads.
func cpuOutcome(final, atKill time.Duration, limitMillis int64) (micros int64, exceeded bool) {
	cpu := max(final, atKill)
	return cpu.Microseconds(), overCPU(cpu, limitMillis)
}

func openStdin(path string) (*os.File, error) {
	if path == "" {
		path = os.DevNull
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("stdin: %w", err)
	}
	if st, err := f.Stat(); err != nil || (!st.Mode().IsRegular() && path != os.DevNull) {
		f.Close()
		return nil, fmt.Errorf("stdin %s: not a regular file", path)
	}
	return f, nil
}

// readBounded keeps the first max bytes and drains the rest.
func readBounded(r io.Reader, limit int) (string, bool) {
	if limit <= 0 {
		limit = 4096
	}
	buf := make([]byte, 0, min(limit, 64<<10))
	chunk := make([]byte, 32<<10)
	truncated := false
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			room := limit - len(buf)
			if n > room {
				truncated = true
				n = max(room, 0)
			}
			buf = append(buf, chunk[:n]...)
		}
		if err != nil {
			return string(buf), truncated
		}
	}
}

// reapAll waits for every remaining child (orphans are reparented to PID 1),
// passing each one's rusage to account when it is not nil.
func reapAll(account func(*syscall.Rusage)) {
	for {
		var ws syscall.WaitStatus
		var ru syscall.Rusage
		_, err := syscall.Wait4(-1, &ws, 0, &ru)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		if account != nil {
			account(&ru)
		}
	}
}

// cleanDir empties dir by running "clean" as the run uid, only when needed.
// A directory the supervisor may not list (the compile space, 0700 and the
// compile uid's: the supervisor holds no CAP_DAC_OVERRIDE) is cleaned
// without looking first.
func cleanDir(self, dir string, uid, gid int) {
	f, err := os.Open(dir)
	switch {
	case errors.Is(err, fs.ErrPermission):
	case err != nil:
		return
	default:
		names, _ := f.Readdirnames(1)
		f.Close()
		if len(names) == 0 {
			return
		}
	}
	pid, err := syscall.ForkExec(self, []string{self, "clean", dir}, &syscall.ProcAttr{
		Dir: "/",
		Sys: &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}},
	})
	if err != nil {
		return
	}
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(pid, &ws, 0, nil); !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	_ = syscall.Kill(-1, syscall.SIGKILL)
	reapAll(nil)
}

// oomKills reads the container cgroup's OOM kill counter (v1 or v2), 0 if unknown.
func oomKills() int64 {
	for _, p := range []string{"/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return n
			}
		}
	}
	return 0
}
