package code

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// abuseSources are the hostile programs, one per runtime, with the same
// modes where the language can express them (testdata/abuse.*).
var abuseSources = map[string]string{"cpp": "abuse.cpp", "python": "abuse.py", "java": "abuse.java"}

// abuseCase is one hostile run: the mode (first input word), the verdict it
// must end in and a word its message must contain. AC cases print "blocked"
// when the sandbox held and BREACH lines otherwise.
type abuseCase struct {
	mode string
	want engine.Status
	msg  string
}

// abuseJob is one job of hostile runs with its limits (0: the test default).
type abuseJob struct {
	name      string
	cpu, wall time.Duration
	cases     []abuseCase
}

// abuseJobs lists the hostile jobs for pool. The differences between runtimes
// are the runtimes', not the sandbox's: CPython and the JVM ignore SIGXFSZ, so
// an oversized write fails with EFBIG instead of killing them (C++: OLE); the
// JVM cannot fork without exec, so its container-wide memory bomb allocates
// native memory past -Xmx instead of forking.
func abuseJobs(pool string) []abuseJob {
	sparse := engine.StatusAccepted
	if pool == "cpp" {
		sparse = engine.StatusOutputLimitExceeded
	}
	oom := "oomfork" // more than the container's memory over 8 processes
	if pool == "java" {
		oom = "offheap"
	}
	return []abuseJob{{
		// CPU-bound cases end on the CPU limit; a generous wall keeps them
		// there unless the machine is so loaded that the container gets a
		// small share of a core (then the wall limit ends them, also TLE).
		name: "hostile", wall: 30 * time.Second,
		cases: []abuseCase{
			{"ids", engine.StatusAccepted, ""},
			{"forkbomb", engine.StatusTimeLimitExceeded, "time limit"}, // the children's CPU counts
			{"threadbomb", engine.StatusTimeLimitExceeded, "time limit"},
			{"socket", engine.StatusAccepted, ""},
			{"readexp", engine.StatusWrongAnswer, "nothing"}, // input rewritten below
			{"writeout", engine.StatusAccepted, ""},
			{"replaceout", engine.StatusAccepted, ""},
			{"proc", engine.StatusAccepted, ""},
			{"killsup", engine.StatusAccepted, ""},
			{"forge", engine.StatusTimeLimitExceeded, "time limit"},
			{"stderr", engine.StatusAccepted, ""},
			{"sparse", sparse, ""},
			{"nofile", engine.StatusAccepted, ""},
			{"tmpstate", engine.StatusAccepted, ""},
			{"daemon", engine.StatusAccepted, ""},   // leaves a burning, detached process…
			{"leftover", engine.StatusAccepted, ""}, // …which the next case must not see
			{"ids", engine.StatusAccepted, ""},
		},
	}, {
		// Filling the container (up to its run ceiling, 640 MiB for java) costs
		// seconds of page-fault CPU on a VM; the memory limit must decide,
		// so the CPU limit is out of the way.
		name: "memory", cpu: 20 * time.Second, wall: 60 * time.Second,
		cases: []abuseCase{
			{oom, engine.StatusMemoryLimitExceeded, ""}, // the supervisor survives
			{"membomb", engine.StatusMemoryLimitExceeded, ""},
			{"leftover", engine.StatusAccepted, ""},
			{"ids", engine.StatusAccepted, ""},
		},
	}, {
		name: "sleepers", wall: 5 * time.Second,
		cases: []abuseCase{
			{"sleep", engine.StatusTimeLimitExceeded, "wall"},
			{"leftover", engine.StatusAccepted, ""},
			{"ids", engine.StatusAccepted, ""},
		},
	}}
}

// TestAbuse runs escape and abuse attempts in every runtime, as cases of a few
// jobs: each must end in its verdict with nothing escaping, and afterwards an
// ordinary job must still be judged normally with no container left behind.
func TestAbuse(t *testing.T) {
	t.Parallel()
	for _, pool := range []string{"cpp", "python", "java"} {
		t.Run(pool, func(t *testing.T) {
			t.Parallel()
			b := setup(t, pool)
			src := readTestdata(t, abuseSources[pool])
			judge := func(job abuseJob) {
				cases := job.cases
				var tcs []tcase
				for _, c := range cases {
					exp := "blocked"
					if c.want != engine.StatusAccepted {
						exp = "x"
					}
					tcs = append(tcs, tcase{in: c.mode, exp: exp})
				}
				task := b.task(t, pool, src, tcs...)
				if job.cpu > 0 {
					task.Limits.CPUTime = job.cpu
				}
				task.Limits.WallTime = job.wall
				for i, c := range cases {
					if c.mode == "readexp" {
						// It goes for its own expected output: the real host
						// path, and where it would be if it were mounted.
						n := i
						guesses := "readexp " + task.Cases[n].ExpectedPath + " /exp/" + caseFile(n) + " /in/../exp/" + caseFile(n) +
							" /proc/1/root/exp/" + caseFile(n) + " /user/" + caseFile(n) + ".out /out/" + caseFile(n) + ".out"
						require.NoError(t, os.WriteFile(task.Cases[n].InputPath, []byte(guesses), 0o644))
						require.NoError(t, os.WriteFile(task.Cases[n].ExpectedPath, []byte("SECRET-EXPECTED"), 0o644))
					}
				}
				v := b.run(t, task)
				require.Len(t, v.Cases, len(cases), "%+v", v)
				for i, c := range cases {
					cr := v.Cases[i]
					// assert, not require: one run shows every case that failed.
					assert.Equal(t, c.want, cr.Status, "%s case %d (%s): %+v", job.name, i+1, c.mode, cr)
					assert.Contains(t, cr.Message, c.msg, "%s case %d (%s)", job.name, i+1, c.mode)
					assert.NotContains(t, cr.Message, "BREACH", "%s case %d (%s)", job.name, i+1, c.mode)
					// A TLE reports the time that exceeded its limit.
					switch {
					case cr.Status != engine.StatusTimeLimitExceeded:
					case strings.Contains(cr.Message, "CPU"):
						assert.Greater(t, cr.CPUTime, task.Limits.CPUTime, "%s case %d (%s)", job.name, i+1, c.mode)
					default:
						assert.Greater(t, cr.WallTime, task.Limits.WallTime, "%s case %d (%s)", job.name, i+1, c.mode)
					}
				}
			}
			for _, job := range abuseJobs(pool) {
				judge(job)
			}

			// The executor is healthy afterwards: an ordinary job is judged
			// normally, and nothing is left behind.
			v := b.run(t, b.task(t, pool, readTestdata(t, progs[pool]), tcase{in: "sum 40 2\n", exp: "42\n"}))
			require.Equal(t, engine.StatusAccepted, v.Status, "%+v", v)
			require.NoError(t, b.leftovers(t))
		})
	}
}
