package code

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/mount"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code/sandboxinit"
)

// Communication tasks (docs/engine.md "Communication tasks") generalise
// interactive problems: the manager (the problem's program, in the checker's
// sandbox) talks to N copies of the user's program, each in a sandbox of its
// own, so each has its own limits and its own CPU and memory accounting and
// none sees another's files. Process 1 runs in the job's user sandbox (where
// the program was compiled); processes 2..N in sandboxes started on the first
// case, with the build mounted read-only. Process k gets its stdin from and
// its stdout to the manager through two engine-made FIFOs, and its index k as
// its only argument; the manager gets them as descriptors 3+2(k-1) (it
// writes to process k) and 4+2(k-1) (it reads from process k).

// startProcesses starts the sandboxes of processes 2..N once per job.
func (j *job) startProcesses(ctx context.Context) error {
	t := j.task
	for k := 2; k <= t.Checker.Processes; k++ {
		s, err := j.x.startSession(ctx, sessionSpec{
			image: t.Runtime.Image, role: "user-" + strconv.Itoa(k), task: &j.task, memoryBytes: j.memLimit,
			mounts: append([]mount.Mount{{Type: mount.TypeBind, Source: filepath.Join(j.dir, "box"), Target: boxDir, ReadOnly: true}},
				j.pipeMounts()...),
		})
		if err != nil {
			return err
		}
		j.procSessions = append(j.procSessions, s)
	}
	return nil
}

// runCommunication runs case i: the manager and every process at once, then
// decides the case by the rule of interactive problems, applied to the first
// process (by index) that failed while the manager was still there, else to
// the first that failed at all, else to any.
func (j *job) runCommunication(ctx context.Context, i int, c engine.Case) (engine.CaseResult, error) {
	t := j.task
	cr := engine.CaseResult{ID: c.ID}
	n := t.Checker.Processes
	if len(j.procSessions) < n-1 {
		if err := j.startProcesses(ctx); err != nil {
			return cr, err
		}
	}
	sessions := append([]*session{j.userSession}, j.procSessions...)
	toutName := caseFile(i) + ".tout"
	toutPath := filepath.Join(j.dir, "cout", toutName)
	if err := writeOwned(toutPath, nil, j.compileUID); err != nil {
		return cr, hostErr("manager result file", err)
	}
	defer os.Remove(toutPath)
	open := pipeOpenTimeout.Milliseconds()
	mgrCPU := j.interactorTime()
	rt := t.Checker.SpecialRuntime
	mgr := sandboxinit.Request{
		Argv: append(expand(rt.RunCmd, checkerMemory), inDir+"/"+caseFile(i), outDir+"/"+toutName, expDir+"/"+caseFile(i), strconv.Itoa(n)),
		Dir:  boxDir, Env: j.runEnv(), UID: j.compileUID, GID: j.compileUID,
		LogBytes: j.x.cfg.RunLogBytes, CPUMillis: mgrCPU.Milliseconds(),
		WallMillis: (j.wallLimit() + mgrCPU).Milliseconds(),
		FileSize:   16 << 20, Processes: j.x.cfg.ProcessesPerRun, Stack: 256 << 20, OpenFiles: j.x.cfg.OpenFiles,
		CleanDir: tmpDir, Pipes: &sandboxinit.RunPipes{OpenMillis: open},
	}
	reqs := make([]sandboxinit.Request, n)
	for k := 1; k <= n; k++ {
		name := fmt.Sprintf("%s.%d.", caseFile(i), k)
		for _, end := range []string{"a", "b"} { // a: manager → k, b: k → manager
			p := filepath.Join(j.dir, pipeSub, name+end)
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				return cr, hostErr("communication pipe", err)
			}
			defer os.Remove(p)
		}
		to, from := pipeDir+"/"+name+"a", pipeDir+"/"+name+"b"
		mgr.Pipes.Fds = append(mgr.Pipes.Fds, sandboxinit.PipeFD{Path: to, Write: true}, sandboxinit.PipeFD{Path: from})
		reqs[k-1] = j.userRequest(i)
		reqs[k-1].Argv = append(reqs[k-1].Argv, strconv.Itoa(k))
		reqs[k-1].Pipes = &sandboxinit.RunPipes{Stdin: to, Stdout: from, OpenMillis: open}
	}
	type outcome struct {
		res sandboxinit.Result
		err error
	}
	mgrCh := make(chan outcome, 1)
	go func() {
		res, err := j.checkerSession.run(ctx, mgr)
		mgrCh <- outcome{res, err}
	}()
	chs := make([]chan outcome, n)
	for k := range n {
		chs[k] = make(chan outcome, 1)
		go func() {
			res, err := sessions[k].run(ctx, reqs[k])
			chs[k] <- outcome{res, err}
		}()
	}
	users := make([]sandboxinit.Result, n)
	var firstErr error
	for k := range n {
		o := <-chs[k]
		users[k] = o.res
		if o.err != nil && firstErr == nil {
			firstErr = o.err
		}
	}
	m := <-mgrCh
	if firstErr == nil {
		firstErr = m.err
	}
	if firstErr != nil {
		return cr, firstErr
	}
	for k, u := range users {
		if u.SetupError != "" {
			return cr, engine.Infraf(engine.InfraConfig, "process %d: run command of %s (image %s) did not start: %s", k+1, t.Runtime.Pool, t.Runtime.Image, u.SetupError)
		}
	}
	return j.decideCommunication(cr, c, users, m.res, toutPath, mgrCPU)
}

// decideCommunication picks the process whose outcome counts and applies
// decideInteraction to it. The case reports the largest CPU time, wall time
// and peak memory of the processes (each was held to the limits on its own).
func (j *job) decideCommunication(cr engine.CaseResult, c engine.Case, users []sandboxinit.Result, mgr sandboxinit.Result, toutPath string, mgrCPU time.Duration) (engine.CaseResult, error) {
	pick, pickFirst := -1, -1
	fails := make([]failure, len(users))
	for k, u := range users {
		fails[k] = j.userFailure(u)
		cr.CPUTime = max(cr.CPUTime, time.Duration(u.CPUMicros)*time.Microsecond)
		cr.WallTime = max(cr.WallTime, time.Duration(u.WallMicros)*time.Microsecond)
		cr.MemoryKB = max(cr.MemoryKB, u.MaxRSSKB)
		if fails[k].status == "" {
			continue
		}
		if pickFirst < 0 {
			pickFirst = k
		}
		if pick < 0 && !u.PeerClosed {
			pick = k
		}
	}
	pick = max(pick, pickFirst, 0)
	if pick < len(users) && fails[pick].status != "" && len(users) > 1 {
		fails[pick].message = fmt.Sprintf("process %d: %s", pick+1, fails[pick].message)
	}
	cr.ExitCode, cr.Signal = users[pick].ExitCode, users[pick].Signal
	var tout string
	if mgr.SetupError == "" {
		var err error
		if tout, err = readBounded(toutPath, checkerStdoutBytes); err != nil {
			return cr, err
		}
	}
	d, err := decideInteraction(users[pick], fails[pick], mgr, tout, j.task.Checker.MaxPoints, mgrCPU)
	if err != nil {
		return cr, engine.Infraf(engine.InfraCheckerFailed, "case %s: manager: %w", c.ID, err)
	}
	d.apply(&cr, c.Weight)
	return cr, nil
}
