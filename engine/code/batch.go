package code

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code/checker"
	"github.com/kece-oj/kece/engine/code/sandboxinit"
	"github.com/kece-oj/kece/engine/compilecache"
)

// judge is the plan of every code task: the user's sandbox (its compile
// from the cache, or run there), the checker's sandbox started beside the
// compile when the problem has a checker program, then every case.
func (j *job) judge(ctx context.Context) (engine.Verdict, error) {
	t := j.task
	v := engine.Verdict{Status: engine.StatusAccepted}
	for _, c := range t.Cases {
		v.MaxScore += c.Weight
	}
	imageID, err := j.x.checkImage(ctx, t.Runtime.Image)
	if err != nil {
		return v, err
	}
	compiles := len(t.Runtime.CompileCmd) > 0
	var key compilecache.Key
	if compiles {
		start := time.Now()
		var c compiled
		key, c, j.cachedBuild, err = j.cachedCompile(t.Runtime, imageID, "src", "box")
		j.phases.Compile, j.phases.CompileCached = time.Since(start), j.cachedBuild
		if err != nil {
			return v, err
		}
		if j.cachedBuild && !c.ok {
			// A cached compile error needs no sandbox at all.
			v.Status, v.Message, v.CompileLog = engine.StatusCompileError, c.message, c.log
			return v, nil
		}
		v.CompileLog = c.log
	}
	// The checker's sandbox starts and compiles while the user's does.
	ck := j.startCheckerAsync(ctx)
	defer ck.abandon()
	start := time.Now()
	j.phases.SandboxWarm, err = j.useWarm(ctx, imageID)
	if err == nil && !j.phases.SandboxWarm {
		j.userSession, err = j.x.startSession(ctx, sessionSpec{
			image: t.Runtime.Image, role: "user", task: &j.task, memoryBytes: j.startMemory(), mounts: j.mounts("box", j.pipeMounts()...),
			workBytes: j.workBytes, build: j.buildSpace(t.Runtime, "src", "box"),
		})
	}
	j.phases.Sandbox = time.Since(start)
	if err != nil {
		return v, err
	}
	if compiles && !j.cachedBuild {
		j.progress.Report(engine.Progress{Phase: engine.PhaseCompiling, CasesTotal: len(t.Cases)})
		start := time.Now()
		c, err := j.compileRun(ctx, j.userSession, t.Runtime)
		j.phases.Compile += time.Since(start)
		if err != nil {
			return v, err
		}
		j.storeCompile(key, c, "box")
		v.CompileLog = c.log
		if !c.ok {
			v.Status = engine.StatusCompileError
			v.Message = c.message
			return v, nil
		}
	}
	if err := j.holdToRunLimit(ctx, j.userSession); err != nil {
		return v, err
	}
	if err := ck.wait(j); err != nil {
		return v, err
	}
	return j.judgeCases(ctx, v)
}

// judgeCases runs every case (by subtask when the task has them) and sums
// the verdict.
func (j *job) judgeCases(ctx context.Context, v engine.Verdict) (engine.Verdict, error) {
	t := j.task
	j.progress.Report(engine.Progress{Phase: engine.PhaseJudging, CasesTotal: len(t.Cases)})
	var caseTime time.Duration
	run := func(i int) (engine.CaseResult, error) {
		start := time.Now()
		defer func() { caseTime += time.Since(start) }()
		return j.runCase(ctx, i, t.Cases[i])
	}
	defer func() { j.phases.Run = caseTime - j.phases.Check }()
	if len(t.Subtasks) > 0 {
		done := 0
		cases, subs, err := engine.JudgeSubtasks(t, run, func() {
			done++
			j.progress.Report(engine.Progress{Phase: engine.PhaseJudging, CasesDone: done, CasesTotal: len(t.Cases)})
		})
		if err != nil {
			return v, err
		}
		v.Cases, v.Subtasks, v.Score = cases, subs, engine.SumSubtasks(subs)
	} else {
		for i := range t.Cases {
			cr, err := run(i)
			if err != nil {
				return v, err
			}
			v.Cases = append(v.Cases, cr)
			j.progress.Report(engine.Progress{Phase: engine.PhaseJudging, CasesDone: i + 1, CasesTotal: len(t.Cases)})
		}
		v.Score = engine.SumScores(v.Cases)
	}
	v.Status = engine.JobStatus(v.Cases)
	for _, cr := range v.Cases {
		if cr.Status == v.Status && v.Status != engine.StatusAccepted {
			v.Message = fmt.Sprintf("case %s: %s", cr.ID, cr.Status)
			break
		}
	}
	return v, nil
}

func (j *job) runEnv() []string {
	return []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + tmpDir, "TMPDIR=" + tmpDir, "PYTHONDONTWRITEBYTECODE=1"}
}

// wallLimit is the explicit wall limit or twice the CPU limit plus a second.
func (j *job) wallLimit() time.Duration {
	if j.task.Limits.WallTime > 0 {
		return j.task.Limits.WallTime
	}
	return 2*j.task.Limits.CPUTime + time.Second
}

func (j *job) runCase(ctx context.Context, i int, c engine.Case) (engine.CaseResult, error) {
	t := j.task
	switch t.Checker.Kind {
	case engine.CheckerInteractive:
		return j.runInteractive(ctx, i, c)
	case engine.CheckerCommunication:
		return j.runCommunication(ctx, i, c)
	}
	l := t.Limits
	cr := engine.CaseResult{ID: c.ID}
	outName := caseFile(i) + ".out"
	res, err := j.userSession.run(ctx, j.runRequest(i, outName))
	if err != nil {
		return cr, err
	}
	if res.SetupError != "" {
		return cr, runNotStarted(t.Runtime, res.SetupError)
	}
	measured(&cr, res)
	outPath := filepath.Join(j.dir, "out", outName)
	defer os.Remove(outPath)
	stdout, stdoutSize, err := readOutput(outPath, l.OutputBytes)
	if err != nil {
		return cr, err
	}
	// With file output, the checker judges the output file's copy.
	if t.IO.OutputFile != "" {
		defer os.Remove(filepath.Join(j.dir, "out", fileOutName(i)))
	}
	out, size, judgedName, refused, err := j.judgedOutput(i, res, stdout, stdoutSize, outName)
	if err != nil {
		return cr, err
	}
	seen := runSeen{res: res, outputBytes: max(stdoutSize, size), outputLimit: l.OutputBytes, memLimit: j.memLimit}
	// Only a failing run can be a runtime's out-of-memory report: a program
	// that prints "MemoryError" and exits 0 is judged on its output.
	if res.Signal != 0 || res.ExitCode != 0 {
		seen.oomReport = j.memoryFailure(res.Log, stdout, outPath)
	}
	if cr.Status, cr.Message = runFailure(seen); cr.Status != "" {
		return cr, nil
	}
	if refused != "" {
		// A missing or refused output file is a wrong answer, not a crash.
		cr.Status, cr.Message = engine.StatusWrongAnswer, refused
		return cr, nil
	}
	checkStart := time.Now()
	fraction, msg, err := j.check(ctx, i, c, out, judgedName)
	j.phases.Check += time.Since(checkStart)
	if err != nil {
		return cr, err
	}
	cr.Status = engine.CaseStatus(fraction)
	cr.Score = engine.CaseScore(fraction, c.Weight)
	cr.Fraction = min(max(fraction, 0), 1)
	cr.Message = msg
	return cr, nil
}

// runRequest is the supervisor request that runs the program on case i,
// its stdout going to outName.
func (j *job) runRequest(i int, outName string) sandboxinit.Request {
	t := j.task
	l := t.Limits
	stack := l.StackBytes
	if stack == 0 {
		stack = min(l.MemoryBytes, 1<<30)
	}
	var as int64
	if t.Runtime.AddressSpaceExtraBytes > 0 {
		as = j.memLimit + t.Runtime.AddressSpaceExtraBytes
	}
	req := sandboxinit.Request{
		Argv:         expand(t.Runtime.RunCmd, l.MemoryBytes),
		Dir:          boxDir,
		Env:          j.runEnv(),
		UID:          j.runUID,
		GID:          j.runUID,
		Stdin:        inDir + "/" + caseFile(i),
		Stdout:       outDir + "/" + outName,
		LogBytes:     j.x.cfg.RunLogBytes,
		CPUMillis:    l.CPUTime.Milliseconds(),
		WallMillis:   j.wallLimit().Milliseconds(),
		AddressSpace: as,
		FileSize:     l.OutputBytes + 1,
		Processes:    j.x.cfg.ProcessesPerRun,
		Stack:        stack,
		OpenFiles:    j.x.cfg.OpenFiles,
		CleanDir:     tmpDir,
	}
	j.ioRequest(&req, i)
	return req
}

// readOutput reads a stdout file written in the sandbox, refusing anything but
// a regular file, and at most limit+1 bytes.
func readOutput(path string, limit int64) ([]byte, int64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, engine.Infraf(engine.InfraInternal, "program output: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, 0, engine.Infraf(engine.InfraInternal, "program output %s is not a regular file: refused", path)
	}
	if st.Size() > limit {
		return nil, st.Size(), nil
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, 0, engine.Infraf(engine.InfraInternal, "program output: %w", err)
	}
	return b, int64(len(b)), nil
}

// check returns the fraction of the case weight the output earns (the
// built-in checkers give 0 or 1; a special checker may give anything between).
func (j *job) check(ctx context.Context, i int, c engine.Case, out []byte, outName string) (float64, string, error) {
	ck := j.task.Checker
	if ck.Kind == engine.CheckerSpecial {
		o, err := j.special(ctx, i, outName)
		return o.Fraction, o.Message, err
	}
	exp, err := os.ReadFile(c.ExpectedPath)
	if err != nil {
		return 0, "", engine.Infraf(engine.InfraCorruptInput, "case %s expected output: %w", c.ID, err)
	}
	var ok bool
	var msg string
	switch ck.Kind {
	case engine.CheckerExact:
		ok, msg = checker.Exact(exp, out)
	case engine.CheckerFloat:
		ok, msg = checker.Float(exp, out, ck.AbsTol, ck.RelTol)
	default:
		ok, msg = checker.Tolerant(exp, out)
	}
	if ok {
		return 1, msg, nil
	}
	return 0, msg, nil
}
