package worker

import (
	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
)

// Default of KECE_LOCAL_SLOTS, from the pool and the host. One slot runs one
// job: one sandbox per test case at a time for code pools, one scratch
// database for the mysql pool. A slot wants a core, since judged programs
// are timed by CPU and two sharing a core skew each other's times, and the
// pool's memory per slot (the largest usual limit plus the runtime's own
// overhead: JVMs and the ArkTS VM need more). HostReserveBytes stays free
// for the OS, Docker and the node itself.
const (
	// HostReserveBytes is kept free of judge work when sizing the default.
	HostReserveBytes int64 = 1 << 30
	// MaxLocalSlots is the protocol's bound on slots per node.
	MaxLocalSlots = contracts.SlotsMax
)

// SlotMemoryBytes is the memory one slot of each pool is sized for.
var SlotMemoryBytes = map[string]int64{
	string(machineapi.PoolCpp):    1 << 30,
	string(machineapi.PoolPython): 1 << 30,
	string(machineapi.PoolJava):   2 << 30,
	string(machineapi.PoolArkts):  2 << 30,
	string(machineapi.PoolMysql):  512 << 20,
}

// DefaultLocalSlots is the number of jobs a host with cpus cores and
// memBytes of memory runs at once for pool: min(cores, (memory − reserve) /
// the pool's memory per slot), at least 1 and at most MaxLocalSlots. An
// admin's per-node slots cap it further; KECE_LOCAL_SLOTS overrides it.
func DefaultLocalSlots(pool string, cpus int, memBytes int64) int {
	per, ok := SlotMemoryBytes[pool]
	if !ok {
		per = 1 << 30
	}
	byMem := int((memBytes - HostReserveBytes) / per)
	return max(1, min(cpus, byMem, MaxLocalSlots))
}

// A node's slots are counted in slots, not jobs: a job holds its slot
// weight while it runs (ClaimedJob.slots: 1 for most problems, 2 for an
// interactive one, processes + 1 for a communication task), the control
// plane counts the same weights against the node's slots, and the node
// claims with its slots less the weights of the jobs it runs
// (docs/scheduling.md, "Slot weights"). A job heavier than the node's
// slots is handed to the node only when it is idle; busy then exceeds the
// slots and the node claims nothing until it ends.

// jobSlots is how many slots a claimed job holds: its weight, 1 when the
// control plane does not say (before slot weights).
func jobSlots(c machineapi.ClaimedJob) int {
	if c.Slots == nil || *c.Slots < 1 {
		return 1
	}
	return int(*c.Slots)
}

// passOn hands up to want of the slots j holds to a job its result leased
// (the slot cycle) and says how many it handed; none when j is nil. Called
// with the node's mu held.
func (j *job) passOn(want int) int {
	if j == nil {
		return 0
	}
	n := min(want, j.slots-j.passed)
	j.passed += n
	return n
}
