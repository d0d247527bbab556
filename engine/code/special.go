package code

import (
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/mount"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code/checker"
	"github.com/kece-oj/kece/engine/code/sandboxinit"
	"github.com/kece-oj/kece/engine/compilecache"
)

// checkerMemory is the special judge's memory: the checker is the problem's
// program, not the user's, so it gets a fixed generous limit (its time limit
// is Config.CheckerTime).
const checkerMemory = 512 << 20

// pendingChecker is a checker sandbox starting in the background.
type pendingChecker struct {
	done   chan struct{}
	cancel context.CancelFunc
	err    error
	phases engine.Phases // Checker and CheckerCached, written before done closes
}

// wait waits for the checker's sandbox and compile and says how they ended.
func (p *pendingChecker) wait(j *job) error {
	if p == nil {
		return nil
	}
	<-p.done
	j.phases.Checker, j.phases.CheckerCached = p.phases.Checker, p.phases.CheckerCached
	return p.err
}

// abandon stops a start still under way (the job ended early: a compile
// error) and waits for it, so the job's cleanup sees every sandbox.
func (p *pendingChecker) abandon() {
	if p != nil {
		p.cancel()
		<-p.done
	}
}

// startCheckerAsync starts the checker program's sandbox and its compile
// in the background when the task has a checker program (nil otherwise),
// so that they overlap the user's sandbox and compile.
func (j *job) startCheckerAsync(ctx context.Context) *pendingChecker {
	if !j.task.Checker.HasProgram() {
		return nil
	}
	cctx, cancel := context.WithCancel(ctx)
	p := &pendingChecker{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(p.done)
		start := time.Now()
		p.err = j.startChecker(cctx, &p.phases)
		p.phases.Checker = time.Since(start)
	}()
	return p
}

// startChecker starts the special judge's own sandbox and compiles it there,
// or restores its build from the node's compile cache: a checker is compiled
// once per node, not once per job. The user's container never sees expected
// outputs; this one sees the inputs (/in), expected outputs (/exp) and the
// user's outputs (/user), all read-only, and /out where the supervisor
// creates the checker's stdout files. It runs beside the user's compile and
// writes only checkerSession and ph.
func (j *job) startChecker(ctx context.Context, ph *engine.Phases) error {
	rt := j.task.Checker.SpecialRuntime
	imageID, err := j.x.checkImage(ctx, rt.Image)
	if err != nil {
		return err
	}
	compiles := len(rt.CompileCmd) > 0
	var key compilecache.Key
	var c compiled
	if compiles {
		if key, c, ph.CheckerCached, err = j.cachedCompile(rt, imageID, "csrc", "cbox"); err != nil {
			return err
		}
		if ph.CheckerCached && !c.ok {
			return checkerCompileError(c)
		}
	}
	b := func(src, dst string, ro bool) mount.Mount {
		return mount.Mount{Type: mount.TypeBind, Source: filepath.Join(j.dir, src), Target: dst, ReadOnly: ro}
	}
	j.checkerSession, err = j.x.startSession(ctx, sessionSpec{
		image: rt.Image, role: "checker", task: &j.task,
		memoryBytes: max(rt.CompileMemoryBytes, checkerMemory+rt.ExtraMemoryBytes),
		mounts: append([]mount.Mount{b("cbox", boxDir, false), b("cin", inDir, true), b("exp", expDir, true),
			b("out", userDir, true), b("cout", outDir, false)}, j.pipeMounts()...),
		build: j.buildSpace(rt, "csrc", "cbox"),
	})
	if err != nil || !compiles || ph.CheckerCached {
		return err
	}
	if c, err = j.compileRun(ctx, j.checkerSession, rt); err != nil {
		return err
	}
	j.storeCompile(key, c, "cbox")
	if !c.ok {
		return checkerCompileError(c)
	}
	return nil
}

// checkerCompileError is the problem's fault of a checker that does not compile.
func checkerCompileError(c compiled) error {
	return engine.Infraf(engine.InfraCheckerFailed, "special judge does not compile: %s", clip(c.log, 2000))
}

// special runs the checker on case i. The protocol decides the argv order
// (legacy: input expected output; testlib and score: input output expected)
// and what its exit code and output mean (checker.Interpret). A signal, a
// time-out, a start failure or an answer outside the protocol is a fault of
// the problem (CHECKER_FAILED), never the user's WA.
func (j *job) special(ctx context.Context, i int, outName string) (checker.Outcome, error) {
	ck := j.task.Checker
	rt := ck.SpecialRuntime
	in, exp, user := inDir+"/"+caseFile(i), expDir+"/"+caseFile(i), userDir+"/"+outName
	argv := expand(rt.RunCmd, checkerMemory)
	if ck.SpecialProtocol == engine.ProtocolLegacy || ck.SpecialProtocol == "" {
		argv = append(argv, in, exp, user)
	} else {
		argv = append(argv, in, user, exp)
	}
	stdoutName := caseFile(i) + ".chk"
	res, err := j.checkerSession.run(ctx, sandboxinit.Request{
		Argv:       argv,
		Dir:        boxDir,
		Env:        j.runEnv(),
		UID:        j.runUID,
		GID:        j.runUID,
		Stdout:     outDir + "/" + stdoutName,
		LogBytes:   j.x.cfg.RunLogBytes,
		CPUMillis:  j.x.cfg.CheckerTime.Milliseconds(),
		WallMillis: 2 * j.x.cfg.CheckerTime.Milliseconds(),
		FileSize:   16 << 20,
		Processes:  j.x.cfg.ProcessesPerRun,
		Stack:      256 << 20,
		OpenFiles:  j.x.cfg.OpenFiles,
		CleanDir:   tmpDir,
	})
	if err != nil {
		return checker.Outcome{}, err
	}
	stdoutPath := filepath.Join(j.dir, "cout", stdoutName)
	defer os.Remove(stdoutPath)
	msg := clip(strings.TrimSpace(res.Log), 200)
	switch {
	case res.SetupError != "":
		return checker.Outcome{}, engine.Infraf(engine.InfraCheckerFailed, "special judge did not start: %s", res.SetupError)
	case res.CPUExceeded || res.WallExceeded:
		return checker.Outcome{}, engine.Infraf(engine.InfraCheckerFailed, "special judge exceeded its time limit on case %d", i)
	case res.Signal != 0:
		return checker.Outcome{}, engine.Infraf(engine.InfraCheckerFailed, "special judge killed by signal %d on case %d: %s", res.Signal, i, msg)
	}
	stdout, err := readBounded(stdoutPath, checkerStdoutBytes)
	if err != nil {
		return checker.Outcome{}, err
	}
	o, err := checker.Interpret(ck.SpecialProtocol, checker.Run{ExitCode: res.ExitCode, Stdout: stdout, Stderr: res.Log}, ck.MaxPoints)
	if err != nil {
		return checker.Outcome{}, engine.Infraf(engine.InfraCheckerFailed, "case %d: %w", i, err)
	}
	return o, nil
}

// checkerStdoutBytes bounds what is read of a checker's stdout: a score
// needs a few bytes, a message is cut at checker.MaxMessageBytes anyway.
const checkerStdoutBytes = 64 << 10

// readBounded reads at most n bytes of a file the supervisor created
// (a regular file, not followed through a link).
func readBounded(path string, n int64) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", engine.Infraf(engine.InfraInternal, "special judge output: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", engine.Infraf(engine.InfraInternal, "special judge output %s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, n))
	if err != nil {
		return "", engine.Infraf(engine.InfraInternal, "special judge output: %w", err)
	}
	return string(b), nil
}

// checkerFileRE is a safe file name for an extra checker file: no path, no
// leading dot.
var checkerFileRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}$`)

// validateSpecial refuses a special checker the executor cannot run as asked.
func validateSpecial(ck engine.Checker) error {
	if ck.SpecialProtocol != "" && !ck.SpecialProtocol.Valid() {
		return engine.Infraf(engine.InfraConfig, "special judge protocol %q is not legacy, testlib or score", ck.SpecialProtocol)
	}
	if ck.MaxPoints < 0 || math.IsNaN(ck.MaxPoints) || math.IsInf(ck.MaxPoints, 0) {
		return engine.Infraf(engine.InfraConfig, "special judge maxPoints %v must be positive", ck.MaxPoints)
	}
	seen := map[string]bool{ck.SpecialRuntime.SourceFile: true}
	for _, f := range ck.SpecialFiles {
		if !checkerFileRE.MatchString(f.Name) || seen[f.Name] {
			return engine.Infraf(engine.InfraCheckerFailed, "special judge file name %q is unsafe, repeated or the source's own", f.Name)
		}
		seen[f.Name] = true
	}
	return nil
}
