package code

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Defaults for Config.
const (
	// ContainerCPUsDefault is the CPU quota of one sandbox container.
	ContainerCPUsDefault = 1.0
	// PidsLimitDefault caps processes+threads of a whole sandbox container.
	PidsLimitDefault = 256
	// ProcessesPerRunDefault is RLIMIT_NPROC of one run (the run uid is unique
	// per job, so the count only covers that job's program).
	ProcessesPerRunDefault = 128
	// OpenFilesDefault is the container nofile ulimit and the per-run RLIMIT_NOFILE.
	OpenFilesDefault = 256
	// TmpfsBytesDefault is the size of the /tmp tmpfs (counted in container memory).
	TmpfsBytesDefault = 64 << 20
	// CompileLogBytesDefault bounds the compiler output kept for a CE.
	CompileLogBytesDefault = 16 << 10
	// RunLogBytesDefault bounds the stderr kept per case.
	RunLogBytesDefault = 4 << 10
	// CompileOutputBytesDefault is RLIMIT_FSIZE while compiling.
	CompileOutputBytesDefault = 256 << 20
	// CompileSpaceBytesDefault is the size of the compile space: the tmpfs
	// a compile works in, holding the sources and everything the compiler
	// writes beside them (docs/engine.md, "Compile sandbox").
	CompileSpaceBytesDefault = 64 << 20
	// CompileSpaceFilesDefault is how many files and directories the
	// compile space holds (its tmpfs's nr_inodes).
	CompileSpaceFilesDefault = 1024
	// compileSpaceBytesMin and compileSpaceFilesMin are the smallest compile
	// space Validate accepts: room for a submission's 16 further files, a
	// grader's and a build.
	compileSpaceBytesMin = 1 << 20
	compileSpaceFilesMin = 64
	// CompileCacheDirName is the compile cache's directory under the
	// workspace when Config.CompileCacheDir is empty. Work dirs are named
	// after the node (janitor.go), so the janitor never takes it for one.
	CompileCacheDirName = ".compile-cache"
	// CleanupTimeoutDefault bounds container removal after the job context ends.
	CleanupTimeoutDefault = 10 * time.Second
	// DaemonTimeoutDefault bounds single daemon calls (create, start, inspect).
	DaemonTimeoutDefault = 30 * time.Second
	// CheckerTimeDefault is the special checker's CPU limit per case (its
	// wall limit is twice that). It is the problem's program, not the
	// contestant's, so the limit is generous; running over it is CHECKER_FAILED.
	CheckerTimeDefault = 10 * time.Second
)

// Config configures an Executor. Zero values take the …Default constants,
// except the fields documented as required.
type Config struct {
	// NodeID labels every container so Janitor can find leftovers. Required.
	NodeID string
	// Workspace is a host directory for per-job work directories (bind-mounted
	// into the sandbox). Required; created if missing.
	Workspace string
	// SupervisorPath is the static kece-sandbox-init binary mounted read-only
	// into every container. Required.
	SupervisorPath string
	// SeccompProfilePath is a Docker seccomp profile (JSON). Empty selects the
	// built-in profile (see seccomp.go). A path that cannot be read or parsed is
	// a configuration error; there is no fallback to "unconfined".
	SeccompProfilePath string
	// DockerHost is the daemon address (e.g. unix:///var/run/docker.sock);
	// empty uses DOCKER_HOST or the default socket.
	DockerHost string

	ContainerCPUs   float64
	PidsLimit       int64
	ProcessesPerRun int64
	OpenFiles       int64
	TmpfsBytes      int64
	// CompileSpaceBytes and CompileSpaceFiles bound the compile space:
	// what a compile may write, in bytes and in files, on a tmpfs charged
	// to the sandbox's memory instead of the node's disk.
	CompileSpaceBytes int64
	CompileSpaceFiles int64
	CompileLogBytes   int
	RunLogBytes       int
	// CompileCacheDir holds the node's compile cache (engine/compilecache):
	// empty = CompileCacheDirName under Workspace. CompileCacheBytes bounds
	// it (0 = compilecache.MaxBytesDefault). NoCompileCache turns it off:
	// every job compiles.
	CompileCacheDir   string
	CompileCacheBytes int64
	NoCompileCache    bool
	CleanupTimeout    time.Duration
	DaemonTimeout     time.Duration
	CheckerTime       time.Duration

	// Logger receives one line per container lifecycle problem; nil = slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	c.ContainerCPUs = cmp.Or(c.ContainerCPUs, ContainerCPUsDefault)
	c.PidsLimit = cmp.Or(c.PidsLimit, PidsLimitDefault)
	c.ProcessesPerRun = cmp.Or(c.ProcessesPerRun, ProcessesPerRunDefault)
	c.OpenFiles = cmp.Or(c.OpenFiles, OpenFilesDefault)
	c.TmpfsBytes = cmp.Or(c.TmpfsBytes, TmpfsBytesDefault)
	c.CompileSpaceBytes = cmp.Or(c.CompileSpaceBytes, CompileSpaceBytesDefault)
	c.CompileSpaceFiles = cmp.Or(c.CompileSpaceFiles, CompileSpaceFilesDefault)
	c.CompileLogBytes = cmp.Or(c.CompileLogBytes, CompileLogBytesDefault)
	c.CompileCacheDir = cmp.Or(c.CompileCacheDir, filepath.Join(c.Workspace, CompileCacheDirName))
	c.RunLogBytes = cmp.Or(c.RunLogBytes, RunLogBytesDefault)
	c.CleanupTimeout = cmp.Or(c.CleanupTimeout, CleanupTimeoutDefault)
	c.DaemonTimeout = cmp.Or(c.DaemonTimeout, DaemonTimeoutDefault)
	c.CheckerTime = cmp.Or(c.CheckerTime, CheckerTimeDefault)
	c.Logger = cmp.Or(c.Logger, slog.Default())
}

// Validate refuses incomplete or unsafe configuration. It does not touch the
// daemon; New does that lazily per call.
func (c Config) Validate() error {
	var errs []error
	if c.NodeID == "" {
		errs = append(errs, errors.New("node id is empty"))
	}
	if c.Workspace == "" || !filepath.IsAbs(c.Workspace) {
		errs = append(errs, fmt.Errorf("workspace %q must be an absolute path", c.Workspace))
	}
	if c.SupervisorPath == "" || !filepath.IsAbs(c.SupervisorPath) {
		errs = append(errs, fmt.Errorf("supervisor path %q must be an absolute path", c.SupervisorPath))
	} else if st, err := os.Stat(c.SupervisorPath); err != nil {
		errs = append(errs, fmt.Errorf("supervisor: %w", err))
	} else if !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		errs = append(errs, fmt.Errorf("supervisor %s is not an executable file", c.SupervisorPath))
	} else if err := checkStatic(c.SupervisorPath); err != nil {
		errs = append(errs, err)
	}
	if c.ContainerCPUs < 0 || c.PidsLimit < 0 || c.ProcessesPerRun < 0 || c.OpenFiles < 0 || c.TmpfsBytes < 0 ||
		c.CompileLogBytes < 0 || c.RunLogBytes < 0 || c.CleanupTimeout < 0 || c.DaemonTimeout < 0 || c.CheckerTime < 0 {
		errs = append(errs, errors.New("limits must not be negative"))
	}
	if c.CompileCacheDir != "" && !filepath.IsAbs(c.CompileCacheDir) {
		errs = append(errs, fmt.Errorf("compile cache dir %q must be an absolute path", c.CompileCacheDir))
	}
	if c.CompileCacheBytes < 0 {
		errs = append(errs, errors.New("compile cache bytes must not be negative (NoCompileCache turns the cache off)"))
	}
	if c.CompileSpaceBytes != 0 && c.CompileSpaceBytes < compileSpaceBytesMin {
		errs = append(errs, fmt.Errorf("compile space %d bytes is below the minimum %d", c.CompileSpaceBytes, compileSpaceBytesMin))
	}
	if c.CompileSpaceFiles != 0 && c.CompileSpaceFiles < compileSpaceFilesMin {
		errs = append(errs, fmt.Errorf("compile space of %d files is below the minimum %d", c.CompileSpaceFiles, compileSpaceFilesMin))
	}
	if c.PidsLimit != 0 && c.ProcessesPerRun > c.PidsLimit {
		errs = append(errs, fmt.Errorf("processes per run %d exceed the container pids limit %d", c.ProcessesPerRun, c.PidsLimit))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("code executor config: %w", err)
	}
	return nil
}
