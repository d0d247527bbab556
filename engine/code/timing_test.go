package code

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine/code/timing"
)

// nearLimit is the burner level closest below the limit: its 2 % margin is
// all the runtime may spend after the burner's last clock reading.
const nearLimit = 98

// TestCPUTimeVerdicts is the short CI version of `kece-bench timing`: burners
// that stop at 90 and 95 % of the CPU limit by their own clock must be AC,
// at 98 % AC or a TLE whose reported CPU time is over the limit (see below),
// burners told to run to 102 and 110 % must be TLE, and no verdict may
// contradict the CPU time it reports. A C++ burner whose forked child burns
// the time, and one with two burning threads, prove that children and
// threads count. The limits are short: 2 % of each is above what the
// runtime spends after the burner's last clock reading on a quiet machine
// (process teardown: C++ 1–6 ms, CPython 5–8 ms, the JVM 5–15 ms plus its
// 10 ms clock step), program CPU like any other, but not on a loaded CI
// machine (C++ with two threads 13 ms, the JVM 40–90 ms seen).
func TestCPUTimeVerdicts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pool   string
		limit  time.Duration
		rounds int
		modes  []string
	}{
		{"cpp", 600 * time.Millisecond, 2, []string{"self", "child", "threads"}},
		{"python", time.Second, 2, []string{"self"}},
		{"java", 2 * time.Second, 2, []string{"self"}},
	} {
		t.Run(tc.pool, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.pool)
			burner, err := timing.ForPool(tc.pool)
			require.NoError(t, err)
			runs := timing.Plan(tc.rounds, tc.modes)
			var tcs []tcase
			for _, r := range runs {
				tcs = append(tcs, tcase{in: r.Input(tc.limit), exp: r.Expected(tc.limit)})
			}
			task := b.task(t, tc.pool, burner.Source, tcs...)
			task.Limits.CPUTime = tc.limit
			// The wall clock is a separate limit (tested with the sleepers of
			// TestVerdicts); a generous one keeps a shared CI machine's load
			// from turning an under-limit burner into a wall TLE.
			task.Limits.WallTime = time.Minute
			task.Checker = burner.Checker()
			v := b.run(t, task)
			require.Len(t, v.Cases, len(runs), "%+v", v)
			var bad []string
			var total timing.Stats
			for i, r := range runs {
				o := timing.Judge(tc.limit, r, v.Cases[i])
				total.Add(tc.limit, o)
				if o.Contradiction == timing.UnderLimitTLE && r.Percent == nearLimit {
					// Judge checks first that a CPU TLE reports more than
					// the limit, so this verdict agrees with its time: the
					// runtime spent more than the 2 % margin after the
					// burner's last reading (JVM teardown under a loaded CI
					// machine: 40–90 ms seen). kece-bench timing counts it;
					// here it is logged, not failed.
					t.Logf("case %d %s %d%%: TLE at %s, over the limit after the burner stopped", i+1, r.Mode, r.Percent, o.Reported)
					continue
				}
				if o.Contradiction != "" {
					bad = append(bad, fmt.Sprintf("case %d %s %d%%: %s %s reported %s (%s)",
						i+1, r.Mode, r.Percent, o.Contradiction, o.Status, o.Reported, o.Message))
				}
			}
			t.Logf("%s limit=%s %s", tc.pool, tc.limit, total.KV())
			require.Empty(t, bad, "verdicts that contradict the burners' time")
			require.NoError(t, b.leftovers(t))
		})
	}
}
