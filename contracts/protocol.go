package contracts

import (
	"slices"
	"time"

	"github.com/kece-oj/kece/contracts/machineapi"
)

// The machine protocol's facts that both sides need by name. machine.yaml
// states the same numbers (its info.version, the maxima of waitMs, maxJobs,
// slots); protocol_test.go fails when the two disagree, so a change is made
// in both places or not at all.
const (
	// ProtocolVersion is the machine protocol version (machine.yaml
	// info.version): a node sends it when it opens a session and the control
	// plane refuses any other.
	ProtocolVersion = 1

	// ClaimWaitMax is the longest a claim may be held waiting for work
	// (ClaimRequest.waitMs, SessionResponse.claimWaitMaxMs).
	ClaimWaitMax = 15 * time.Second
	// BatchMax bounds the jobs of one claim (ClaimRequest.maxJobs) and the
	// leases of one renew (RenewRequest.leases).
	BatchMax = 64
	// SlotsMax bounds a node's slots, configured or reported.
	SlotsMax = 256

	// HeartbeatIntervalDefault is the heartbeat interval both sides start
	// from; the control plane's session answer may only shorten a node's.
	HeartbeatIntervalDefault = 10 * time.Second
	// RenewIntervalDefault is the lease renewal interval both sides start
	// from; the control plane's session answer may only shorten a node's.
	RenewIntervalDefault = 15 * time.Second
	// LeaseTTLMin is the shortest lease the control plane grants: a node
	// renews, posts and keeps a safety margin within it.
	LeaseTTLMin = time.Second
)

// LivenessPath is where a control replica answers "ok" with no database,
// no authentication and no log line: a node parked in a claim long-poll
// asks it every few seconds at most to tell a stopped replica from a long
// wait. It lies under the machine prefix so that a proxy forwarding the
// machine protocol forwards it too, but it is no protocol call (not in
// machine.yaml): any HTTP answer, even an older replica's 404, proves the
// replica's process and HTTP server alive, which is all a node learns.
const LivenessPath = "/api/v1/internal/judgers/livez"

// pools are the judge pools, in the contract's order; one node process
// serves exactly one. The names are machine.yaml's Pool enum.
var pools = []string{poolCpp, poolJava, poolPython, poolArkts, poolMysql}

// Pools lists the judge pools.
func Pools() []string { return slices.Clone(pools) }

// ValidPool reports whether p names a judge pool.
func ValidPool(p string) bool { return machineapi.Pool(p).Valid() }
