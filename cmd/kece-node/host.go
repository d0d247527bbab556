package main

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// hostResources is what the default of KECE_LOCAL_SLOTS is sized from: the
// cores this process may use and the memory of the host, or of the cgroup
// the node runs in when that is smaller (a container with a memory limit).
func hostResources() (cpus int, memBytes int64) {
	cpus = runtime.NumCPU()
	memBytes = memTotal("/proc/meminfo")
	if lim := cgroupMemoryLimit("/sys/fs/cgroup/memory.max"); lim > 0 && (memBytes == 0 || lim < memBytes) {
		memBytes = lim
	}
	return cpus, memBytes
}

// memTotal reads MemTotal from a meminfo file; 0 if unknown.
func memTotal(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				return 0
			}
			kb, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// cgroupMemoryLimit reads a cgroup v2 memory.max; 0 when unlimited or unknown.
func cgroupMemoryLimit(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}
