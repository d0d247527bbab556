package jobdb

// JobKind distinguishes business submissions from node self-checks.
type JobKind string

// Job kinds.
const (
	KindSubmission JobKind = "SUBMISSION"
	KindCheck      JobKind = "CHECK"
)

// JobState is the scheduling state of a job.
type JobState string

// Job states (DESIGN §4).
const (
	StateQueued    JobState = "QUEUED"
	StateRunning   JobState = "RUNNING"
	StateCompleted JobState = "COMPLETED"
	StateFailed    JobState = "FAILED"
	StateCancelled JobState = "CANCELLED"
)

// Terminal reports whether no further transition is possible.
func (s JobState) Terminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateCancelled
}

// NodeState is a node's configured (desired) state.
type NodeState string

// Desired states (DESIGN §3). Observed health is kept apart.
const (
	NodePendingVerification NodeState = "PENDING_VERIFICATION"
	NodeEnabled             NodeState = "ENABLED"
	NodeDraining            NodeState = "DRAINING"
	NodeDisabled            NodeState = "DISABLED"
)

// NodeSession identifies an authenticated node process: the node and the
// session epoch of its current boot.
type NodeSession struct {
	NodeID       int64
	SessionEpoch int64
}

// VerdictStatuses are the verdict statuses a result may carry.
var VerdictStatuses = map[string]bool{"AC": true, "PARTIAL": true, "WA": true, "TLE": true, "MLE": true, "OLE": true, "RE": true, "CE": true}
