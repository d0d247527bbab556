package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/contracts/machineapi"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code"
	"github.com/kece-oj/kece/internal/reference"
)

// benchProgram is the trivial C++ program of every sandbox measurement.
var benchProgram = func() string { p, _ := reference.APlusB(string(machineapi.PoolCpp)); return p.Source }()

// runSandbox compares the per-case cost of the code engine (one container per
// job, supervisor inside) with running the same program natively on the host
// and with one container per case through the SDK.
func runSandbox(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	cases := fs.Int("cases", 50, "cases in the engine's job (and native runs)")
	perCase := fs.Int("container-runs", 10, "runs of the one-container-per-case baseline")
	supervisor := fs.String("supervisor", "", "kece-sandbox-init binary (default: next to this binary)")
	work := fs.String("workspace", filepath.Join(os.TempDir(), "kece-bench-sandbox"), "host work directory")
	if err := settings.ParseWithEnv(fs, "KECE_BENCH_SANDBOX_", args, os.Getenv); err != nil {
		return err
	}
	sup, err := supervisorPath(*supervisor)
	if err != nil {
		return err
	}
	spec, err := code.DefaultRuntime(string(machineapi.PoolCpp))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*work, 0o755); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(*work, "run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	tcs, err := sandboxCases(dir, *cases)
	if err != nil {
		return err
	}
	native, err := nativeRuns(ctx, dir, tcs)
	if err != nil {
		return err
	}
	// Baseline 2: one container per case through the SDK (create, start,
	// wait, remove), the program and input bind-mounted.
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return err
	}
	defer cli.Close()
	var perContainer []time.Duration
	for i := 0; i < *perCase && i < len(tcs); i++ {
		start := time.Now()
		if err := containerPerCase(ctx, cli, spec.Image, dir, i); err != nil {
			return fmt.Errorf("container per case: %w", err)
		}
		perContainer = append(perContainer, time.Since(start))
	}
	engineCases, inRun, jobTotal, err := engineRun(ctx, dir, sup, spec, tcs)
	if err != nil {
		return err
	}
	nat, cpc := pct(native, 50), pct(perContainer, 50)
	p50, p95 := pct(engineCases, 50), pct(engineCases, 95)
	fmt.Printf("cases=%d\n", len(engineCases))
	fmt.Printf("native_exec_ms_p50=%.2f\n", ms(nat))
	fmt.Printf("container_per_case_ms_p50=%.1f\n", ms(cpc))
	fmt.Printf("per_case_ms_p50=%.2f\n", ms(p50))
	fmt.Printf("per_case_ms_p95=%.2f\n", ms(p95))
	fmt.Printf("supervisor_run_wall_ms_p50=%.2f\n", ms(pct(inRun, 50)))
	fmt.Printf("job_total_ms=%.0f\n", ms(jobTotal))
	fmt.Printf("ratio_vs_native=%.2f\n", ms(p50)/ms(nat))
	fmt.Printf("speedup_vs_container_per_case=%.1f\n", ms(cpc)/ms(p50))
	fmt.Printf("target_ratio_vs_native_max=2 target_speedup_min=50\n")
	return nil
}

// sandboxCases writes the inputs and expected outputs shared by all three
// measurements.
func sandboxCases(dir string, n int) ([]engine.Case, error) {
	var tcs []engine.Case
	for i := 0; i < n; i++ {
		in, exp := filepath.Join(dir, fmt.Sprintf("%d.in", i)), filepath.Join(dir, fmt.Sprintf("%d.out", i))
		if err := os.WriteFile(in, []byte(fmt.Sprintf("%d %d\n", i, i*7)), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(exp, []byte(fmt.Sprintf("%d\n", i*8)), 0o644); err != nil {
			return nil, err
		}
		tcs = append(tcs, engine.Case{ID: fmt.Sprint(i + 1), InputPath: in, ExpectedPath: exp, Weight: 1})
	}
	return tcs, nil
}

// nativeRuns is baseline 1: the same program compiled and run directly on
// the host, once per case.
func nativeRuns(ctx context.Context, dir string, tcs []engine.Case) ([]time.Duration, error) {
	src := filepath.Join(dir, "main.cpp")
	bin := filepath.Join(dir, "main")
	if err := os.WriteFile(src, []byte(benchProgram), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, "g++", "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("host g++ (needed for the native baseline): %v: %s", err, out)
	}
	var native []time.Duration
	for _, c := range tcs {
		in, err := os.Open(c.InputPath)
		if err != nil {
			return nil, err
		}
		out, err := os.Create(filepath.Join(dir, "native.out"))
		if err != nil {
			in.Close()
			return nil, err
		}
		cmd := exec.CommandContext(ctx, bin)
		cmd.Stdin, cmd.Stdout = in, out
		start := time.Now()
		err = cmd.Run()
		native = append(native, time.Since(start))
		in.Close()
		out.Close()
		if err != nil {
			return nil, fmt.Errorf("native run: %w", err)
		}
	}
	return native, nil
}

// engineRun is the engine: one job, compile once, every case in one
// container. The interval between two progress reports is the whole
// per-case cost seen by the caller (request, run, output read, check);
// inRun is the supervisor's own wall time per case.
func engineRun(ctx context.Context, dir, supervisor string, spec engine.RuntimeSpec, tcs []engine.Case) (perCase, inRun []time.Duration, total time.Duration, err error) {
	x, err := code.New(code.Config{NodeID: "kece-bench", Workspace: filepath.Join(dir, "ws"), SupervisorPath: supervisor})
	if err != nil {
		return nil, nil, 0, err
	}
	defer x.Close()
	task := engine.Task{
		NodeID: "kece-bench", JobID: "bench", LeaseEpoch: 1, Runtime: spec, Source: []byte(benchProgram),
		Limits: engine.Limits{CPUTime: time.Second, MemoryBytes: 256 << 20, OutputBytes: 1 << 20},
		Cases:  tcs,
	}
	var last time.Time
	jobStart := time.Now()
	v, err := x.Execute(ctx, task, engine.ProgressFunc(func(p engine.Progress) {
		now := time.Now()
		if p.Phase == engine.PhaseJudging && p.CasesDone > 0 {
			perCase = append(perCase, now.Sub(last))
		}
		last = now
	}))
	total = time.Since(jobStart)
	if err != nil {
		return nil, nil, 0, err
	}
	if v.Status != engine.StatusAccepted {
		return nil, nil, 0, fmt.Errorf("engine verdict %s (%s), want AC", v.Status, v.Message)
	}
	for _, c := range v.Cases {
		inRun = append(inRun, c.WallTime)
	}
	return perCase, inRun, total, nil
}

func containerPerCase(ctx context.Context, cli *client.Client, image, dir string, i int) error {
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image: image, Cmd: []string{"/bin/sh", "-c", fmt.Sprintf("/w/main < /w/%d.in > /w/pc.out", i)},
			NetworkDisabled: true,
		},
		HostConfig: &container.HostConfig{
			NetworkMode: "none", CapDrop: []string{"ALL"}, ReadonlyRootfs: true,
			Mounts: []mount.Mount{{Type: mount.TypeBind, Source: dir, Target: "/w"}},
		},
	})
	if err != nil {
		return err
	}
	defer cli.ContainerRemove(context.WithoutCancel(ctx), c.ID, client.ContainerRemoveOptions{Force: true})
	wait := cli.ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		return err
	}
	select {
	case r := <-wait.Result:
		if r.StatusCode != 0 {
			return fmt.Errorf("exit %d", r.StatusCode)
		}
	case err := <-wait.Error:
		return err
	}
	return nil
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
