package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/contracts/machineapi"

	"golang.org/x/sync/errgroup"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code"
	"github.com/kece-oj/kece/engine/code/timing"
)

// runTiming is the CPU-time verdict matrix: burners that stop at 90, 95 and
// 98 % of the limit by their own CPU clock (must be AC) or run to 102 and
// 110 % (must be TLE), in every calibrated runtime and mode, on a quiet host
// and with CPU hogs alongside. It prints per group and in total how many
// verdicts contradicted the time they report (target 0) and the measurement
// error: reported CPU minus the burner's own target for AC runs (the checker
// confirms the burner's clock stopped within its resolution of the target).
func runTiming(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("timing", flag.ContinueOnError)
	runs := fs.Int("runs", 20, "runs per level, per runtime and load (each runtime's \"self\" burner)")
	modeRuns := fs.Int("mode-runs", 0, "runs per level of cpp's extra modes (threads, child); 0: as -runs")
	parallel := fs.Int("parallel", 1, "jobs judged at once (1: one after another; more loads the host itself)")
	pools := fs.String("pools", "cpp,python,java", "runtimes to calibrate")
	loads := fs.String("loads", "quiet,loaded", "quiet (nothing added) and/or loaded (CPU hogs on the host)")
	hogs := fs.Int("hogs", runtime.NumCPU(), "CPU hog processes while loaded")
	cppLimit := fs.Duration("cpp-limit", time.Second, "CPU limit for cpp")
	pyLimit := fs.Duration("python-limit", time.Second, "CPU limit for python")
	javaLimit := fs.Duration("java-limit", 2*time.Second, "CPU limit for java (its exit and 10 ms clock need a 2 % margin)")
	wall := fs.Duration("wall", 0, "wall limit (0: the engine default, 2 x CPU + 1 s)")
	supervisor := fs.String("supervisor", "", "kece-sandbox-init binary (default: next to this binary)")
	work := fs.String("workspace", filepath.Join(os.TempDir(), "kece-bench-timing"), "host work directory")
	if err := settings.ParseWithEnv(fs, "KECE_BENCH_TIMING_", args, os.Getenv); err != nil {
		return err
	}
	if *runs < 1 || *hogs < 0 || *modeRuns < 0 || *parallel < 1 {
		return errors.New("-runs and -parallel must be at least 1, -mode-runs and -hogs not negative")
	}
	if *modeRuns == 0 {
		*modeRuns = *runs
	}
	m := timingMatrix{parallel: *parallel, hogs: *hogs, wall: *wall, limits: map[string]time.Duration{
		string(machineapi.PoolCpp): *cppLimit, string(machineapi.PoolPython): *pyLimit, string(machineapi.PoolJava): *javaLimit}}
	if err := m.plan(*pools, *runs, *modeRuns); err != nil {
		return err
	}
	var loadList []string
	for _, l := range strings.Split(*loads, ",") {
		if l = strings.TrimSpace(l); l != "quiet" && l != "loaded" {
			return fmt.Errorf("-loads: unknown load %q (quiet, loaded)", l)
		}
		loadList = append(loadList, l)
	}
	sup, err := supervisorPath(*supervisor)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*work, 0o755); err != nil {
		return err
	}
	if m.dir, err = os.MkdirTemp(*work, "run-"); err != nil {
		return err
	}
	defer os.RemoveAll(m.dir)
	if m.x, err = code.New(code.Config{NodeID: "kece-bench-timing", Workspace: filepath.Join(m.dir, "ws"), SupervisorPath: sup}); err != nil {
		return err
	}
	defer m.x.Close()

	fmt.Printf("levels=%v runs_per_level=%d mode_runs_per_level=%d hogs=%d host_cpus=%d parallel=%d wall_limit=%s\n",
		timing.Levels, *runs, *modeRuns, *hogs, runtime.NumCPU(), *parallel, wallName(*wall))
	var total timing.Stats
	start := time.Now()
	for _, load := range loadList {
		s, err := m.run(ctx, load)
		if err != nil {
			return err
		}
		total.Merge(s)
	}
	fmt.Printf("total %s\n", total.KV())
	fmt.Printf("contradictions=%d target_contradictions=0 elapsed_s=%.0f\n", total.Contradictions, time.Since(start).Seconds())
	return nil
}

// supervisorPath is the kece-sandbox-init to use: the one given, else the
// one next to this binary.
func supervisorPath(given string) (string, error) {
	if given != "" {
		return given, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(self), "kece-sandbox-init"), nil
}

// timingMatrix is the verdict matrix's jobs: one per runtime and mode.
type timingMatrix struct {
	x        *code.Executor
	dir      string
	parallel int
	hogs     int
	wall     time.Duration
	limits   map[string]time.Duration
	jobs     []timingCell
}

type timingCell struct {
	b    timing.Burner
	mode string
	runs int
}

// plan lists the jobs of the runtimes in pools: every mode of each runtime's
// burner, runs per level for its own ("self") mode and modeRuns for the others.
func (m *timingMatrix) plan(pools string, runs, modeRuns int) error {
	for _, p := range strings.Split(pools, ",") {
		b, err := timing.ForPool(strings.TrimSpace(p))
		if err != nil {
			return fmt.Errorf("-pools: %w", err)
		}
		if m.limits[b.Pool] <= 0 {
			return fmt.Errorf("-%s-limit must be positive", b.Pool)
		}
		for _, mode := range b.Modes {
			n := runs
			if mode != "self" {
				n = modeRuns
			}
			m.jobs = append(m.jobs, timingCell{b, mode, n})
		}
	}
	return nil
}

// run judges every job under one load (CPU hogs alongside when "loaded"),
// prints its lines per level and per job, and returns the load's total.
func (m *timingMatrix) run(ctx context.Context, load string) (timing.Stats, error) {
	var total timing.Stats
	stop := func() {}
	if load == "loaded" {
		var err error
		if stop, err = startHogs(m.hogs); err != nil {
			return total, err
		}
	}
	results := make([]map[int]timing.Stats, len(m.jobs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(m.parallel)
	for i, j := range m.jobs {
		g.Go(func() error {
			r, err := timingJob(gctx, m.x, m.dir, j.b, j.mode, m.limits[j.b.Pool], m.wall, j.runs)
			if err != nil {
				return fmt.Errorf("%s %s %s: %w", j.b.Pool, j.mode, load, err)
			}
			results[i] = r
			return nil
		})
	}
	err := g.Wait()
	stop()
	if err != nil {
		return total, err
	}
	for i, j := range m.jobs {
		limit := m.limits[j.b.Pool]
		var group timing.Stats
		for _, lv := range timing.Levels {
			s := results[i][lv]
			fmt.Printf("pool=%s mode=%s load=%s limit_ms=%d level=%d %s\n", j.b.Pool, j.mode, load, limit.Milliseconds(), lv, s.KV())
			group.Merge(s)
		}
		fmt.Printf("pool=%s mode=%s load=%s limit_ms=%d level=all %s\n", j.b.Pool, j.mode, load, limit.Milliseconds(), group.KV())
		total.Merge(group)
	}
	return total, nil
}

// timingJob judges one job of runs × levels burner cases (levels interleaved
// so each sees the same conditions) and returns the stats per level.
func timingJob(ctx context.Context, x *code.Executor, dir string, b timing.Burner, mode string, limit, wall time.Duration, runs int) (map[int]timing.Stats, error) {
	rt, err := code.DefaultRuntime(b.Pool)
	if err != nil {
		return nil, err
	}
	plan := timing.Plan(runs, []string{mode})
	cdir, err := os.MkdirTemp(dir, b.Pool+"-"+mode+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(cdir)
	task := engine.Task{
		NodeID: "kece-bench-timing", JobID: filepath.Base(cdir), LeaseEpoch: 1,
		Runtime: rt, Source: []byte(b.Source), Checker: b.Checker(),
		Limits: engine.Limits{CPUTime: limit, WallTime: wall, MemoryBytes: 256 << 20, OutputBytes: 1 << 20},
	}
	for i, r := range plan {
		in, exp := filepath.Join(cdir, fmt.Sprintf("%d.in", i)), filepath.Join(cdir, fmt.Sprintf("%d.out", i))
		if err := os.WriteFile(in, []byte(r.Input(limit)), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(exp, []byte(r.Expected(limit)), 0o644); err != nil {
			return nil, err
		}
		task.Cases = append(task.Cases, engine.Case{ID: fmt.Sprint(i + 1), InputPath: in, ExpectedPath: exp, Weight: 1})
	}
	v, err := x.Execute(ctx, task, engine.NoProgress)
	if err != nil {
		return nil, err
	}
	if v.Status == engine.StatusCompileError {
		return nil, fmt.Errorf("burner did not compile: %s", v.CompileLog)
	}
	if len(v.Cases) != len(plan) {
		return nil, fmt.Errorf("%d case results for %d cases", len(v.Cases), len(plan))
	}
	out := map[int]timing.Stats{}
	for i, r := range plan {
		o := timing.Judge(limit, r, v.Cases[i])
		s := out[r.Percent]
		s.Add(limit, o)
		out[r.Percent] = s
		if o.Contradiction != "" {
			fmt.Fprintf(os.Stderr, "# %s %s %d%%: %s: %s reported_ms=%.1f (%s)\n", b.Pool, mode, r.Percent, o.Contradiction, o.Status,
				float64(o.Reported.Microseconds())/1000, o.Message)
		}
	}
	return out, nil
}

// startHogs starts n busy-looping processes on the host and returns what
// stops them (by pid, each in its own process group).
func startHogs(n int) (func(), error) {
	var cmds []*exec.Cmd
	stop := func() {
		for _, c := range cmds {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			_ = c.Wait()
		}
	}
	for i := 0; i < n; i++ {
		c := exec.Command("/bin/sh", "-c", "while :; do :; done")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("cpu hog: %w", err)
		}
		cmds = append(cmds, c)
	}
	return stop, nil
}

func wallName(d time.Duration) string {
	if d == 0 {
		return "default_2xcpu_plus_1s"
	}
	return d.String()
}
