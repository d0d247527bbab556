package code

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code/sandboxinit"
)

// TestRunFailureRules: what the sandbox saw of a run decides its status in
// one order, whatever else happened on the way.
func TestRunFailureRules(t *testing.T) {
	t.Parallel()
	const mem = 64 << 20
	base := runSeen{outputLimit: 1 << 20, memLimit: mem}
	with := func(f func(s *runSeen)) runSeen { s := base; f(&s); return s }
	for _, tc := range []struct {
		name   string
		seen   runSeen
		status engine.Status
		msg    string
	}{
		{"clean exit goes to the checker", base, "", ""},
		{"output over the limit beats everything", with(func(s *runSeen) {
			s.outputBytes = 1<<20 + 1
			s.res = sandboxinit.Result{OOMKilled: true, CPUExceeded: true, Signal: 9}
		}), engine.StatusOutputLimitExceeded, "output limit exceeded"},
		{"output at the limit is fine", with(func(s *runSeen) { s.outputBytes = 1 << 20 }), "", ""},
		{"memory before time", with(func(s *runSeen) {
			s.res = sandboxinit.Result{OOMKilled: true, CPUExceeded: true, MaxRSSKB: 70000}
		}), engine.StatusMemoryLimitExceeded, "peak memory 70000 KiB"},
		{"peak over the limit without a kill", with(func(s *runSeen) { s.res.MaxRSSKB = mem/1024 + 1 }),
			engine.StatusMemoryLimitExceeded, "peak memory 65537 KiB"},
		{"peak at the limit is fine", with(func(s *runSeen) { s.res.MaxRSSKB = mem / 1024 }), "", ""},
		{"cpu before wall", with(func(s *runSeen) { s.res = sandboxinit.Result{CPUExceeded: true, WallExceeded: true, Signal: 9} }),
			engine.StatusTimeLimitExceeded, "CPU time limit exceeded"},
		{"wall", with(func(s *runSeen) { s.res = sandboxinit.Result{WallExceeded: true, Signal: 9} }),
			engine.StatusTimeLimitExceeded, "wall time limit exceeded"},
		{"a runtime's memory report", with(func(s *runSeen) { s.res.ExitCode = 1; s.oomReport = "MemoryError" }),
			engine.StatusMemoryLimitExceeded, "out of memory: MemoryError"},
		{"SIGXCPU alone is a runtime error", with(func(s *runSeen) { s.res.Signal = int(syscall.SIGXCPU) }),
			engine.StatusRuntimeError, "killed by signal 24 (CPU time limit exceeded)"},
		{"SIGXFSZ is the output limit", with(func(s *runSeen) { s.res.Signal = int(syscall.SIGXFSZ) }),
			engine.StatusOutputLimitExceeded, "output limit exceeded"},
		{"a signal with its log", with(func(s *runSeen) { s.res = sandboxinit.Result{Signal: 11, Log: "  boom \n"} }),
			engine.StatusRuntimeError, "killed by signal 11 (segmentation fault): boom"},
		{"an exit code", with(func(s *runSeen) { s.res.ExitCode = 3 }), engine.StatusRuntimeError, "exit code 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, msg := runFailure(tc.seen)
			require.Equal(t, tc.status, status)
			require.Equal(t, tc.msg, msg)
		})
	}
}
