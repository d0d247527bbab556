package sandboxinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxStack is the supervisor's own soft stack limit: exec lays out a
// program's address space from the limit in force at exec time, so it must be
// at least as large as any per-run stack limit (which is lowered later).
const maxStack = 1 << 30

// prepareSelf raises the supervisor's soft stack limit once.
func prepareSelf() error {
	var st syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &st); err != nil {
		return fmt.Errorf("getrlimit stack: %w", err)
	}
	st.Cur = min(uint64(maxStack), st.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_STACK, &st); err != nil {
		return fmt.Errorf("setrlimit stack: %w", err)
	}
	return nil
}

// errThreadTainted means a thread could not get its root credentials back; its
// goroutine must end locked so the runtime discards the thread.
var errThreadTainted = errors.New("thread credentials could not be restored")

// asRunUser runs f on the current (locked) OS thread with real and effective
// ids switched to uid/gid and the saved ids kept at root. Only this thread
// changes (raw syscalls, not Go's all-threads Setuid): prlimit on another
// process is allowed between equal real uids without CAP_SYS_RESOURCE, which
// container runtimes may not be able to grant.
func asRunUser(uid, gid int, f func() error) error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESGID, uintptr(gid), uintptr(gid), 0); e != 0 {
		return fmt.Errorf("setresgid: %w", e)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, uintptr(uid), uintptr(uid), 0); e != 0 {
		if _, _, e2 := syscall.RawSyscall(syscall.SYS_SETRESGID, 0, 0, 0); e2 != 0 {
			return errThreadTainted
		}
		return fmt.Errorf("setresuid: %w", e)
	}
	err := f()
	_, _, e1 := syscall.RawSyscall(syscall.SYS_SETRESUID, 0, 0, 0)
	_, _, e2 := syscall.RawSyscall(syscall.SYS_SETRESGID, 0, 0, 0)
	if e1 != 0 || e2 != 0 {
		return errThreadTainted
	}
	return err
}

type startResult struct {
	pid int
	err error
}

// startTraced forks the program as the run uid/gid (which clears every
// capability before exec) with PTRACE_TRACEME, so the kernel stops it right
// after exec, before its first instruction. The supervisor then applies the
// per-run limits with prlimit, raises its OOM score and detaches: no user
// instruction runs without its limits, and no intermediate process costs time.
//
// It runs on its own locked goroutine: ptrace requests must come from the
// thread that forked the tracee, and that thread's credentials change briefly.
func startTraced(req Request, files []uintptr) (int, error) {
	ch := make(chan startResult, 1)
	go func() {
		runtime.LockOSThread()
		pid, err := startLocked(req, files)
		ch <- startResult{pid, err}
		if errors.Is(err, errThreadTainted) {
			return // exit locked: the runtime terminates this thread
		}
		runtime.UnlockOSThread()
	}()
	r := <-ch
	return r.pid, r.err
}

func startLocked(req Request, files []uintptr) (int, error) {
	path, err := lookPath(req.Argv[0], req.Env)
	if err != nil {
		return 0, err
	}
	// The backstop if the supervisor cannot poll: whole seconds, at least one
	// above the limit. It counts one process's CPU, never more than the
	// measured tree, so SIGXCPU only ever arrives past the limit.
	cpu := uint64((req.CPUMillis+999)/1000) + 1
	limits := []struct {
		res       int
		soft, max uint64
	}{
		{unix.RLIMIT_CPU, cpu, cpu + 1},
		{unix.RLIMIT_FSIZE, uint64(req.FileSize), uint64(req.FileSize)},
		{unix.RLIMIT_STACK, uint64(req.Stack), uint64(req.Stack)},
		{unix.RLIMIT_CORE, 0, 0},
		{unix.RLIMIT_NOFILE, uint64(req.OpenFiles), uint64(req.OpenFiles)},
		{unix.RLIMIT_NPROC, uint64(req.Processes), uint64(req.Processes)},
	}
	if req.AddressSpace > 0 {
		limits = append(limits, struct {
			res       int
			soft, max uint64
		}{unix.RLIMIT_AS, uint64(req.AddressSpace), uint64(req.AddressSpace)})
	}
	for _, l := range limits {
		if l.max == 0 && l.res != unix.RLIMIT_CORE {
			return 0, fmt.Errorf("limit %d must be positive", l.res)
		}
	}
	pid, err := syscall.ForkExec(path, req.Argv, &syscall.ProcAttr{
		Dir:   req.Dir,
		Env:   req.Env,
		Files: files,
		Sys: &syscall.SysProcAttr{
			Setpgid:    true,
			Ptrace:     true,
			Credential: &syscall.Credential{Uid: uint32(req.UID), Gid: uint32(req.GID), Groups: []uint32{}},
		},
	})
	if err != nil {
		return 0, fmt.Errorf("exec %s: %w", path, err)
	}
	abort := func(e error) (int, error) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WALL, nil)
		return 0, e
	}
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, syscall.WALL, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return abort(fmt.Errorf("wait for exec stop: %w", err))
		}
		break
	}
	if !ws.Stopped() || ws.StopSignal() != syscall.SIGTRAP {
		return abort(fmt.Errorf("program did not stop at exec (status %#x)", uint32(ws)))
	}
	err = asRunUser(req.UID, req.GID, func() error {
		for _, l := range limits {
			if err := unix.Prlimit(pid, l.res, &unix.Rlimit{Cur: l.soft, Max: l.max}, nil); err != nil {
				return fmt.Errorf("prlimit %d: %w", l.res, err)
			}
		}
		// Owned by the run uid now; raising is always allowed. The kernel
		// then picks the program, never the supervisor, on container OOM.
		if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte("1000"), 0); err != nil {
			return fmt.Errorf("oom_score_adj: %w", err)
		}
		return nil
	})
	if err != nil {
		return abort(err)
	}
	if err := syscall.PtraceDetach(pid); err != nil {
		return abort(fmt.Errorf("ptrace detach: %w", err))
	}
	return pid, nil
}

// lookPath resolves name against PATH from env (not from our own environment).
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec %s: not found in PATH %s", name, path)
}

// clean removes everything inside dir; it runs as the run uid so it can delete
// whatever the program created there, however it set the modes.
func clean(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 1
	}
	rc := 0
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		_ = filepath.WalkDir(p, func(q string, d os.DirEntry, err error) error {
			if d != nil && d.IsDir() {
				_ = os.Chmod(q, 0o700)
			}
			return nil
		})
		if err := os.RemoveAll(p); err != nil {
			rc = 1
		}
	}
	return rc
}
