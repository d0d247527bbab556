package code

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/mount"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code/checker"
	"github.com/kece-oj/kece/engine/code/sandboxinit"
)

// Interactive problems (docs/engine.md "Interactive problems"): the user's
// program runs in its own sandbox as usual, the interactor (the problem's
// program, compiled like a special judge) in the checker's sandbox, and two
// FIFOs connect them: the interactor's stdout is the program's stdin and the
// program's stdout is the interactor's stdin. The engine makes the FIFOs in a
// root-only host directory bind-mounted at /pipe into both sandboxes; each
// supervisor opens its two ends itself and hands the program only the
// descriptors, so no program ever opens a FIFO (the refusal of non-regular
// files made by the contestant, docs/engine.md "Sandbox rules", stays) and
// neither sandbox sees the other's files. Each supervisor measures its own
// container, so the interactor's CPU time never counts against the program.

const (
	pipeSub = "pipe"  // host work dir subdirectory holding the FIFOs
	pipeDir = "/pipe" // where both sandboxes see it (root-only, 0700)
	// pipeOpenTimeout bounds how long one side waits for the other to
	// open the FIFOs; both sandboxes are already running by then.
	pipeOpenTimeout = 10 * time.Second
)

// pipeMounts is the FIFO directory for an interactive task, nothing otherwise.
func (j *job) pipeMounts() []mount.Mount {
	if !j.task.Checker.Interacts() {
		return nil
	}
	return []mount.Mount{{Type: mount.TypeBind, Source: filepath.Join(j.dir, pipeSub), Target: pipeDir}}
}

// validateInteractive refuses an interactive task the executor cannot run:
// the interaction is the program's stdin and stdout, so there is no file I/O,
// and the interactor speaks testlib's protocol.
func validateInteractive(t engine.Task) error {
	ck := t.Checker
	if ck.Kind == engine.CheckerCommunication && (ck.Processes < 1 || ck.Processes > engine.MaxProcesses) {
		return engine.Infraf(engine.InfraConfig, "a communication task has 1..%d processes, not %d", engine.MaxProcesses, ck.Processes)
	}
	if ck.Kind != engine.CheckerCommunication && ck.Processes != 0 {
		return engine.Infraf(engine.InfraConfig, "only a communication task has processes")
	}
	if !ck.Interacts() {
		return nil
	}
	if t.IO.Files() || t.IO.Stdio {
		return engine.Infraf(engine.InfraConfig, "an interactive problem talks over stdin and stdout: no input or output file")
	}
	if ck.SpecialProtocol != "" && ck.SpecialProtocol != engine.ProtocolTestlib {
		return engine.Infraf(engine.InfraConfig, "an interactor follows the testlib protocol, not %q", ck.SpecialProtocol)
	}
	if ck.InteractorTime < 0 {
		return engine.Infraf(engine.InfraConfig, "interactor time must not be negative")
	}
	return nil
}

// interactorTime is the interactor's CPU limit per case.
func (j *job) interactorTime() time.Duration {
	return cmp.Or(j.task.Checker.InteractorTime, j.x.cfg.CheckerTime)
}

// runInteractive runs case i: the program and the interactor at once, joined
// by two fresh FIFOs, then decides the case from both outcomes.
func (j *job) runInteractive(ctx context.Context, i int, c engine.Case) (engine.CaseResult, error) {
	t := j.task
	cr := engine.CaseResult{ID: c.ID}
	toUser := filepath.Join(j.dir, pipeSub, caseFile(i)+".a")   // interactor → program
	fromUser := filepath.Join(j.dir, pipeSub, caseFile(i)+".b") // program → interactor
	for _, p := range []string{toUser, fromUser} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			return cr, hostErr("interaction pipe", err)
		}
		defer os.Remove(p)
	}
	// The interactor's result file (testlib's second argument): created
	// here, owned by its uid, in a directory only root can change.
	toutName := caseFile(i) + ".tout"
	toutPath := filepath.Join(j.dir, "cout", toutName)
	if err := writeOwned(toutPath, nil, j.compileUID); err != nil {
		return cr, hostErr("interactor result file", err)
	}
	defer os.Remove(toutPath)

	userReq := j.userRequest(i)
	userReq.Pipes = &sandboxinit.RunPipes{Stdin: pipeDir + "/" + caseFile(i) + ".a", Stdout: pipeDir + "/" + caseFile(i) + ".b", OpenMillis: pipeOpenTimeout.Milliseconds()}
	rt := t.Checker.SpecialRuntime
	interCPU := j.interactorTime()
	interReq := sandboxinit.Request{
		Argv: append(expand(rt.RunCmd, checkerMemory), inDir+"/"+caseFile(i), outDir+"/"+toutName, expDir+"/"+caseFile(i)),
		Dir:  boxDir, Env: j.runEnv(), UID: j.compileUID, GID: j.compileUID,
		LogBytes:  j.x.cfg.RunLogBytes,
		CPUMillis: interCPU.Milliseconds(),
		// Longer than the program's idleness limit: in a deadlock the
		// program is stopped first, and the interactor, seeing the end of
		// its input, has its own CPU time to give its verdict.
		WallMillis: (j.wallLimit() + interCPU).Milliseconds(),
		FileSize:   16 << 20, Processes: j.x.cfg.ProcessesPerRun, Stack: 256 << 20, OpenFiles: j.x.cfg.OpenFiles,
		CleanDir: tmpDir,
		Pipes:    &sandboxinit.RunPipes{Stdin: userReq.Pipes.Stdout, Stdout: userReq.Pipes.Stdin, OpenMillis: pipeOpenTimeout.Milliseconds()},
	}
	type outcome struct {
		res sandboxinit.Result
		err error
	}
	interCh := make(chan outcome, 1)
	go func() {
		res, err := j.checkerSession.run(ctx, interReq)
		interCh <- outcome{res, err}
	}()
	user, userErr := j.userSession.run(ctx, userReq)
	inter := <-interCh
	if userErr != nil {
		return cr, userErr
	}
	if inter.err != nil {
		return cr, inter.err
	}
	if user.SetupError != "" {
		return cr, runNotStarted(t.Runtime, user.SetupError)
	}
	measured(&cr, user)
	var tout string
	if inter.res.SetupError == "" {
		var err error
		if tout, err = readBounded(toutPath, checkerStdoutBytes); err != nil {
			return cr, err
		}
	}
	userFail := j.userFailure(user)
	d, err := decideInteraction(user, userFail, inter.res, tout, t.Checker.MaxPoints, interCPU)
	if err != nil {
		return cr, engine.Infraf(engine.InfraCheckerFailed, "case %s: %w", c.ID, err)
	}
	d.apply(&cr, c.Weight)
	return cr, nil
}

// userRequest is the program's run of case i, as runCase sends it, without
// its stdin and stdout (the caller connects them).
func (j *job) userRequest(i int) sandboxinit.Request {
	l := j.task.Limits
	stack := l.StackBytes
	if stack == 0 {
		stack = min(l.MemoryBytes, 1<<30)
	}
	var as int64
	if j.task.Runtime.AddressSpaceExtraBytes > 0 {
		as = j.memLimit + j.task.Runtime.AddressSpaceExtraBytes
	}
	return sandboxinit.Request{
		Argv: expand(j.task.Runtime.RunCmd, l.MemoryBytes), Dir: boxDir, Env: j.runEnv(),
		UID: j.runUID, GID: j.runUID, LogBytes: j.x.cfg.RunLogBytes,
		CPUMillis: l.CPUTime.Milliseconds(), WallMillis: j.wallLimit().Milliseconds(),
		AddressSpace: as, FileSize: l.OutputBytes + 1, Processes: j.x.cfg.ProcessesPerRun,
		Stack: stack, OpenFiles: j.x.cfg.OpenFiles, CleanDir: tmpDir,
	}
}

// failure is how a program's run failed on its own; zero when it ended by
// itself with exit status 0.
type failure struct {
	status  engine.Status
	message string
}

// userFailure classifies the program's own end by the rules of runCase:
// memory before time, CPU before wall; a wall-time stop of an interactive
// program is an idleness limit (it waited for input that never came).
func (j *job) userFailure(res sandboxinit.Result) failure {
	failed := res.Signal != 0 || res.ExitCode != 0
	switch {
	case res.OOMKilled || res.MaxRSSKB*1024 > j.memLimit:
		return failure{engine.StatusMemoryLimitExceeded, fmt.Sprintf("peak memory %d KiB", res.MaxRSSKB)}
	case res.CPUExceeded:
		return failure{engine.StatusTimeLimitExceeded, "CPU time limit exceeded"}
	case res.WallExceeded:
		return failure{engine.StatusTimeLimitExceeded, fmt.Sprintf("idleness limit exceeded (%s wall time)", seconds(j.wallLimit()))}
	}
	if failed {
		if msg := j.memoryFailure(res.Log, []byte{}, ""); msg != "" {
			return failure{engine.StatusMemoryLimitExceeded, "out of memory: " + msg}
		}
	}
	var f failure
	switch {
	case res.Signal != 0:
		f = failure{engine.StatusRuntimeError, fmt.Sprintf("killed by signal %d (%s)", res.Signal, syscall.Signal(res.Signal))}
	case res.ExitCode != 0:
		f = failure{engine.StatusRuntimeError, fmt.Sprintf("exit code %d", res.ExitCode)}
	default:
		return f
	}
	if tail := strings.TrimSpace(res.Log); tail != "" {
		f.message += ": " + clip(tail, 200)
	}
	return f
}

// decision is a case's outcome: a status of the program's own (status set),
// or the interactor's fraction of the weight.
type decision struct {
	status   engine.Status
	message  string
	fraction float64
}

// apply sets a case's status and message from d, and its score when the
// interactor's (or manager's) points decided it.
func (d decision) apply(cr *engine.CaseResult, weight int64) {
	cr.Status, cr.Message = d.status, d.message
	if d.status == "" {
		cr.Status = engine.CaseStatus(d.fraction)
		cr.Score = engine.CaseScore(d.fraction, weight)
		cr.Fraction = min(max(d.fraction, 0), 1)
	}
}

// decideInteraction applies the rule of docs/engine.md "Interactive
// problems", as ICPC-style judges do:
//
//  1. An interactor that did not start, overran its own limits or was killed
//     (other than by SIGPIPE, see 3) is the problem's fault: an error, whatever
//     the program did. A correct interactor always ends in time once the
//     program has gone, because it reads the end of its input.
//  2. A program that failed on its own (MLE, TLE, idleness, RE) while the
//     interactor was still there (it had not closed the program's stdin:
//     Result.PeerClosed, exact, see sandboxinit.holdPipes) gets that verdict:
//     the interactor's verdict after it is about a broken conversation. A
//     program killed by SIGPIPE did not fail on its own: it wrote to a pipe
//     whose reader, the interactor, had already gone, so the interactor ended
//     first and decides (whatever PeerClosed saw of the other direction).
//  3. An interactor killed by SIGPIPE wrote to a program that had already
//     ended (exit 0, before answering everything): WA.
//  4. Otherwise the interactor's testlib verdict decides (exit 0 OK, 1 WA, 2
//     PE as WA, 3 FAIL as an error, 7 points); its result file and stderr are
//     the message. A program that failed after an accepting interactor ended
//     still gets its own verdict (it must end cleanly, too); after a
//
// rejecting one it usually died writing to it, and the rejection stands.
func decideInteraction(user sandboxinit.Result, userFail failure, inter sandboxinit.Result, tout string, maxPoints float64, interCPU time.Duration) (decision, error) {
	msg := clip(strings.TrimSpace(inter.Log), 200)
	switch {
	case inter.SetupError != "":
		return decision{}, fmt.Errorf("interactor did not start: %s", inter.SetupError)
	case inter.CPUExceeded:
		return decision{}, fmt.Errorf("interactor exceeded its %s CPU limit", seconds(interCPU))
	case inter.WallExceeded:
		return decision{}, fmt.Errorf("interactor did not end within its wall limit (it must end once the program has gone): %s", msg)
	}
	if userFail.status != "" && !user.PeerClosed && user.Signal != int(syscall.SIGPIPE) {
		return decision{status: userFail.status, message: userFail.message}, nil
	}
	if inter.Signal == int(syscall.SIGPIPE) {
		return decision{status: engine.StatusWrongAnswer, message: "the program ended before the interaction was over"}, nil
	}
	if inter.Signal != 0 {
		return decision{}, fmt.Errorf("interactor killed by signal %d: %s", inter.Signal, msg)
	}
	o, err := checker.Interpret(engine.ProtocolTestlib, checker.Run{ExitCode: inter.ExitCode, Stdout: tout, Stderr: inter.Log}, maxPoints)
	if err != nil {
		return decision{}, fmt.Errorf("interactor: %w", err)
	}
	if userFail.status != "" && o.Fraction >= 1 {
		return decision{status: userFail.status, message: userFail.message}, nil
	}
	return decision{fraction: o.Fraction, message: o.Message}, nil
}
