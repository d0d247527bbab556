package code

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code/checker"
	"github.com/kece-oj/kece/engine/code/sandboxinit"
)

// uidBase and uidSpan: every job gets its own compile and run uid pair from
// this range, so RLIMIT_NPROC (counted per uid, host-wide) only sees that
// job's processes and two jobs on one node never share a uid.
const (
	uidBase = 200000
	uidSpan = 400000
)

// Executor judges code tasks in Docker sandboxes. It is safe for concurrent use.
type Executor struct {
	cfg     Config
	cli     *client.Client
	seccomp string
}

var _ engine.Executor = (*Executor)(nil)

// New validates cfg, loads the seccomp profile and prepares a Docker client.
// It does not contact the daemon (use Probe for that).
func New(cfg Config) (*Executor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, engine.Infra(engine.InfraConfig, err)
	}
	cfg.setDefaults()
	prof, err := loadSeccomp(cfg.SeccompProfilePath)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Workspace, 0o711); err != nil {
		return nil, engine.Infraf(engine.InfraConfig, "workspace: %w", err)
	}
	opts := []client.Opt{client.FromEnv}
	if cfg.DockerHost != "" {
		opts = append(opts, client.WithHost(cfg.DockerHost))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, engine.Infraf(engine.InfraConfig, "docker client: %w", err)
	}
	return &Executor{cfg: cfg, cli: cli, seccomp: prof}, nil
}

// Close releases the Docker client.
func (x *Executor) Close() error { return x.cli.Close() }

// job is the host side of one Execute call.
type job struct {
	x              *Executor
	task           engine.Task
	dir            string // host work dir
	compileUID     int
	runUID         int
	memLimit       int64 // what the verdict compares peak RSS with
	workBytes      int64 // extra /tmp for file I/O (see fileio.go)
	progress       engine.ProgressSink
	userSession    *session
	checkerSession *session
	procSessions   []*session // communication tasks: processes 2..N (communication.go)
}

// Execute implements engine.Executor: compile once, run every case in one
// sandbox container, check on the host (or with the special judge in a second
// sandbox). A returned error is an infrastructure fault; the verdict is then
// meaningless.
func (x *Executor) Execute(ctx context.Context, task engine.Task, progress engine.ProgressSink) (engine.Verdict, error) {
	if progress == nil {
		progress = engine.NoProgress
	}
	if err := validateTask(task); err != nil {
		return engine.Verdict{}, err
	}
	// A further file named like one the runtime would load in place of its
	// own is the contestant's CE (the control plane refuses it at enqueue).
	if err := refusedNames(task.Runtime, task.Files); err != nil {
		return entryVerdict(task, err), nil
	}
	// The entry point is decided from the source before anything starts: a
	// Java source with no runnable class is the user's CE, a checker's is
	// the problem's fault.
	// A grader's files join the submission's (grader.go).
	task, gerr := withGrader(task)
	if gerr != nil && !isEntryError(gerr) {
		return engine.Verdict{}, gerr
	}
	rt, err := resolveEntry(task.Runtime, task.Source)
	if len(task.Files) > 0 {
		runFrom := -1 // a Java grader's class is the one to run
		if g := task.Grader; g != nil && gerr == nil && g.SourceName == "" {
			runFrom = len(task.Files) - len(g.Files)
		}
		rt, err = multiFileSpec(task.Runtime, task.Source, task.Files, runFrom)
		if err != nil && !isEntryError(err) {
			return engine.Verdict{}, err
		}
	}
	if gerr != nil {
		err = gerr
	}
	if isEntryError(err) {
		return entryVerdict(task, err), nil
	} else if err != nil {
		return engine.Verdict{}, engine.Infra(engine.InfraConfig, err)
	}
	task.Runtime = rt
	if task.Checker.HasProgram() {
		if task.Checker.SpecialRuntime, err = resolveEntry(task.Checker.SpecialRuntime, task.Checker.SpecialSource); err != nil {
			return engine.Verdict{}, engine.Infraf(engine.InfraCheckerFailed, "special judge: %w", err)
		}
		// Again with the derived file name (Judge.java), which the checker's
		// extra files must not overwrite.
		if err := validateSpecial(task.Checker); err != nil {
			return engine.Verdict{}, err
		}
	}
	j := &job{x: x, task: task, progress: progress}
	j.memLimit = task.Limits.MemoryBytes + task.Runtime.ExtraMemoryBytes
	j.workBytes = ioWorkBytes(task)
	var r [4]byte
	if _, err := rand.Read(r[:]); err != nil {
		return engine.Verdict{}, engine.Infra(engine.InfraInternal, err)
	}
	j.compileUID = uidBase + int(binary.BigEndian.Uint32(r[:])%uidSpan)*2
	j.runUID = j.compileUID + 1
	defer j.cleanup(ctx)
	if err := j.prepare(); err != nil {
		return engine.Verdict{}, err
	}
	v, err := j.judge(ctx)
	if err != nil && ctx.Err() != nil {
		return engine.Verdict{}, engine.Infra(engine.InfraCancelled, ctx.Err())
	}
	return v, err
}

// entryVerdict is the CE of a submission refused before anything starts.
func entryVerdict(task engine.Task, err error) engine.Verdict {
	v := engine.Verdict{Status: engine.StatusCompileError, Message: err.Error(), CompileLog: err.Error()}
	for _, c := range task.Cases {
		v.MaxScore += c.Weight
	}
	return v
}

var idRE = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func validateTask(t engine.Task) error {
	if err := t.Runtime.Validate(); err != nil {
		return engine.Infra(engine.InfraConfig, err)
	}
	l := t.Limits
	if l.CPUTime <= 0 || l.MemoryBytes <= 0 || l.OutputBytes <= 0 || l.WallTime < 0 || l.StackBytes < 0 {
		return engine.Infraf(engine.InfraConfig, "limits need positive cpu time, memory and output bytes: %+v", l)
	}
	if len(t.Cases) == 0 {
		return engine.Infraf(engine.InfraCorruptInput, "task has no cases")
	}
	seen := map[string]bool{}
	for _, c := range t.Cases {
		if c.ID == "" || seen[c.ID] || c.Weight < 0 {
			return engine.Infraf(engine.InfraCorruptInput, "case id %q empty, duplicate or negative weight", c.ID)
		}
		seen[c.ID] = true
		for _, p := range []string{c.InputPath, c.ExpectedPath} {
			st, err := os.Stat(p)
			if err != nil || !st.Mode().IsRegular() {
				return engine.Infraf(engine.InfraCorruptInput, "case %s: %s is missing or not a regular file", c.ID, p)
			}
		}
	}
	if err := validateIO(t.IO); err != nil {
		return err
	}
	if err := validateFiles(t.Files); err != nil {
		return err
	}
	if err := engine.ValidateSubtasks(t); err != nil {
		return engine.Infra(engine.InfraCorruptInput, err)
	}
	switch t.Checker.Kind {
	case "", engine.CheckerExact, engine.CheckerTolerant:
	case engine.CheckerFloat:
		if t.Checker.AbsTol < 0 || t.Checker.RelTol < 0 {
			return engine.Infraf(engine.InfraConfig, "float checker tolerances must not be negative")
		}
	case engine.CheckerSpecial, engine.CheckerInteractive, engine.CheckerCommunication:
		if err := validateInteractive(t); err != nil {
			return err
		}
		if len(t.Checker.SpecialSource) == 0 {
			return engine.Infraf(engine.InfraConfig, "special judge has no source")
		}
		if err := t.Checker.SpecialRuntime.Validate(); err != nil {
			return engine.Infraf(engine.InfraConfig, "special judge runtime: %w", err)
		}
		if err := validateSpecial(t.Checker); err != nil {
			return err
		}
	default:
		return engine.Infraf(engine.InfraConfig, "unknown checker %q", t.Checker.Kind)
	}
	return nil
}

// prepare lays out the host work dir:
//
//	src/  the source and further files (root's), copied into the compile space
//	box/  the build the runs use: root's, written once by the compile step's
//	      copy out of the compile space (session.go, buildSpace)
//	in/   hard links (or copies) of the inputs; root-only, opened by the supervisor
//	out/  stdout files, created by the supervisor (root); nobody else can write
//	exp/  expected outputs, only for the special judge's own container
//	csrc/ the special judge's source and extra files (headers)
//	cbox/ the special judge's build
//	cout/ the special judge's stdout files, created by the supervisor (root)
//
// A runtime without a compile command runs its source from box/ itself.
func (j *job) prepare() error {
	var r [6]byte
	_, _ = rand.Read(r[:])
	j.dir = filepath.Join(j.x.cfg.Workspace, workDirName(j.x.cfg.NodeID, j.task.JobID, j.task.LeaseEpoch, hex.EncodeToString(r[:])))
	mk := func(sub string, mode os.FileMode, uid int) error {
		p := filepath.Join(j.dir, sub)
		if err := os.MkdirAll(p, mode); err != nil {
			return err
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
		return os.Chown(p, uid, uid)
	}
	if err := os.MkdirAll(j.dir, 0o711); err != nil {
		return hostErr("work dir", err)
	}
	dirs := []struct {
		sub  string
		mode os.FileMode
		uid  int
	}{{"src", 0o755, 0}, {"box", 0o755, 0}, {"in", 0o700, 0}, {"out", 0o755, 0}}
	if j.task.Checker.Interacts() {
		dirs = append(dirs, struct {
			sub  string
			mode os.FileMode
			uid  int
		}{pipeSub, 0o700, 0})
	}
	if j.task.Checker.HasProgram() {
		dirs = append(dirs, struct {
			sub  string
			mode os.FileMode
			uid  int
		}{"exp", 0o755, 0}, struct {
			sub  string
			mode os.FileMode
			uid  int
		}{"cin", 0o755, 0}, struct {
			sub  string
			mode os.FileMode
			uid  int
		}{"csrc", 0o755, 0}, struct {
			sub  string
			mode os.FileMode
			uid  int
		}{"cbox", 0o755, 0}, struct {
			sub  string
			mode os.FileMode
			uid  int
		}{"cout", 0o755, 0})
	}
	for _, d := range dirs {
		if err := mk(d.sub, d.mode, d.uid); err != nil {
			return hostErr("work dir", err)
		}
	}
	// SourceFile is empty only for a version probe, which has no source.
	if name := j.task.Runtime.SourceFile; name != "" {
		dir := sourceDir(j.task.Runtime, "src", "box")
		if err := writeOwned(filepath.Join(j.dir, dir, name), j.task.Source, 0); err != nil {
			return hostErr("source", err)
		}
		for _, f := range j.task.Files {
			if err := writeOwned(filepath.Join(j.dir, dir, f.Name), f.Data, 0); err != nil {
				return hostErr("source file "+f.Name, err)
			}
		}
	}
	for i, c := range j.task.Cases {
		if err := linkOrCopy(c.InputPath, filepath.Join(j.dir, "in", caseFile(i))); err != nil {
			return engine.Infraf(engine.InfraCorruptInput, "case %s input: %w", c.ID, err)
		}
		if j.task.Checker.HasProgram() {
			// Copies, not links: the checker runs unprivileged and needs them
			// readable without changing the mode of the cached originals.
			if err := copyReadable(c.InputPath, filepath.Join(j.dir, "cin", caseFile(i))); err != nil {
				return engine.Infraf(engine.InfraCorruptInput, "case %s input: %w", c.ID, err)
			}
			if err := copyReadable(c.ExpectedPath, filepath.Join(j.dir, "exp", caseFile(i))); err != nil {
				return engine.Infraf(engine.InfraCorruptInput, "case %s expected: %w", c.ID, err)
			}
		}
	}
	if ck := j.task.Checker; ck.HasProgram() {
		dir := sourceDir(ck.SpecialRuntime, "csrc", "cbox")
		if err := writeOwned(filepath.Join(j.dir, dir, ck.SpecialRuntime.SourceFile), ck.SpecialSource, 0); err != nil {
			return hostErr("special judge source", err)
		}
		for _, f := range ck.SpecialFiles {
			if err := writeOwned(filepath.Join(j.dir, dir, f.Name), f.Data, 0); err != nil {
				return hostErr("special judge file "+f.Name, err)
			}
		}
	}
	return nil
}

// sourceDir is the work dir a runtime's sources go to: src, copied into the
// compile space, when it compiles; else box, where it runs.
func sourceDir(rt engine.RuntimeSpec, src, box string) string {
	if len(rt.CompileCmd) > 0 {
		return src
	}
	return box
}

// buildSpace is the compile space of a sandbox whose runtime compiles
// (session.go), from the work dir's src and box; nil for one that does not.
func (j *job) buildSpace(rt engine.RuntimeSpec, src, box string) *buildSpace {
	if len(rt.CompileCmd) == 0 {
		return nil
	}
	return &buildSpace{src: filepath.Join(j.dir, src), box: filepath.Join(j.dir, box), uid: j.compileUID}
}

func caseFile(i int) string { return fmt.Sprintf("%d", i) }

func hostErr(what string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return engine.Infraf(engine.InfraResourceExhausted, "%s: %w", what, err)
	}
	return engine.Infraf(engine.InfraInternal, "%s: %w", what, err)
}

func writeOwned(path string, data []byte, uid int) error {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	return os.Chown(path, uid, uid)
}

// linkOrCopy hard-links src to dst (same file system), else copies it
// readable by the owner only.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	return copyFile(src, dst, 0o600)
}

// copyReadable copies src to a new world-readable dst.
func copyReadable(src, dst string) error { return copyFile(src, dst, 0o644) }

// copyFile copies src to a new file dst with the given mode.
func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func (j *job) cleanup(ctx context.Context) {
	for _, s := range append([]*session{j.userSession, j.checkerSession}, j.procSessions...) {
		if s != nil {
			s.close(ctx)
		}
	}
	if j.dir != "" {
		if err := os.RemoveAll(j.dir); err != nil {
			j.x.cfg.Logger.Warn("work dir not removed", "dir", j.dir, "error", err)
		}
	}
}

func (j *job) mounts(box string, extra ...mount.Mount) []mount.Mount {
	b := func(src, dst string, ro bool) mount.Mount {
		return mount.Mount{Type: mount.TypeBind, Source: filepath.Join(j.dir, src), Target: dst, ReadOnly: ro}
	}
	return append([]mount.Mount{b(box, boxDir, false), b("in", inDir, true), b("out", outDir, false)}, extra...)
}

func (j *job) judge(ctx context.Context) (engine.Verdict, error) {
	t := j.task
	v := engine.Verdict{Status: engine.StatusAccepted}
	for _, c := range t.Cases {
		v.MaxScore += c.Weight
	}
	if err := j.x.checkImage(ctx, t.Runtime.Image); err != nil {
		return v, err
	}
	var err error
	j.userSession, err = j.x.startSession(ctx, sessionSpec{
		image: t.Runtime.Image, role: "user", task: &j.task, memoryBytes: j.startMemory(), mounts: j.mounts("box", j.pipeMounts()...),
		workBytes: j.workBytes, build: j.buildSpace(t.Runtime, "src", "box"),
	})
	if err != nil {
		return v, err
	}
	if len(t.Runtime.CompileCmd) > 0 {
		j.progress.Report(engine.Progress{Phase: engine.PhaseCompiling, CasesTotal: len(t.Cases)})
		c, err := j.compileRun(ctx, j.userSession, t.Runtime)
		if err != nil {
			return v, err
		}
		v.CompileLog = c.log
		if !c.ok {
			v.Status = engine.StatusCompileError
			v.Message = c.message
			return v, nil
		}
		if err := j.holdToRunLimit(ctx, j.userSession); err != nil {
			return v, err
		}
	}
	if t.Checker.HasProgram() {
		if err := j.startChecker(ctx); err != nil {
			return v, err
		}
	}
	j.progress.Report(engine.Progress{Phase: engine.PhaseJudging, CasesTotal: len(t.Cases)})
	if len(t.Subtasks) > 0 {
		done := 0
		cases, subs, err := engine.JudgeSubtasks(t, func(i int) (engine.CaseResult, error) { return j.runCase(ctx, i, t.Cases[i]) },
			func() {
				done++
				j.progress.Report(engine.Progress{Phase: engine.PhaseJudging, CasesDone: done, CasesTotal: len(t.Cases)})
			})
		if err != nil {
			return v, err
		}
		v.Cases, v.Subtasks, v.Score = cases, subs, engine.SumSubtasks(subs)
	} else {
		for i, c := range t.Cases {
			cr, err := j.runCase(ctx, i, c)
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

// checkImage refuses a missing image (or a digest reference that does not
// resolve to a local image) before a container is created.
func (x *Executor) checkImage(ctx context.Context, image string) error {
	dctx, cancel := context.WithTimeout(ctx, x.cfg.DaemonTimeout)
	defer cancel()
	if _, err := x.cli.ImageInspect(dctx, image); err != nil {
		if ctx.Err() != nil {
			return engine.Infra(engine.InfraCancelled, ctx.Err())
		}
		if client.IsErrConnectionFailed(err) || isConnErr(err) {
			return engine.Infraf(engine.InfraDaemonUnreachable, "inspect image %s: %w", image, err)
		}
		return engine.Infraf(engine.InfraImageMissing, "image %s missing or digest mismatch: %w", image, err)
	}
	return nil
}

// compiled is the outcome of a compile step.
type compiled struct {
	ok  bool
	log string // bounded compiler output, with a note when cut or killed
	// message says why a compile failed, with the limit figure when the
	// compiler was stopped ("compilation exceeded 10 s CPU").
	message string
}

// compile runs the spec's compile command in box; false means a CE.
func (j *job) compile(ctx context.Context, s *session, rt engine.RuntimeSpec) (bool, string, error) {
	c, err := j.compileRun(ctx, s, rt)
	return c.ok, c.log, err
}

// compileRun runs the spec's compile command in the session's compile space
// under the spec's compile limits and says how it ended: the sources are
// copied in first, a successful build copied out to boxDir after
// (docs/engine.md, "Compile sandbox").
func (j *job) compileRun(ctx context.Context, s *session, rt engine.RuntimeSpec) (compiled, error) {
	cfg := j.x.cfg
	if s.build == nil {
		return compiled{}, engine.Infraf(engine.InfraInternal, "sandbox %s has no compile space", short(s.id))
	}
	if err := j.copyTree(ctx, s, srcDir, buildDir, "", engine.Infraf(engine.InfraConfig,
		"the sources do not fit the compile space (%s): raise CompileSpaceBytes or CompileSpaceFiles", j.spaceWords())); err != nil {
		return compiled{}, err
	}
	memory := max(rt.CompileMemoryBytes, j.memLimit)
	res, err := s.run(ctx, sandboxinit.Request{
		Argv:       expand(rt.CompileCmd, j.task.Limits.MemoryBytes),
		Dir:        buildDir,
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=" + tmpDir, "TMPDIR=" + tmpDir},
		UID:        j.compileUID,
		GID:        j.compileUID,
		LogBytes:   cfg.CompileLogBytes,
		CPUMillis:  rt.CompileTime.Milliseconds(),
		WallMillis: rt.CompileWall().Milliseconds(),
		FileSize:   CompileOutputBytesDefault,
		Processes:  cfg.ProcessesPerRun,
		Stack:      64 << 20,
		OpenFiles:  cfg.OpenFiles,
		CleanDir:   tmpDir,
	})
	if err != nil {
		return compiled{}, err
	}
	if res.SetupError != "" {
		return compiled{}, engine.Infraf(engine.InfraConfig, "compile command of %s (image %s) did not start: %s", rt.Pool, rt.Image, res.SetupError)
	}
	c := compiled{log: strings.ToValidUTF8(res.Log, "\uFFFD")}
	if res.LogTruncated {
		c.log += "\n[compiler output truncated]"
	}
	c.message = compileFailure(res, rt, memory)
	if c.message == compileFailedMessage && strings.Contains(strings.ToLower(res.Log), "no space left on device") {
		c.message = "compiler ran out of space: " + j.spaceWords()
	}
	if c.message != "" {
		if c.message != compileFailedMessage {
			c.log += "\n[" + c.message + "]"
		}
		return c, nil
	}
	if err := j.exportBuild(ctx, s); err != nil {
		return compiled{}, err
	}
	c.ok = true
	return c, nil
}

// spaceWords names what a compile may write: the compile space's bounds and /tmp.
func (j *job) spaceWords() string {
	cfg := j.x.cfg
	return fmt.Sprintf("the compile space holds %d MiB in %d files, /tmp %d MiB",
		cfg.CompileSpaceBytes>>20, cfg.CompileSpaceFiles, (cfg.TmpfsBytes+j.workBytes)>>20)
}

// copyTime is the CPU limit of one copy into or out of the compile space
// (its wall limit is three times that); copying 64 MiB takes well under a
// tenth of a second.
const copyTime = 10 * time.Second

// copyTree runs the supervisor's copy command (sandboxinit.copyCmd) in s as
// the compile uid, from one sandbox directory into another, then empties
// clean ("" for nothing). noSpace is the error when the target is full.
func (j *job) copyTree(ctx context.Context, s *session, from, to, clean string, noSpace error) error {
	cfg := j.x.cfg
	res, err := s.run(ctx, sandboxinit.Request{
		Argv: []string{supervisorTarget, "copy", from, to}, Dir: "/", Env: []string{"LANG=C.UTF-8"},
		UID: j.compileUID, GID: j.compileUID, LogBytes: 4096,
		CPUMillis: copyTime.Milliseconds(), WallMillis: 3 * copyTime.Milliseconds(),
		FileSize: CompileOutputBytesDefault, Processes: cfg.ProcessesPerRun, Stack: 8 << 20, OpenFiles: cfg.OpenFiles,
		CleanDir: clean,
	})
	switch {
	case err != nil:
		return err
	case res.SetupError != "":
		return engine.Infraf(engine.InfraConfig, "copy %s to %s did not start: %s", from, to, res.SetupError)
	case res.Signal == 0 && res.ExitCode == 0:
		return nil
	case res.Signal == 0 && res.ExitCode == sandboxinit.CopyNoSpace:
		return noSpace
	}
	return engine.Infraf(engine.InfraInternal, "copy %s to %s: exit %d signal %d: %s", from, to, res.ExitCode, res.Signal, clip(res.Log, 300))
}

// exportBuild copies a successful build out of the compile space into box,
// the host directory the runs use, and empties the compile space, so its
// pages have left the sandbox's memory before the run ceiling is set. The
// compile uid may write box only during this copy: no process of that uid
// is left by then (the supervisor kills every process after every run),
// and the copy is the supervisor's own program. What it writes is bounded
// by the compile space. Then everything in box becomes root's, so no
// program of the job — an interactor runs as the compile uid — can add to
// it or grow it.
func (j *job) exportBuild(ctx context.Context, s *session) error {
	if err := os.Chown(s.build.box, j.compileUID, j.compileUID); err != nil {
		return hostErr("build dir", err)
	}
	err := j.copyTree(ctx, s, buildDir, boxDir, buildDir,
		engine.Infraf(engine.InfraResourceExhausted, "the build does not fit the node's workspace %s", j.x.cfg.Workspace))
	// Nothing runs in the sandbox while the host walks: it answers one
	// request at a time, and the copy's processes are gone.
	cerr := filepath.WalkDir(s.build.box, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 0, 0)
	})
	if cerr != nil && err == nil {
		err = hostErr("build dir", cerr)
	}
	return err
}

// compileFailedMessage is the message of an ordinary CE (the compiler
// reported errors); its details are in the compile log.
const compileFailedMessage = "compilation failed"

// compileFailure names why a compile run failed ("" when it succeeded); a
// compiler stopped by a limit is named with that limit.
func compileFailure(res sandboxinit.Result, rt engine.RuntimeSpec, memory int64) string {
	switch {
	case res.CPUExceeded || res.Signal == int(syscall.SIGXCPU):
		return fmt.Sprintf("compilation exceeded %s CPU", seconds(rt.CompileTime))
	case res.WallExceeded:
		return fmt.Sprintf("compilation exceeded %s wall time", seconds(rt.CompileWall()))
	case res.OOMKilled:
		return fmt.Sprintf("compiler exceeded %d MiB", memory>>20)
	case res.Signal == int(syscall.SIGXFSZ):
		return fmt.Sprintf("compiler output exceeded %d MiB", CompileOutputBytesDefault>>20)
	case res.Signal != 0:
		return fmt.Sprintf("compiler killed by signal %d (%s)", res.Signal, syscall.Signal(res.Signal))
	case res.ExitCode != 0:
		return compileFailedMessage
	}
	return ""
}

// seconds formats a limit as "10 s" or "2.5 s".
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
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
	stack := l.StackBytes
	if stack == 0 {
		stack = min(l.MemoryBytes, 1<<30)
	}
	var as int64
	if t.Runtime.AddressSpaceExtraBytes > 0 {
		as = j.memLimit + t.Runtime.AddressSpaceExtraBytes
	}
	outName := caseFile(i) + ".out"
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
	res, err := j.userSession.run(ctx, req)
	if err != nil {
		return cr, err
	}
	if res.SetupError != "" {
		return cr, engine.Infraf(engine.InfraConfig, "run command of %s (image %s) did not start: %s", t.Runtime.Pool, t.Runtime.Image, res.SetupError)
	}
	cr.CPUTime = time.Duration(res.CPUMicros) * time.Microsecond
	cr.WallTime = time.Duration(res.WallMicros) * time.Microsecond
	cr.MemoryKB = res.MaxRSSKB
	cr.ExitCode = res.ExitCode
	cr.Signal = res.Signal
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
	failed := res.Signal != 0 || res.ExitCode != 0
	// Only a failing run can be a runtime's out-of-memory report: a program
	// that prints "MemoryError" and exits 0 is judged on its output.
	var oomReport string
	if failed {
		oomReport = j.memoryFailure(res.Log, stdout, outPath)
	}
	// Output past the limit decides first: runtimes that ignore SIGXFSZ (the
	// JVM, CPython) keep running or fail later, but they did exceed it.
	switch {
	case stdoutSize > l.OutputBytes || size > l.OutputBytes:
		cr.Status, cr.Message = engine.StatusOutputLimitExceeded, "output limit exceeded"
		return cr, nil
	case res.OOMKilled || res.MaxRSSKB*1024 > j.memLimit:
		// Memory before time: a program that went over its memory limit did
		// so whatever else happened, and filling memory costs CPU (page
		// faults), so one killed for time on the way is still an MLE.
		cr.Status, cr.Message = engine.StatusMemoryLimitExceeded, fmt.Sprintf("peak memory %d KiB", res.MaxRSSKB)
		return cr, nil
	case res.CPUExceeded:
		// The supervisor's one measurement (the program and its children,
		// never the supervisor) decides; the same figure is reported. A
		// SIGXCPU only counts through it: the RLIMIT_CPU backstop sits above
		// the limit, and a program raising it itself is an RE.
		cr.Status, cr.Message = engine.StatusTimeLimitExceeded, "CPU time limit exceeded"
		return cr, nil
	case res.WallExceeded:
		cr.Status, cr.Message = engine.StatusTimeLimitExceeded, "wall time limit exceeded"
		return cr, nil
	case oomReport != "":
		cr.Status, cr.Message = engine.StatusMemoryLimitExceeded, "out of memory: "+oomReport
		return cr, nil
	case res.Signal == int(syscall.SIGXFSZ):
		cr.Status, cr.Message = engine.StatusOutputLimitExceeded, "output limit exceeded"
		return cr, nil
	}
	switch {
	case res.Signal != 0:
		cr.Status, cr.Message = engine.StatusRuntimeError, fmt.Sprintf("killed by signal %d (%s)", res.Signal, syscall.Signal(res.Signal))
	case res.ExitCode != 0:
		cr.Status, cr.Message = engine.StatusRuntimeError, fmt.Sprintf("exit code %d", res.ExitCode)
	}
	if cr.Status != "" {
		if tail := strings.TrimSpace(res.Log); tail != "" {
			cr.Message += ": " + clip(tail, 200)
		}
		return cr, nil
	}
	if refused != "" {
		// A missing or refused output file is a wrong answer, not a crash.
		cr.Status, cr.Message = engine.StatusWrongAnswer, refused
		return cr, nil
	}
	fraction, msg, err := j.check(ctx, i, c, out, judgedName)
	if err != nil {
		return cr, err
	}
	cr.Status = engine.CaseStatus(fraction)
	cr.Score = engine.CaseScore(fraction, c.Weight)
	cr.Fraction = min(max(fraction, 0), 1)
	cr.Message = msg
	return cr, nil
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

// stdoutScanBytes is how much of a failing run's stdout is searched for
// memory markers: the JVM reports a failed start there, before any output of
// the program.
const stdoutScanBytes = 4 << 10

// memoryFailure returns the runtime's own out-of-memory report of a failing
// run (the marker line, bounded), searched in stderr and in the head of
// stdout, or "" when there is none. out is the stdout already
// read (nil when it was too large to read); outPath is read otherwise.
func (j *job) memoryFailure(stderr string, out []byte, outPath string) string {
	rt := j.task.Runtime
	if len(rt.MemoryErrorMarkers) == 0 {
		return ""
	}
	if msg := memoryMarker(stderr, rt); msg != "" {
		return msg
	}
	head := out
	if head == nil {
		head, _ = readHead(outPath, stdoutScanBytes)
	}
	return memoryMarker(string(head[:min(len(head), stdoutScanBytes)]), rt)
}

// memoryMarker finds the first line of text holding one of the spec's memory
// markers and none of its exceptions; it returns that line, after the JVM's
// headline when the line before is one, bounded.
func memoryMarker(text string, rt engine.RuntimeSpec) string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if !containsAny(l, rt.MemoryErrorMarkers) || containsAny(l, rt.MemoryErrorExceptions) {
			continue
		}
		msg := strings.TrimSpace(l)
		// "Error occurred during initialization of VM" precedes the reason.
		if i > 0 && strings.Contains(lines[i-1], "Error occurred during initialization of VM") {
			msg = strings.TrimSpace(lines[i-1]) + ": " + msg
		}
		return clip(msg, 200)
	}
	return ""
}

// readHead reads at most n bytes of a regular file (no symlinks).
func readHead(path string, n int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, n))
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if sub != "" && strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// clip bounds s to about n bytes of valid UTF-8 (program output is arbitrary bytes).
func clip(s string, n int) string {
	if len(s) > n {
		s = s[:n] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
