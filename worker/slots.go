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
