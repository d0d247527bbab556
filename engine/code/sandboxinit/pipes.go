package sandboxinit

import (
	"errors"
	"fmt"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// openPipes opens the FIFOs of an interaction: Stdin for reading, Stdout
// for writing, then Fds, each with a blocking open, all in path order.
//
// A blocking open of a FIFO returns only once the other direction is open
// too (a reader waits for a writer and the reverse), so when both calls have
// returned the peer holds its ends and the program can neither read a false
// end of file nor die of SIGPIPE before the peer started. Both supervisors of
// an interaction open their paths in one global (sorted) order, and each
// FIFO is shared by exactly two of them, so the opens pair up instead of
// waiting on each other (with N processes and a manager as well). A peer that never comes is
// bounded by OpenMillis: the waiting open is released by opening the FIFO in
// both directions ourselves, and the run is refused as a setup error.
//
// The descriptors are raw (not os.File): the Go runtime would switch a
// pollable FIFO to non-blocking mode, which the program must not inherit.
func openPipes(p *RunPipes) (stdin, stdout int, extra []int, err error) {
	type end struct {
		path string
		mode int
		fd   *int
	}
	var ends []end
	stdin, stdout = -1, -1
	if p.Stdin != "" {
		ends = append(ends, end{p.Stdin, syscall.O_RDONLY, &stdin})
	}
	if p.Stdout != "" {
		ends = append(ends, end{p.Stdout, syscall.O_WRONLY, &stdout})
	}
	extra = make([]int, len(p.Fds))
	for i, f := range p.Fds {
		extra[i] = -1
		mode := syscall.O_RDONLY
		if f.Write {
			mode = syscall.O_WRONLY
		}
		ends = append(ends, end{f.Path, mode, &extra[i]})
	}
	seen := map[string]bool{}
	for _, e := range ends {
		if e.path == "" || seen[e.path] {
			return -1, -1, nil, errors.New("pipes need distinct, non-empty FIFO paths")
		}
		seen[e.path] = true
	}
	if len(ends) < 2 || (len(p.Fds) == 0 && len(ends) != 2) || p.OpenMillis <= 0 {
		return -1, -1, nil, errors.New("pipes need stdin and stdout, or fds, and open_ms")
	}
	deadline := time.Now().Add(time.Duration(p.OpenMillis) * time.Millisecond)
	sort.Slice(ends, func(a, b int) bool { return ends[a].path < ends[b].path })
	for _, e := range ends {
		fd, err := openFIFO(e.path, e.mode, time.Until(deadline))
		if err != nil {
			closeFDs(append([]int{stdin, stdout}, extra...)...)
			return -1, -1, nil, err
		}
		*e.fd = fd
	}
	return stdin, stdout, extra, nil
}

// openFIFO opens path with a blocking open bounded by wait, and refuses
// anything but a FIFO reached without a symbolic link.
func openFIFO(path string, mode int, wait time.Duration) (int, error) {
	type opened struct {
		fd  int
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		for {
			fd, err := syscall.Open(path, mode|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			ch <- opened{fd, err}
			return
		}
	}()
	t := time.NewTimer(max(wait, 0))
	defer t.Stop()
	var o opened
	timedOut := false
	select {
	case o = <-ch:
	case <-t.C:
		// Release the blocked open: a descriptor open both ways is a
		// reader and a writer at once.
		timedOut = true
		if fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_NONBLOCK|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0); err == nil {
			defer syscall.Close(fd)
		}
		select {
		case o = <-ch:
		case <-time.After(time.Second):
			// Still blocked (the path cannot be opened both ways): leave the
			// open behind; the run is refused either way.
			return -1, fmt.Errorf("pipe %s: the other side did not open it within %s", path, wait.Round(time.Millisecond))
		}
	}
	if o.err != nil {
		return -1, fmt.Errorf("pipe %s: %w", path, o.err)
	}
	if timedOut {
		syscall.Close(o.fd)
		return -1, fmt.Errorf("pipe %s: the other side did not open it within %s", path, wait.Round(time.Millisecond))
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(o.fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		syscall.Close(o.fd)
		return -1, fmt.Errorf("pipe %s: not a FIFO", path)
	}
	return o.fd, nil
}

func closeFDs(fds ...int) {
	for _, fd := range fds {
		if fd >= 0 {
			syscall.Close(fd)
		}
	}
}

// holdPipes replaces the supervisor's descriptors of the program's FIFOs
// (its stdin first, -1 for none) by close-on-exec copies, which it keeps until it has
// reaped the program: while they are open the other side sees neither end of
// file nor EPIPE, so when the supervisor looks (peerClosed) whether the other
// side closed the program's stdin, the other side cannot yet have reacted to
// the program's end. Which side ended first is then exact, not a race of
// timestamps. A copy that cannot be made is simply not held.
func holdPipes(fds ...int) []int {
	var held []int
	for i, fd := range fds {
		c := -1
		if fd >= 0 {
			if d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0); err == nil {
				c = d
			}
			syscall.Close(fd)
		}
		if c >= 0 || i == 0 {
			held = append(held, c)
		}
	}
	return held
}

// releasePipes closes the descriptors holdPipes kept, every write end
// before any read end. A peer can get EPIPE from the program only when the
// read end it writes to closes, so once it does, every pipe the program wrote
// into the peer already shows the hang-up (the peer's peerClosed is true) and
// the verdict of the side that ended first decides. Read ends first would
// leave a window (long under load: the woken writer may run before we do
// again) in which a peer dies of EPIPE with its stdin still open: its own
// failure instead of that verdict. Which end a descriptor is comes from its
// open mode, so a manager's many FIFOs follow the same rule.
func releasePipes(held []int) {
	var readers []int
	for _, fd := range held {
		if fd < 0 {
			continue
		}
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil && fl&syscall.O_ACCMODE == syscall.O_RDONLY {
			readers = append(readers, fd)
			continue
		}
		closeFDs(fd)
	}
	closeFDs(readers...)
}

// peerClosed reports whether every writer of the FIFO read end fd has gone
// (POLLHUP), that is, the other side closed the program's stdin.
func peerClosed(fd int) bool {
	if fd < 0 {
		return false
	}
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(p, 0)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		return err == nil && p[0].Revents&unix.POLLHUP != 0
	}
}
