package sandboxinit

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// CopyNoSpace is the exit code of the copy command when the target is full
// (ENOSPC, EDQUOT, EFBIG): the engine tells a full compile space or a full
// workspace from its own faults by it.
const CopyNoSpace = 3

// copyCmd is the "copy <from> <to>" command: the engine runs it as a
// program of the sandbox (as the compile uid, under a run's limits) to move
// the sources into the compile space and the build out of it (docs/engine.md,
// "Compile sandbox"). It exits 0, CopyNoSpace, or 1 with the reason on stderr.
func copyCmd(from, to string) int {
	if err := copyTree(from, to); err != nil {
		fmt.Fprintln(os.Stderr, "kece-sandbox-init copy:", err)
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EFBIG) {
			return CopyNoSpace
		}
		return 1
	}
	return 0
}

// copyTree copies the regular files and directories under from into to, an
// existing directory, keeping their permission bits (never set-id bits) and
// modification times (Python checks a cached module's source time).
// Anything else — a symbolic link, a FIFO, a device — is refused, and no
// link is followed, so the copy reads only what lies under from.
func copyTree(from, to string) error {
	type dir struct {
		path  string
		perm  fs.FileMode
		mtime time.Time
	}
	var dirs []dir
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		switch {
		case rel == ".":
			return nil
		case d.IsDir():
			// Writable while it is filled; its own mode once it is full.
			if err := os.Mkdir(dst, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dir{dst, st.Mode().Perm(), st.ModTime()})
			return nil
		case st.Mode().IsRegular():
			return copyRegular(p, dst, st)
		}
		return fmt.Errorf("%s is %s: only regular files and directories are copied", rel, fileKind(st.Mode()))
	})
	if err != nil {
		return err
	}
	for _, d := range slices.Backward(dirs) {
		if err := os.Chmod(d.path, d.perm); err != nil {
			return err
		}
		if err := os.Chtimes(d.path, d.mtime, d.mtime); err != nil {
			return err
		}
	}
	return nil
}

// copyRegular copies one regular file to a new file dst (no link followed
// on either side) with st's permission bits and modification time.
func copyRegular(src, dst string, st fs.FileInfo) error {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	if now, err := in.Stat(); err != nil || !now.Mode().IsRegular() {
		return fmt.Errorf("%s is no longer a regular file", src)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	// The umask may have cut the bits: set them as they were.
	if err := os.Chmod(dst, st.Mode().Perm()); err != nil {
		return err
	}
	return os.Chtimes(dst, st.ModTime(), st.ModTime())
}
