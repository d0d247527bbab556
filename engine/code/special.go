package code

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/moby/api/types/mount"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code/sandboxinit"
)

// Special judge limits: the checker is the problem's program, not the user's,
// so it gets fixed generous limits.
const (
	checkerCPUTime = 10 * time.Second
	checkerMemory  = 512 << 20
)

// startChecker starts the special judge's own sandbox and compiles it there.
// The user's container never sees expected outputs; this one sees the inputs
// (/in), expected outputs (/exp) and the user's outputs (/user), all read-only.
func (j *job) startChecker(ctx context.Context) error {
	rt := j.task.Checker.SpecialRuntime
	if err := j.x.checkImage(ctx, rt.Image); err != nil {
		return err
	}
	b := func(src, dst string, ro bool) mount.Mount {
		return mount.Mount{Type: mount.TypeBind, Source: filepath.Join(j.dir, src), Target: dst, ReadOnly: ro}
	}
	var err error
	j.checkerSession, err = j.x.startSession(ctx, sessionSpec{
		image: rt.Image, role: "checker", task: &j.task,
		memoryBytes: max(rt.CompileMemoryBytes, checkerMemory+rt.ExtraMemoryBytes),
		mounts:      []mount.Mount{b("cbox", boxDir, false), b("cin", inDir, true), b("exp", expDir, true), b("out", userDir, true)},
	})
	if err != nil {
		return err
	}
	if len(rt.CompileCmd) == 0 {
		return nil
	}
	ok, log, err := j.compile(ctx, j.checkerSession, rt)
	if err != nil {
		return err
	}
	if !ok {
		return engine.Infraf(engine.InfraCheckerFailed, "special judge does not compile: %s", clip(log, 2000))
	}
	return nil
}

// special runs the checker on case i: argv + input, expected, user output.
// Exit 0 accepts, 1 or 2 reject (testlib's WA/PE); anything else, a signal or
// a timeout is a fault of the problem, never the user's WA.
func (j *job) special(ctx context.Context, i int, outName string) (bool, string, error) {
	rt := j.task.Checker.SpecialRuntime
	argv := append(expand(rt.RunCmd, checkerMemory), inDir+"/"+caseFile(i), expDir+"/"+caseFile(i), userDir+"/"+outName)
	res, err := j.checkerSession.run(ctx, sandboxinit.Request{
		Argv:       argv,
		Dir:        boxDir,
		Env:        j.runEnv(),
		UID:        j.runUID,
		GID:        j.runUID,
		LogBytes:   j.x.cfg.RunLogBytes,
		CPUMillis:  checkerCPUTime.Milliseconds(),
		WallMillis: 2 * checkerCPUTime.Milliseconds(),
		FileSize:   16 << 20,
		Processes:  j.x.cfg.ProcessesPerRun,
		Stack:      256 << 20,
		OpenFiles:  j.x.cfg.OpenFiles,
		CleanDir:   tmpDir,
	})
	if err != nil {
		return false, "", err
	}
	msg := clip(strings.TrimSpace(res.Log), 200)
	switch {
	case res.SetupError != "":
		return false, "", engine.Infraf(engine.InfraCheckerFailed, "special judge did not start: %s", res.SetupError)
	case res.CPUExceeded || res.WallExceeded:
		return false, "", engine.Infraf(engine.InfraCheckerFailed, "special judge exceeded its time limit on case %d", i)
	case res.Signal != 0:
		return false, "", engine.Infraf(engine.InfraCheckerFailed, "special judge killed by signal %d on case %d: %s", res.Signal, i, msg)
	case res.ExitCode == 0:
		return true, msg, nil
	case res.ExitCode == 1 || res.ExitCode == 2:
		return false, msg, nil
	}
	return false, "", engine.Infraf(engine.InfraCheckerFailed, "special judge exit code %d on case %d: %s", res.ExitCode, i, fmt.Sprint(msg))
}
