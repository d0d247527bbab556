package code

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// TestAbuse runs escape and abuse attempts as cases of one job: each must end
// in the expected verdict, and the final cases prove the sandbox (and the
// supervisor) are still healthy afterwards.
func TestAbuse(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	cases := []struct {
		in, exp string
		want    engine.Status
		msg     string
	}{
		{"ids", "blocked", engine.StatusAccepted, ""},
		{"forkbomb", "x", engine.StatusTimeLimitExceeded, "CPU"},
		{"socket", "blocked", engine.StatusAccepted, ""},
		{"readexp", "SECRET-EXPECTED", engine.StatusWrongAnswer, "nothing"}, // input rewritten below
		{"writeout", "blocked", engine.StatusAccepted, ""},
		{"replaceout", "blocked", engine.StatusAccepted, ""},
		{"proc", "blocked", engine.StatusAccepted, ""},
		{"killsup", "blocked", engine.StatusAccepted, ""},
		{"forge", "x", engine.StatusTimeLimitExceeded, ""},
		{"stderr", "blocked", engine.StatusAccepted, ""},
		{"sparse", "x", engine.StatusOutputLimitExceeded, ""},
		{"oomfork", "blocked", engine.StatusMemoryLimitExceeded, ""}, // the container OOMs; the supervisor survives
		{"nofile", "blocked", engine.StatusAccepted, ""},
		{"tmpstate", "blocked", engine.StatusAccepted, ""},
		{"ids", "blocked", engine.StatusAccepted, ""},
	}
	var tcs []tcase
	for _, c := range cases {
		tcs = append(tcs, tcase{in: c.in, exp: c.exp})
	}
	task := b.task(t, "cpp", readTestdata(t, "abuse.cpp"), tcs...)
	// CPU-bound cases (fork bomb included: the container's CPU counter
	// covers all its processes) end on the CPU limit; a generous wall keeps
	// the memory-heavy oomfork case deterministic on a loaded machine.
	task.Limits.WallTime = 30 * time.Second
	// readexp goes for its own expected output: the real host path, and where
	// it would be if it were mounted anywhere.
	guesses := "readexp " + task.Cases[3].ExpectedPath + " /exp/3 /in/../exp/3 /proc/1/root/exp/3 /user/3.out /out/3.out"
	require.NoError(t, os.WriteFile(task.Cases[3].InputPath, []byte(guesses), 0o644))
	v := b.run(t, task)
	for i, c := range cases {
		cr := v.Cases[i]
		require.Equal(t, c.want, cr.Status, "case %d (%s): %+v", i+1, strings.Fields(c.in)[0], cr)
		require.Contains(t, cr.Message, c.msg, "case %d", i+1)
		require.NotContains(t, cr.Message, "BREACH", "case %d", i+1)
	}
	// Forged statistics never reach the verdict: the forge case ran a full
	// CPU second under the supervisor's clock.
	require.Greater(t, v.Cases[8].CPUTime.Milliseconds(), int64(900))
	require.NoError(t, b.leftovers(t))
}
