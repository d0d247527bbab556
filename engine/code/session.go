package code

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code/sandboxinit"
)

// Container labels; Janitor selects by LabelNode.
const (
	LabelNode       = "kece.node"
	LabelJob        = "kece.job"
	LabelLeaseEpoch = "kece.lease_epoch"
	LabelRole       = "kece.role"
)

// Paths inside the sandbox.
const (
	supervisorTarget = "/kece/init"
	boxDir           = "/box" // the build the runs use; root's, filled once by the compile step
	srcDir           = "/src" // the sources, read-only, copied into buildDir to compile
	buildDir         = "/build"
	inDir            = "/in"  // trusted inputs, read-only, readable by the supervisor only
	outDir           = "/out" // program stdout files, created by the supervisor
	expDir           = "/exp" // special judge only: expected outputs
	userDir          = "/user"
	tmpDir           = "/tmp"
)

// sessionSpec describes one sandbox container.
type sessionSpec struct {
	image       string
	role        string
	task        *engine.Task
	memoryBytes int64
	mounts      []mount.Mount
	// created, when set, is told the container's id as soon as it exists
	// (the warm pool's janitor must know a sandbox while it starts).
	created func(id string)
	// workBytes enlarges /tmp (and the memory its pages are charged to) for
	// a file I/O job's input and output files; 0 otherwise.
	workBytes int64
	// build, for a sandbox that compiles, is its compile space; nil for one
	// that only runs.
	build *buildSpace
}

// buildSpace is where a sandbox compiles (docs/engine.md, "Compile
// sandbox"): the sources, mounted read-only at srcDir, are copied into
// buildDir, a tmpfs of Config.CompileSpaceBytes and CompileSpaceFiles owned
// by the compile uid, charged to the sandbox's memory; the compiler writes
// nowhere else but /tmp. A successful build is copied to box, the host
// directory mounted at boxDir, which the compile uid may write only for
// that copy.
type buildSpace struct {
	src string // host directory of the sources
	box string // host directory mounted at boxDir
	uid int    // the compile uid
}

// session is one running sandbox container and its supervisor channel.
type session struct {
	x       *Executor
	id      string
	build   *buildSpace
	conn    client.HijackedResponse
	lines   chan string
	readErr chan error
	diag    *boundedBuffer
	nextID  int64
	done    chan struct{}
	closeMu sync.Once
}

// startSession creates, attaches and starts a container and waits for the
// supervisor's hello. On error nothing is left behind.
func (x *Executor) startSession(ctx context.Context, s sessionSpec) (_ *session, err error) {
	memory := x.containerMemory(s.memoryBytes) + s.workBytes
	pids := x.cfg.PidsLimit
	labels := map[string]string{
		LabelNode: x.cfg.NodeID, LabelJob: s.task.JobID,
		LabelLeaseEpoch: strconv.FormatInt(s.task.LeaseEpoch, 10), LabelRole: s.role,
	}
	mounts := append([]mount.Mount{{
		Type: mount.TypeBind, Source: x.cfg.SupervisorPath, Target: supervisorTarget, ReadOnly: true,
	}}, s.mounts...)
	tmpfs := map[string]string{tmpDir: fmt.Sprintf("rw,nosuid,nodev,noexec,size=%d,mode=1777", x.cfg.TmpfsBytes+s.workBytes)}
	if b := s.build; b != nil {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: b.src, Target: srcDir, ReadOnly: true})
		// noexec: nothing runs from the compile space; runs use boxDir.
		tmpfs[buildDir] = fmt.Sprintf("rw,nosuid,nodev,noexec,size=%d,nr_inodes=%d,mode=0700,uid=%d,gid=%d",
			x.cfg.CompileSpaceBytes, x.cfg.CompileSpaceFiles, b.uid, b.uid)
	}
	dctx, cancel := context.WithTimeout(ctx, x.cfg.DaemonTimeout)
	defer cancel()
	created, err := x.cli.ContainerCreate(dctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:           s.image,
			Entrypoint:      []string{supervisorTarget},
			Cmd:             []string{"serve"},
			User:            "0:0",
			WorkingDir:      "/",
			Env:             []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
			Labels:          labels,
			OpenStdin:       true,
			AttachStdin:     true,
			AttachStdout:    true,
			AttachStderr:    true,
			NetworkDisabled: true,
		},
		HostConfig: &container.HostConfig{
			NetworkMode: "none",
			IpcMode:     "none",
			CapDrop:     []string{"ALL"},
			// Only the supervisor (PID 1, root) holds these: SETUID/SETGID to
			// fork programs as the run uid (and to prlimit them from a thread
			// that briefly takes that uid), KILL to kill what they leave
			// behind. The uid change clears them before any program's exec.
			CapAdd:         []string{"SETUID", "SETGID", "KILL"},
			ReadonlyRootfs: true,
			SecurityOpt:    []string{"no-new-privileges", "seccomp=" + x.seccomp},
			Mounts:         mounts,
			Tmpfs:          tmpfs,
			LogConfig:      container.LogConfig{Type: "none"},
			Resources: container.Resources{
				Memory:     memory,
				MemorySwap: memory,
				NanoCPUs:   int64(x.cfg.ContainerCPUs * 1e9),
				PidsLimit:  &pids,
				Ulimits: []*container.Ulimit{
					{Name: "nofile", Soft: x.cfg.OpenFiles, Hard: x.cfg.OpenFiles},
					{Name: "core", Soft: 0, Hard: 0},
				},
			},
		},
	})
	if err != nil {
		return nil, x.classifyDaemon(ctx, "create container", err)
	}
	if s.created != nil {
		s.created(created.ID)
	}
	ss := &session{x: x, id: created.ID, build: s.build, lines: make(chan string, 4), readErr: make(chan error, 1), diag: &boundedBuffer{max: 4096}, done: make(chan struct{})}
	defer func() {
		if err != nil {
			ss.close(ctx)
		}
	}()
	att, err := x.cli.ContainerAttach(dctx, ss.id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return nil, x.classifyDaemon(ctx, "attach container", err)
	}
	ss.conn = att.HijackedResponse
	go ss.demux()
	if _, err := x.cli.ContainerStart(dctx, ss.id, client.ContainerStartOptions{}); err != nil {
		return nil, x.classifyDaemon(ctx, "start container", err)
	}
	line, err := ss.readLine(ctx, x.cfg.DaemonTimeout)
	if err != nil {
		return nil, err
	}
	var hello sandboxinit.Hello
	if err := json.Unmarshal([]byte(line), &hello); err != nil || hello.Version != sandboxinit.Version {
		return nil, engine.Infraf(engine.InfraConfig, "supervisor hello %q: want version %s", line, sandboxinit.Version)
	}
	return ss, nil
}

// demux splits the attach stream: stdout lines are answers, stderr is kept
// (bounded) for diagnostics.
func (s *session) demux() {
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, s.diag, s.conn.Reader)
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
	}()
	defer pr.Close()
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		select {
		case s.lines <- sc.Text():
		case <-s.done:
			return
		}
	}
	err := sc.Err()
	if err == nil {
		err = io.EOF
	}
	s.readErr <- err
}

func (s *session) readLine(ctx context.Context, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l := <-s.lines:
		return l, nil
	case err := <-s.readErr:
		s.readErr <- err
		return "", s.lost(ctx, err)
	case <-ctx.Done():
		return "", engine.Infra(engine.InfraCancelled, ctx.Err())
	case <-t.C:
		return "", engine.Infraf(engine.InfraInternal, "supervisor in %s did not answer within %s (%s)", short(s.id), timeout, s.diag.String())
	}
}

// run sends one request and waits for its result.
func (s *session) run(ctx context.Context, req sandboxinit.Request) (sandboxinit.Result, error) {
	s.nextID++
	req.ID = s.nextID
	b, err := json.Marshal(req)
	if err != nil {
		return sandboxinit.Result{}, engine.Infra(engine.InfraInternal, err)
	}
	if _, err := s.conn.Conn.Write(append(b, '\n')); err != nil {
		if ctx.Err() != nil {
			return sandboxinit.Result{}, engine.Infra(engine.InfraCancelled, ctx.Err())
		}
		return sandboxinit.Result{}, s.lost(ctx, err)
	}
	// The supervisor enforces the wall limit itself; the margin covers reaping
	// and cleaning, and catches a wedged supervisor.
	wait := time.Duration(req.WallMillis)*time.Millisecond + s.x.cfg.DaemonTimeout
	if req.Pipes != nil {
		wait += time.Duration(req.Pipes.OpenMillis) * time.Millisecond
	}
	line, err := s.readLine(ctx, wait)
	if err != nil {
		return sandboxinit.Result{}, err
	}
	var res sandboxinit.Result
	if err := json.Unmarshal([]byte(line), &res); err != nil || res.ID != req.ID {
		return sandboxinit.Result{}, engine.Infraf(engine.InfraInternal, "supervisor answer %.200q does not match request %d", line, req.ID)
	}
	return res, nil
}

// lost explains a broken supervisor channel: daemon gone, container OOM, or
// the supervisor died.
func (s *session) lost(ctx context.Context, cause error) error {
	if ctx.Err() != nil {
		return engine.Infra(engine.InfraCancelled, ctx.Err())
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if _, err := s.x.cli.Ping(pctx, client.PingOptions{}); err != nil {
		return engine.Infraf(engine.InfraDaemonUnreachable, "sandbox channel lost (%v); daemon ping: %w", cause, err)
	}
	// The channel breaks as the supervisor dies; the daemon records how a
	// moment later, so wait (bounded) for the container to stop first.
	w := s.x.cli.ContainerWait(pctx, s.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case <-w.Result:
	case <-w.Error:
	}
	if in, err := s.x.cli.ContainerInspect(pctx, s.id, client.ContainerInspectOptions{}); err == nil && in.Container.State != nil {
		return supervisorEnd(*in.Container.State, cause, s.diag.String())
	}
	return engine.Infraf(engine.InfraInternal, "sandbox channel lost: %v (%s)", cause, s.diag.String())
}

// supervisorEnd explains a supervisor that is gone from its container's
// state. The daemon's OOMKilled says the container saw an OOM kill at some
// time (under cgroup v1: any OOM, such as a program's own memory limit
// earlier in the job), not that the supervisor was its victim: only a
// SIGKILLed supervisor (exit 137) in such a container is reported as
// OOM-killed. Every answer carries the supervisor's last output.
func supervisorEnd(st container.State, cause error, diag string) error {
	if st.OOMKilled && st.ExitCode == 137 {
		return engine.Infraf(engine.InfraResourceExhausted, "sandbox supervisor was OOM-killed (%v; %s)", cause, diag)
	}
	return engine.Infraf(engine.InfraInternal, "sandbox supervisor stopped: status %s exit %d oom %t (%v; %s)",
		st.Status, st.ExitCode, st.OOMKilled, cause, diag)
}

// close kills and removes the container with its own bounded context, so a
// cancelled job still cleans up.
func (s *session) close(ctx context.Context) {
	s.closeMu.Do(func() {
		close(s.done)
		if s.conn.Conn != nil {
			s.conn.Close()
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.x.cfg.CleanupTimeout)
		defer cancel()
		_, err := s.x.cli.ContainerRemove(cctx, s.id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			s.x.cfg.Logger.Warn("sandbox container not removed; the janitor will retry", "container", short(s.id), "error", err)
		}
	})
}

// classifyDaemon maps a daemon call error to an infrastructure class.
func (x *Executor) classifyDaemon(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return engine.Infra(engine.InfraCancelled, ctx.Err())
	}
	msg := strings.ToLower(err.Error())
	switch {
	case client.IsErrConnectionFailed(err):
		return engine.Infraf(engine.InfraDaemonUnreachable, "%s: %w", what, err)
	case strings.Contains(msg, "seccomp"):
		return engine.Infraf(engine.InfraConfig, "%s: seccomp profile (%s) rejected: %w", what, describeSeccomp(x.cfg.SeccompProfilePath), err)
	case cerrdefs.IsNotFound(err) && strings.Contains(msg, "image"):
		return engine.Infraf(engine.InfraImageMissing, "%s: %w", what, err)
	case strings.Contains(msg, "no space left") || strings.Contains(msg, "cannot allocate memory") || strings.Contains(msg, "out of memory"):
		return engine.Infraf(engine.InfraResourceExhausted, "%s: %w", what, err)
	case isConnErr(err):
		return engine.Infraf(engine.InfraDaemonUnreachable, "%s: %w", what, err)
	}
	return engine.Infraf(engine.InfraContainerCreate, "%s: %w", what, err)
}

func isConnErr(err error) bool {
	msg := err.Error()
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(msg, "connection refused") || strings.Contains(msg, "connection reset") ||
		strings.Contains(msg, "no such file or directory") && strings.Contains(msg, ".sock")
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// boundedBuffer keeps the first max bytes written to it.
type boundedBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(string(b.buf))
}
