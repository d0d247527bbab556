package sandboxinit

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
)

// placeFiles lays out a file I/O run before it starts: symlinks to the
// build's entries and the input file, all owned by root in the sticky Dir.
// It returns what it created, for removeFiles.
func placeFiles(f *RunFiles, dir string) ([]string, error) {
	var created []string
	if f.Link != "" {
		entries, err := os.ReadDir(f.Link)
		if err != nil {
			return created, fmt.Errorf("files: list %s: %w", f.Link, err)
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if err := os.Symlink(filepath.Join(f.Link, e.Name()), p); err != nil {
				return created, fmt.Errorf("files: link %s: %w", e.Name(), err)
			}
			created = append(created, p)
		}
	}
	if f.Input != "" {
		if err := copyInput(f.InputFrom, f.Input); err != nil {
			return created, err
		}
		created = append(created, f.Input)
	}
	return created, nil
}

// copyInput copies a trusted input to a new root-owned, read-only file.
func copyInput(from, to string) error {
	in, err := os.OpenFile(from, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("files: input: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o444)
	if err != nil {
		return fmt.Errorf("files: input file %s (a name the build already uses?): %w", filepath.Base(to), err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("files: input file: %w", err)
	}
	return out.Close()
}

// removeFiles removes what placeFiles created (root may: it owns them and
// the sticky directory they are in).
func removeFiles(created []string) {
	for _, p := range created {
		_ = os.Remove(p)
	}
}

// collectOutput copies the program's output file once every process of the
// run is dead, so nothing can swap it between the checks and the copy. Only
// a regular file is copied (never a symlink, FIFO, device or directory); it
// is opened as the run uid, which owns it, so its mode does not matter. It
// returns the Result.OutputFile outcome, or an error for a fault of ours.
func collectOutput(f *RunFiles, uid, gid int) (string, error) {
	st, err := os.Lstat(f.Output)
	if errors.Is(err, fs.ErrNotExist) {
		return OutputFileMissing, nil
	}
	if err != nil {
		return "", fmt.Errorf("files: output: %w", err)
	}
	if !st.Mode().IsRegular() {
		return OutputFileNotRegular + ": " + fileKind(st.Mode()), nil
	}
	src, err := openAsRunUser(f.Output, uid, gid)
	if err != nil {
		return "", fmt.Errorf("files: output: %w", err)
	}
	defer src.Close()
	if st, err := src.Stat(); err != nil || !st.Mode().IsRegular() {
		return OutputFileNotRegular, nil
	}
	dst, err := os.OpenFile(f.OutputTo, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return "", fmt.Errorf("files: output copy: %w", err)
	}
	if _, err := io.Copy(dst, io.LimitReader(src, f.OutputBytes+1)); err != nil {
		dst.Close()
		return "", fmt.Errorf("files: output copy: %w", err)
	}
	return "", dst.Close()
}

// fileKind names a non-regular file type.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a plain file"
}

// openAsRunUser opens path (no symlinks) on a locked thread that briefly
// takes the run uid, after giving the owner read permission: the supervisor
// holds no CAP_DAC_OVERRIDE, and a program may have chmod'ed its file 000.
func openAsRunUser(path string, uid, gid int) (*os.File, error) {
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		runtime.LockOSThread()
		var o opened
		err := asRunUser(uid, gid, func() error {
			if err := syscall.Chmod(path, 0o600); err != nil {
				return err
			}
			o.f, o.err = os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
			return o.err
		})
		if err != nil && o.err == nil {
			o.err = err
		}
		ch <- o
		if errors.Is(err, errThreadTainted) {
			return // exit locked: the runtime terminates this thread
		}
		runtime.UnlockOSThread()
	}()
	o := <-ch
	return o.f, o.err
}
