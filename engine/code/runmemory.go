package code

import (
	"context"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// sandboxOverheadBytes is the part of a sandbox container's memory cgroup
// that belongs neither to the program nor to /tmp: the supervisor (a static
// Go binary, about 10 MiB resident) and the page cache of the job's files
// (inputs read, outputs written), which the kernel reclaims before it kills.
const sandboxOverheadBytes = 64 << 20

// containerMemory is the memory cgroup limit (and memory+swap) of a sandbox
// container whose programs may use program bytes: that, the /tmp tmpfs
// (its pages are charged to the container) and the overhead.
func (x *Executor) containerMemory(program int64) int64 {
	return program + x.cfg.TmpfsBytes + sandboxOverheadBytes
}

// startMemory is what the user's container starts with: the compile budget
// when the runtime compiles in it (not from the compile cache) and that
// budget is larger than the run's, else the run's own (the problem's limit
// plus the runtime's extra).
func (j *job) startMemory() int64 {
	if len(j.task.Runtime.CompileCmd) == 0 || j.cachedBuild {
		return j.memLimit
	}
	return max(j.task.Runtime.CompileMemoryBytes, j.memLimit)
}

// holdToRunLimit lowers the user container's memory cgroup from the compile
// budget to the run ceiling, containerMemory(limit + extra), before the
// first case runs. Without it a program's memory outside what its runtime
// bounds itself (Java Unsafe and direct buffers, Node Buffers, forked
// processes each under its own RLIMIT_AS) was held only by the compile
// budget: the verdict was right, but the host paid up to the compile budget
// per slot. The compiler has exited and /tmp is emptied by then, so the
// kernel has only page cache to reclaim when the limit drops; a daemon that
// refuses is an infrastructure fault, never a verdict.
func (j *job) holdToRunLimit(ctx context.Context, s *session) error {
	if j.startMemory() == j.memLimit {
		return nil
	}
	limit := j.x.containerMemory(j.memLimit) + j.workBytes
	dctx, cancel := context.WithTimeout(ctx, j.x.cfg.DaemonTimeout)
	defer cancel()
	_, err := j.x.cli.ContainerUpdate(dctx, s.id, client.ContainerUpdateOptions{
		Resources: &container.Resources{Memory: limit, MemorySwap: limit},
	})
	if err != nil {
		return j.x.classifyDaemon(ctx, "lower sandbox memory to the run limit", err)
	}
	return nil
}
