//go:build linux

package artifact

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// accessTime is the file's atime; the cache stores its LRU order there so the
// order survives a restart.
func accessTime(info fs.FileInfo) time.Time {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Atim.Sec, st.Atim.Nsec)
	}
	return info.ModTime()
}

// lockDir takes an exclusive, non-blocking flock on dir/.lock so that two
// node processes never share (and clean up under) one cache directory. The
// lock dies with the process, so a crash leaves nothing to remove by hand.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(dir+"/.lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("cache directory %s is in use by another process: %w", dir, err)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return f, nil
}
