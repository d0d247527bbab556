package sandboxinit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// statusFD is the launch stage's close-on-exec pipe to the supervisor: nothing
// arrives on it when the exec succeeds, an error text when it fails.
const statusFD = 3

// launch applies the per-run limits to itself, drops to the run uid and execs
// the program. It never returns on success.
func launch(specJSON string) int {
	status := os.NewFile(statusFD, "status")
	syscall.CloseOnExec(statusFD)
	fail := func(format string, args ...any) int {
		fmt.Fprintf(status, format, args...)
		return 127
	}
	var s launchSpec
	if err := json.Unmarshal([]byte(specJSON), &s); err != nil {
		return fail("launch spec: %v", err)
	}
	if len(s.Argv) == 0 {
		return fail("launch spec: empty argv")
	}
	// Raising our own OOM score is always allowed; it makes the kernel pick the
	// user program, never the supervisor, when the container runs out of memory.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)

	limits := []struct {
		res  int
		soft uint64
		hard uint64
	}{
		{syscall.RLIMIT_CPU, s.CPUSeconds, s.CPUSeconds + 1},
		{syscall.RLIMIT_FSIZE, uint64(s.FileSize), uint64(s.FileSize)},
		{syscall.RLIMIT_STACK, uint64(s.Stack), uint64(s.Stack)},
		{syscall.RLIMIT_CORE, 0, 0},
		{syscall.RLIMIT_NOFILE, uint64(s.OpenFiles), uint64(s.OpenFiles)},
		{rlimitNPROC, uint64(s.Processes), uint64(s.Processes)},
	}
	if s.AddressSpace > 0 {
		limits = append(limits, struct {
			res  int
			soft uint64
			hard uint64
		}{syscall.RLIMIT_AS, uint64(s.AddressSpace), uint64(s.AddressSpace)})
	}
	for _, l := range limits {
		if err := syscall.Setrlimit(l.res, &syscall.Rlimit{Cur: l.soft, Max: l.hard}); err != nil {
			return fail("setrlimit %d: %v", l.res, err)
		}
	}
	if s.UID <= 0 || s.GID <= 0 {
		return fail("refusing to run user code as uid %d gid %d", s.UID, s.GID)
	}
	// Order matters: groups and gid while we still have CAP_SETGID, then the
	// uid, which clears every capability (no-new-privileges keeps them gone).
	if err := syscall.Setgroups(nil); err != nil {
		return fail("setgroups: %v", err)
	}
	if err := syscall.Setgid(s.GID); err != nil {
		return fail("setgid: %v", err)
	}
	if err := syscall.Setuid(s.UID); err != nil {
		return fail("setuid: %v", err)
	}
	if err := syscall.Chdir(s.Dir); err != nil {
		return fail("chdir %s: %v", s.Dir, err)
	}
	path, err := lookPath(s.Argv[0], s.Env)
	if err != nil {
		return fail("%v", err)
	}
	err = syscall.Exec(path, s.Argv, s.Env)
	return fail("exec %s: %v", path, err)
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
