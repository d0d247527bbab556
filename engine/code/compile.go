package code

// The compile step: a runtime's sources, copied into the sandbox's bounded
// compile space, compiled there under the compile limits, and the build
// copied out to the box the runs use — or, when the node's compile cache
// holds the outcome of exactly these inputs, that outcome restored into the
// box with no compile at all (docs/engine.md, "What a job waits for").

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code/sandboxinit"
	"github.com/kece-oj/kece/engine/compilecache"
	"github.com/moby/moby/client"
)

// checkImage refuses a missing image (or a digest reference that does not
// resolve to a local image) before a container is created, and returns the
// image's content digest (its local ID), which names its bytes in the
// compile cache's keys.
func (x *Executor) checkImage(ctx context.Context, image string) (string, error) {
	dctx, cancel := context.WithTimeout(ctx, x.cfg.DaemonTimeout)
	defer cancel()
	ins, err := x.cli.ImageInspect(dctx, image)
	if err != nil {
		if ctx.Err() != nil {
			return "", engine.Infra(engine.InfraCancelled, ctx.Err())
		}
		if client.IsErrConnectionFailed(err) || isConnErr(err) {
			return "", engine.Infraf(engine.InfraDaemonUnreachable, "inspect image %s: %w", image, err)
		}
		return "", engine.Infraf(engine.InfraImageMissing, "image %s missing or digest mismatch: %w", image, err)
	}
	if ins.ID == "" {
		return "", engine.Infraf(engine.InfraImageMissing, "image %s has no content digest", image)
	}
	return ins.ID, nil
}

// compiled is the outcome of a compile step.
type compiled struct {
	ok  bool
	log string // bounded compiler output, with a note when cut or killed
	// message says why a compile failed, with the limit figure when the
	// compiler was stopped ("compilation exceeded 10 s CPU").
	message string
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
		Env:        compileEnv,
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

// compileCacheVersion changes whenever what a compile step leaves in the box
// changes for the same inputs (the copy-out rules, the box's ownership), so
// entries of an older engine are never used.
const compileCacheVersion = "kece-compile-step-v1"

// compileInputs are the sources a compile step reads: every file under the
// work dir's src, by name and digest.
func (j *job) compileInputs(src string) ([]compilecache.Input, error) {
	root := filepath.Join(j.dir, src)
	var in []compilecache.Input
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		in = append(in, compilecache.Input{Name: filepath.ToSlash(rel), Digest: sha256.Sum256(b)})
		return nil
	})
	if err != nil {
		return nil, hostErr("compile inputs", err)
	}
	return in, nil
}

// compileKey names everything the compile of rt's sources in the work
// dir's src reads or is bounded by: the image's bytes, the language, the
// command as run with its environment, every limit, the compile space, the
// supervisor's protocol, and every source by digest.
func (j *job) compileKey(rt engine.RuntimeSpec, imageID, src string) (compilecache.Key, error) {
	in, err := j.compileInputs(src)
	if err != nil {
		return compilecache.Key{}, err
	}
	cfg := j.x.cfg
	return compilecache.Key{
		Image: imageID, Language: rt.Language + "|" + rt.Pool + "|" + rt.Standard,
		Command: expand(rt.CompileCmd, j.task.Limits.MemoryBytes),
		Env:     compileEnv,
		Limits: []string{compileCacheVersion, sandboxinit.Version,
			fmt.Sprintf("cpu=%s wall=%s memory=%d", rt.CompileTime, rt.CompileWall(), max(rt.CompileMemoryBytes, j.memLimit)),
			fmt.Sprintf("space=%d files=%d fsize=%d nproc=%d nofile=%d log=%d tmp=%d", cfg.CompileSpaceBytes, cfg.CompileSpaceFiles,
				CompileOutputBytesDefault, cfg.ProcessesPerRun, cfg.OpenFiles, cfg.CompileLogBytes, cfg.TmpfsBytes+j.workBytes)},
		Inputs: in,
	}, nil
}

// compileEnv is the environment every compile runs with.
var compileEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=" + tmpDir, "TMPDIR=" + tmpDir}

// cachedCompile looks the compile of rt's sources (work dir src) up in the
// node's compile cache and, on a hit, restores the build into the work
// dir's box. It returns the key to store the compile's outcome under after
// a miss; with the cache off it always misses.
func (j *job) cachedCompile(rt engine.RuntimeSpec, imageID, src, box string) (key compilecache.Key, c compiled, hit bool, err error) {
	if j.x.cache == nil {
		return key, c, false, nil
	}
	key, err = j.compileKey(rt, imageID, src)
	if err != nil {
		return key, c, false, err
	}
	o, hit, err := j.x.cache.Get(key, filepath.Join(j.dir, box), 0)
	if err != nil {
		return key, c, false, hostErr("compile cache", err)
	}
	if !hit {
		return key, c, false, nil
	}
	return key, compiled{ok: o.OK, log: o.Log, message: o.Message}, true, nil
}

// storeCompile puts a finished compile's outcome into the cache: a build
// (the whole box, as the copy-out left it) or an ordinary compile error. A
// compile stopped by a limit (time, memory, space, a signal) is not stored:
// under another load the same inputs may compile. A failure to store is
// logged; the job judges on.
func (j *job) storeCompile(key compilecache.Key, c compiled, box string) {
	if j.x.cache == nil || (!c.ok && c.message != compileFailedMessage) {
		return
	}
	dir := filepath.Join(j.dir, box)
	var outs []string
	if c.ok {
		names, ok, err := compilecache.Outputs(dir)
		if err != nil || !ok {
			return
		}
		outs = names
	}
	if _, err := j.x.cache.Put(key, compilecache.Outcome{OK: c.ok, Log: c.log, Message: c.message}, dir, outs); err != nil {
		j.x.cfg.Logger.Warn("compile cache: entry not stored", "job_id", j.task.JobID, "error", err)
	}
}
