package code

// The rules that turn what the sandbox saw of one run into a case status:
// pure functions, table-tested in verdict_rules_test.go.

import (
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code/sandboxinit"
)

// stdoutScanBytes is how much of a failing run's stdout is searched for
// memory markers: the JVM reports a failed start there, before any output of
// the program.
const stdoutScanBytes = 4 << 10

// memoryFailure returns the runtime's own out-of-memory report of a failing
// run (the marker line, bounded), searched in stderr and in the head of
// stdout, or "" when there is none. out is the stdout already
// read (nil when it was too large to read); outPath is read otherwise.
func (j *job) memoryFailure(stderr string, out []byte, outPath string) string {
	rt := j.task.Runtime
	if len(rt.MemoryErrorMarkers) == 0 {
		return ""
	}
	if msg := memoryMarker(stderr, rt); msg != "" {
		return msg
	}
	head := out
	if head == nil {
		head, _ = readHead(outPath, stdoutScanBytes)
	}
	return memoryMarker(string(head[:min(len(head), stdoutScanBytes)]), rt)
}

// memoryMarker finds the first line of text holding one of the spec's memory
// markers and none of its exceptions; it returns that line, after the JVM's
// headline when the line before is one, bounded.
func memoryMarker(text string, rt engine.RuntimeSpec) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if !containsAny(l, rt.MemoryErrorMarkers) || containsAny(l, rt.MemoryErrorExceptions) {
			continue
		}
		msg := strings.TrimSpace(l)
		// "Error occurred during initialization of VM" precedes the reason.
		if i > 0 && strings.Contains(lines[i-1], "Error occurred during initialization of VM") {
			msg = strings.TrimSpace(lines[i-1]) + ": " + msg
		}
		return clip(msg, 200)
	}
	return ""
}

// readHead reads at most n bytes of a regular file (no symlinks).
func readHead(path string, n int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, n))
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if sub != "" && strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// clip bounds s to about n bytes of valid UTF-8 (program output is arbitrary bytes).
func clip(s string, n int) string {
	if len(s) > n {
		s = s[:n] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// runSeen is what the sandbox and the host saw of one program run.
type runSeen struct {
	res sandboxinit.Result
	// outputBytes is the larger of the stdout and the judged output file's
	// sizes; outputLimit the problem's bound on both.
	outputBytes, outputLimit int64
	// memLimit is what the peak RSS is judged against (the problem's limit
	// plus the runtime's extra memory).
	memLimit int64
	// oomReport is the runtime's own out-of-memory report of a failing run
	// ("" when there is none, or the run did not fail).
	oomReport string
}

// runFailure is the status and message of a run that failed before its
// output is checked, or "" for a run whose output the checker decides.
// The order is the rule: output past the limit first (runtimes that ignore
// SIGXFSZ, the JVM and CPython, keep running or fail later, but they did
// exceed it); then memory before time (a program that went over its memory
// limit did so whatever else happened, and filling memory costs CPU, so one
// killed for time on the way is still an MLE); then the supervisor's one
// CPU measurement (the program and its children, never the supervisor —
// the same figure is reported, and a SIGXCPU only counts through it: the
// RLIMIT_CPU backstop sits above the limit, and a program raising it
// itself is an RE); then wall time, a runtime's memory report, SIGXFSZ,
// and last any other signal or exit code.
func runFailure(s runSeen) (engine.Status, string) {
	res := s.res
	switch {
	case s.outputBytes > s.outputLimit:
		return engine.StatusOutputLimitExceeded, "output limit exceeded"
	case res.OOMKilled || res.MaxRSSKB*1024 > s.memLimit:
		return engine.StatusMemoryLimitExceeded, fmt.Sprintf("peak memory %d KiB", res.MaxRSSKB)
	case res.CPUExceeded:
		return engine.StatusTimeLimitExceeded, "CPU time limit exceeded"
	case res.WallExceeded:
		return engine.StatusTimeLimitExceeded, "wall time limit exceeded"
	case s.oomReport != "":
		return engine.StatusMemoryLimitExceeded, "out of memory: " + s.oomReport
	case res.Signal == int(syscall.SIGXFSZ):
		return engine.StatusOutputLimitExceeded, "output limit exceeded"
	}
	var msg string
	switch {
	case res.Signal != 0:
		msg = fmt.Sprintf("killed by signal %d (%s)", res.Signal, syscall.Signal(res.Signal))
	case res.ExitCode != 0:
		msg = fmt.Sprintf("exit code %d", res.ExitCode)
	default:
		return "", ""
	}
	if tail := strings.TrimSpace(res.Log); tail != "" {
		msg += ": " + clip(tail, 200)
	}
	return engine.StatusRuntimeError, msg
}

// measured fills a case result with what the supervisor measured of the
// program's run: CPU and wall time, peak RSS, exit code or signal.
func measured(cr *engine.CaseResult, res sandboxinit.Result) {
	cr.CPUTime = time.Duration(res.CPUMicros) * time.Microsecond
	cr.WallTime = time.Duration(res.WallMicros) * time.Microsecond
	cr.MemoryKB = res.MaxRSSKB
	cr.ExitCode = res.ExitCode
	cr.Signal = res.Signal
}

// runNotStarted is the infrastructure fault of a program that did not
// start: the image's run command is wrong, never the user's RE.
func runNotStarted(rt engine.RuntimeSpec, setupError string) error {
	return engine.Infraf(engine.InfraConfig, "run command of %s (image %s) did not start: %s", rt.Pool, rt.Image, setupError)
}
