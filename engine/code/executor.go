package code

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/moby/moby/client"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/compilecache"
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
	cache   *compilecache.Cache // nil: every job compiles (Config.NoCompileCache)
	warm    *warmPool           // sandboxes started before their job (Prewarm)
	// removing counts the finished jobs whose sandboxes and work dirs are
	// still being removed (cleanupAfter); Close waits for them.
	removing sync.WaitGroup
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
	x := &Executor{cfg: cfg, cli: cli, seccomp: prof, warm: newWarmPool()}
	if !cfg.NoCompileCache {
		x.cache, err = compilecache.Open(compilecache.Config{Dir: cfg.CompileCacheDir, MaxBytes: cfg.CompileCacheBytes, Logger: cfg.Logger})
		if err != nil {
			cli.Close()
			return nil, engine.Infra(engine.InfraConfig, err)
		}
	}
	return x, nil
}

// Close releases the Docker client.
// Close waits for the removals of finished jobs' sandboxes still under way
// and releases the Docker client.
func (x *Executor) Close() error {
	x.removing.Wait()
	return x.cli.Close()
}

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
	phases         engine.Phases
	// cachedBuild: the user's build (or compile error) came from the
	// compile cache; nothing compiles in the sandbox.
	cachedBuild bool
	// warm is the started sandbox the job took (warm.go) until judge makes
	// it the user's session.
	warm *warmSandbox
}

// Execute implements engine.Executor: compile once, run every case in one
// sandbox container, check on the host (or with the special judge in a second
// sandbox). A returned error is an infrastructure fault; the verdict is then
// meaningless.
func (x *Executor) Execute(ctx context.Context, task engine.Task, progress engine.ProgressSink) (_ engine.Verdict, err error) {
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
	defer func() { j.cleanupAfter(ctx, err) }()
	if warmable(task) {
		if w := x.warm.take(task.Runtime.Image, task.JobID, task.LeaseEpoch); w != nil {
			dir := filepath.Join(x.cfg.Workspace, workDirName(x.cfg.NodeID, task.JobID, task.LeaseEpoch, hex.EncodeToString(r[:])))
			if err := j.adopt(w, dir); err != nil {
				w.s.close(ctx)
				x.warm.done(w.s.id)
				os.RemoveAll(w.dir)
				return engine.Verdict{}, err
			}
		}
	}
	if err := j.prepare(); err != nil {
		return engine.Verdict{}, err
	}
	v, err := j.judge(ctx)
	v.Phases = j.phases
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
