package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuWatch measures CPU over a benchmark window: this process's (getrusage)
// and, when serverPID is set, a local server's (/proc/<pid>/stat), and
// optionally writes a Go CPU profile of the window.
type cpuWatch struct {
	profile   string
	serverPID int
}

// start begins the window; the returned stop ends it and reports the CPU
// time each side spent.
func (w cpuWatch) start() (stop func() (self, server time.Duration), err error) {
	var f *os.File
	if w.profile != "" {
		if f, err = os.Create(w.profile); err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
	}
	self0 := selfCPU()
	srv0 := procCPU(w.serverPID)
	return func() (time.Duration, time.Duration) {
		self, srv := selfCPU()-self0, procCPU(w.serverPID)-srv0
		if f != nil {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "kece-bench: cpu profile: %v\n", err)
			}
		}
		return self, srv
	}, nil
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is utime+stime of pid from /proc (0 when unknown or unreadable).
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) start after ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	// utime and stime are fields 14 and 15 of stat, 12 and 13 after ')'.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / clkTck
}
