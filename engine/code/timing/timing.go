// Package timing calibrates the code engine's CPU-time verdicts against
// programs that know how much CPU they used.
//
// It owns the burner programs (cpp, python, java) — each reads
// "<mode> <limit_ms> <percent>", spins until its own CPU clock reaches that
// share of the limit and prints the CPU time it measured — and the rules that
// find a verdict contradicting the time it reports. The engine's CI test
// (engine/code TestCPUTimeVerdicts) and `kece-bench timing` share both, so the
// short CI run and the full matrix judge by the same rules.
//
// It depends on package engine only (statuses, checkers, case results) and
// must not import engine/code, control, worker or contracts.
package timing

import (
	"embed"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/kece-oj/kece/engine"
)

//go:embed burners
var sources embed.FS

// Levels are the shares of the CPU limit (percent) the burners run to. Below
// 100 the verdict must be AC, above it TLE.
var Levels = []int{90, 95, 98, 102, 110}

// Burner is one runtime's burner program.
type Burner struct {
	Pool   string
	Source string
	// Modes the program accepts: "self" everywhere; cpp adds "threads" (two
	// burning threads) and "child" (a forked child burns: children count).
	Modes []string
	// Resolution is the step of the burner's own clock: CLOCK_PROCESS_CPUTIME_ID
	// is exact, OpenJDK 17's getProcessCpuTime reads times(2) in 10 ms steps.
	Resolution time.Duration
}

// slack covers what a burner's clock may move between its last check and
// the reading it prints: microseconds of work, but on a loaded VM an
// interrupt or stolen vCPU time charged to the task can add milliseconds.
// With two burning threads (cpp "threads") the process clock a thread reads
// leaves out what the other, running on another CPU, used since its last
// scheduler tick, which the final reading after the join includes: up to a
// tick more (4–10 ms, by the kernel's HZ). A loaded CI run printed 11.65 ms
// over the target in that mode, so the slack is 20 ms: still under 4 % of
// the shortest target (90 % of 600 ms).
const slack = 20 * time.Millisecond

var burners = []struct {
	pool, file string
	modes      []string
	resolution time.Duration
}{
	{"cpp", "burners/burn.cpp", []string{"self", "threads", "child"}, 0},
	{"python", "burners/burn.py", []string{"self"}, 0},
	{"java", "burners/burn.java", []string{"self"}, 10 * time.Millisecond},
}

// Burners returns the burner of every calibrated runtime.
func Burners() []Burner {
	out := make([]Burner, 0, len(burners))
	for _, b := range burners {
		src, err := sources.ReadFile(b.file)
		if err != nil {
			panic(fmt.Sprintf("embedded burner %s: %v", b.file, err)) // embedded at build time
		}
		out = append(out, Burner{Pool: b.pool, Source: string(src), Modes: b.modes, Resolution: b.resolution})
	}
	return out
}

// ForPool returns the burner of pool.
func ForPool(pool string) (Burner, error) {
	for _, b := range Burners() {
		if b.Pool == pool {
			return b, nil
		}
	}
	return Burner{}, fmt.Errorf("no burner for pool %q (have cpp, python, java)", pool)
}

// Checker is the checker of a burner's cases: the printed self-measured CPU
// time must lie within the burner's clock resolution (plus slack) of the
// target, so an AC also confirms the burner stopped where it was told to.
func (b Burner) Checker() engine.Checker {
	return engine.Checker{Kind: engine.CheckerFloat, AbsTol: float64((b.Resolution + slack).Microseconds())}
}

// Run is one burner run.
type Run struct {
	Mode    string
	Percent int
}

// Target is the CPU time the burner stops at by its own clock.
func (r Run) Target(limit time.Duration) time.Duration {
	return time.Duration(float64(limit) * float64(r.Percent) / 100)
}

// Input is the case input of r under limit.
func (r Run) Input(limit time.Duration) string {
	return fmt.Sprintf("%s %d %d\n", r.Mode, limit.Milliseconds(), r.Percent)
}

// Expected is the case's expected output: the target in microseconds.
func (r Run) Expected(limit time.Duration) string {
	return fmt.Sprintf("%d\n", r.Target(limit).Microseconds())
}

// Contradictions a judged burner run can show.
const (
	// AC although the reported CPU time is over the limit.
	ACOverLimitTime = "ac_over_limit_time"
	// CPU TLE although the reported CPU time is within the limit.
	TLEUnderLimitTime = "tle_under_limit_time"
	// A burner that stopped under the limit judged CPU TLE.
	UnderLimitTLE = "under_limit_tle"
	// A burner that stopped under the limit judged TLE on the wall clock (a
	// separate limit; counted apart because load, not CPU, decides it).
	UnderLimitWallTLE = "under_limit_wall_tle"
	// A burner told to run past the limit not judged TLE.
	OverLimitNotTLE = "over_limit_not_tle"
	// Any other verdict (WA: the burner's clock disagreed with its target; RE).
	UnexpectedStatus = "unexpected_status"
)

// Outcome is one judged burner run.
type Outcome struct {
	Run
	Status   engine.Status
	Wall     bool // the TLE came from the wall limit
	Reported time.Duration
	// Error is reported − target for an AC: what the engine counted beyond
	// what the burner measured itself (its start-up before main is in both).
	Error         time.Duration
	Contradiction string // "" or one of the constants above
	Message       string
}

// Judge classifies one case result of run r under limit.
func Judge(limit time.Duration, r Run, cr engine.CaseResult) Outcome {
	o := Outcome{Run: r, Status: cr.Status, Reported: cr.CPUTime, Message: cr.Message}
	tle := cr.Status == engine.StatusTimeLimitExceeded
	o.Wall = tle && strings.Contains(strings.ToLower(cr.Message), "wall")
	if cr.Status == engine.StatusAccepted {
		o.Error = cr.CPUTime - r.Target(limit)
	}
	switch {
	case cr.Status == engine.StatusAccepted && cr.CPUTime > limit:
		o.Contradiction = ACOverLimitTime
	case tle && !o.Wall && cr.CPUTime <= limit:
		o.Contradiction = TLEUnderLimitTime
	case r.Percent < 100 && tle && o.Wall:
		o.Contradiction = UnderLimitWallTLE
	case r.Percent < 100 && tle:
		o.Contradiction = UnderLimitTLE
	case r.Percent > 100 && !tle:
		o.Contradiction = OverLimitNotTLE
	case cr.Status != engine.StatusAccepted && !tle:
		o.Contradiction = UnexpectedStatus
	}
	return o
}

// Plan lists rounds × Levels × modes runs, interleaved by round so every
// level sees the same conditions over a long job.
func Plan(rounds int, modes []string) []Run {
	var out []Run
	for i := 0; i < rounds; i++ {
		for _, p := range Levels {
			for _, m := range modes {
				out = append(out, Run{Mode: m, Percent: p})
			}
		}
	}
	return out
}

// Stats aggregates outcomes of one group (e.g. a pool, mode, load and level).
type Stats struct {
	Runs, AC, TLE, WallTLE, Contradictions, Unexpected int
	errs                                               []time.Duration // AC: reported − target
	overshoot                                          []time.Duration // CPU TLE: reported − limit
}

// Add counts o (judged under limit).
func (s *Stats) Add(limit time.Duration, o Outcome) {
	s.Runs++
	switch {
	case o.Status == engine.StatusAccepted:
		s.AC++
		s.errs = append(s.errs, o.Error)
	case o.Status == engine.StatusTimeLimitExceeded && o.Wall:
		s.WallTLE++
	case o.Status == engine.StatusTimeLimitExceeded:
		s.TLE++
		s.overshoot = append(s.overshoot, o.Reported-limit)
	}
	switch o.Contradiction {
	case "", UnderLimitWallTLE:
	case UnexpectedStatus:
		s.Unexpected++
	default:
		s.Contradictions++
	}
}

// Merge adds t's counts to s.
func (s *Stats) Merge(t Stats) {
	s.Runs += t.Runs
	s.AC += t.AC
	s.TLE += t.TLE
	s.WallTLE += t.WallTLE
	s.Contradictions += t.Contradictions
	s.Unexpected += t.Unexpected
	s.errs = append(s.errs, t.errs...)
	s.overshoot = append(s.overshoot, t.overshoot...)
}

// KV renders s as key=value pairs: verdict counts, the measurement error of
// AC runs (reported − the burner's own target, ms: mean, min, max, p95
// of |error|) and how far past the limit CPU TLEs were stopped (ms).
func (s Stats) KV() string {
	var b strings.Builder
	fmt.Fprintf(&b, "runs=%d ac=%d tle=%d wall_tle=%d contradictions=%d unexpected=%d",
		s.Runs, s.AC, s.TLE, s.WallTLE, s.Contradictions, s.Unexpected)
	if len(s.errs) > 0 {
		mean, lo, hi := summary(s.errs)
		abs := make([]time.Duration, len(s.errs))
		for i, e := range s.errs {
			abs[i] = max(e, -e)
		}
		fmt.Fprintf(&b, " err_ms_mean=%.2f err_ms_min=%.2f err_ms_max=%.2f err_ms_abs_p95=%.2f", ms(mean), ms(lo), ms(hi), ms(percentile(abs, 95)))
	}
	if len(s.overshoot) > 0 {
		mean, _, hi := summary(s.overshoot)
		fmt.Fprintf(&b, " tle_over_limit_ms_mean=%.2f tle_over_limit_ms_max=%.2f", ms(mean), ms(hi))
	}
	return b.String()
}

func summary(d []time.Duration) (mean, lo, hi time.Duration) {
	lo, hi = time.Duration(math.MaxInt64), time.Duration(math.MinInt64)
	var sum time.Duration
	for _, x := range d {
		sum += x
		lo, hi = min(lo, x), max(hi, x)
	}
	return sum / time.Duration(len(d)), lo, hi
}

func percentile(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
