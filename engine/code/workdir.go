package code

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/kece-oj/kece/engine"
	"github.com/moby/moby/api/types/mount"
)

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
	if j.dir == "" { // a warm sandbox's job has its dir already (adopt)
		var r [6]byte
		_, _ = rand.Read(r[:])
		j.dir = filepath.Join(j.x.cfg.Workspace, workDirName(j.x.cfg.NodeID, j.task.JobID, j.task.LeaseEpoch, hex.EncodeToString(r[:])))
	}
	if err := os.MkdirAll(j.dir, 0o711); err != nil {
		return hostErr("work dir", err)
	}
	dirs := userDirs
	if j.task.Checker.Interacts() {
		dirs = append(dirs, workSubdir{pipeSub, 0o700})
	}
	if j.task.Checker.HasProgram() {
		dirs = append(dirs, workSubdir{"exp", 0o755}, workSubdir{"cin", 0o755}, workSubdir{"csrc", 0o755},
			workSubdir{"cbox", 0o755}, workSubdir{"cout", 0o755})
	}
	for _, d := range dirs {
		if err := mkdirOwned(filepath.Join(j.dir, d.sub), d.mode, 0); err != nil {
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

// workSubdir is one directory of a job's work dir, root's, with its mode.
type workSubdir struct {
	sub  string
	mode os.FileMode
}

// userDirs are the work dir's directories the user's sandbox mounts.
var userDirs = []workSubdir{{"src", 0o755}, {"box", 0o755}, {"in", 0o700}, {"out", 0o755}}

// mkdirOwned makes p (or takes it as it is) with exactly mode, owned by uid.
// A directory that is so already is left alone: a warm sandbox's (warm.go)
// is root's, and a node without CAP_FOWNER (the systemd unit's) may not
// chmod what it does not own.
func mkdirOwned(p string, mode os.FileMode, uid int) error {
	if st, err := os.Lstat(p); err == nil && st.IsDir() && st.Mode().Perm() == mode.Perm() {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) == uid && int(sys.Gid) == uid {
			return nil
		}
	}
	if err := os.MkdirAll(p, mode); err != nil {
		return err
	}
	if err := os.Chmod(p, mode); err != nil {
		return err
	}
	return os.Chown(p, uid, uid)
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

// cleanupAfter removes the job's sandboxes and work dir: after a verdict in
// the background, so the verdict is not held back by container removal
// (every program of the job is dead by then: the supervisor kills them
// after each run, and it alone is left in each container); after an error
// or a cancellation (a lost lease) before Execute returns, as always.
func (j *job) cleanupAfter(ctx context.Context, err error) {
	if err != nil || ctx.Err() != nil {
		j.cleanup(ctx)
		return
	}
	j.x.removing.Add(1)
	go func() {
		defer j.x.removing.Done()
		j.cleanup(context.WithoutCancel(ctx))
	}()
}

func (j *job) cleanup(ctx context.Context) {
	if j.warm != nil { // taken, but the job ended before it ran anything
		j.userSession, j.warm = j.warm.s, nil
	}
	for _, s := range append([]*session{j.userSession, j.checkerSession}, j.procSessions...) {
		if s != nil {
			s.close(ctx)
			j.x.warm.done(s.id)
		}
	}
	if j.dir != "" {
		if err := os.RemoveAll(j.dir); err != nil {
			j.x.cfg.Logger.Warn("work dir not removed", "dir", j.dir, "error", err)
		}
	}
}

func (j *job) mounts(box string, extra ...mount.Mount) []mount.Mount {
	return workMounts(j.dir, box, extra...)
}

// workMounts are the user sandbox's bind mounts of work dir dir: box (the
// build, where runs start), the inputs read-only, and the stdout files.
func workMounts(dir, box string, extra ...mount.Mount) []mount.Mount {
	b := func(src, dst string, ro bool) mount.Mount {
		return mount.Mount{Type: mount.TypeBind, Source: filepath.Join(dir, src), Target: dst, ReadOnly: ro}
	}
	return append([]mount.Mount{b(box, boxDir, false), b("in", inDir, true), b("out", outDir, false)}, extra...)
}
