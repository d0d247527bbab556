package lease

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

// ReleaseItem is one lease a node gives back.
type ReleaseItem struct {
	JobID      int64
	LeaseEpoch int64
}

// ReleaseState answers one ReleaseItem.
type ReleaseState string

// Release answers.
const (
	// ReleaseReleased: the lease is given back (now, or by an earlier
	// identical call whose answer was lost).
	ReleaseReleased ReleaseState = "RELEASED"
	// ReleaseLost: the lease is not this session's any more (expired and
	// reaped, cancelled, taken by a new session); nothing changed.
	ReleaseLost ReleaseState = "LOST"
)

// ReleaseResult answers one ReleaseItem.
type ReleaseResult struct {
	JobID      int64
	LeaseEpoch int64
	State      ReleaseState
	// JobState is the job's state after a release by this call (QUEUED, or
	// FAILED when its attempts are used up); empty otherwise.
	JobState jobdb.JobState
}

// Release gives leases back at once: a node that will not run them
// (draining, shutting down, inputs unavailable before judging started, a
// dependency of the node down)
// calls it rather than letting them run out. Each lease must be the
// session's own (node, session epoch, lease epoch, RUNNING); the job goes
// back to QUEUED immediately, and an attempt on which judging never started
// is not counted toward max_attempts. Released again (a retry after a lost
// answer) it answers RELEASED without changing anything; a lease that is
// not the session's answers LOST.
func (s *Engine) Release(ctx context.Context, sess jobdb.NodeSession, items []ReleaseItem, reason string) ([]ReleaseResult, error) {
	switch reason {
	case ReleaseDraining, ReleaseShuttingDown, ReleaseInputsUnavailable, ReleaseDependencyDown:
	default:
		return nil, jobdb.Invalid("reason", "must be %s, %s, %s or %s, got %q",
			ReleaseDraining, ReleaseShuttingDown, ReleaseInputsUnavailable, ReleaseDependencyDown, reason)
	}
	if len(items) == 0 || len(items) > 64 {
		return nil, jobdb.Invalid("leases", "must hold 1..64 leases, got %d", len(items))
	}
	sorted := slices.Clone(items)
	slices.SortFunc(sorted, func(a, b ReleaseItem) int { return cmp.Compare(a.JobID, b.JobID) })
	answers := make(map[ReleaseItem]ReleaseResult, len(items))
	pools := map[string]bool{}
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		clear(answers)
		clear(pools)
		// The lock order (control/store/doc.go); the node shared: it only
		// has to hold still against a new session or a revoke.
		var epoch int64
		var revoked bool
		err := tx.QueryRowContext(ctx,
			`SELECT session_epoch, revoked_at IS NOT NULL FROM judge_node WHERE id = ? LOCK IN SHARE MODE`, sess.NodeID).Scan(&epoch, &revoked)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("node %d: %w", sess.NodeID, jobdb.ErrUnauthenticated)
		case err != nil:
			return fmt.Errorf("store: release: node: %w", err)
		case revoked:
			return fmt.Errorf("node %d: %w", sess.NodeID, jobdb.ErrNodeRevoked)
		case epoch != sess.SessionEpoch:
			return fmt.Errorf("node %d session %d (current %d): %w", sess.NodeID, sess.SessionEpoch, epoch, jobdb.ErrSessionSuperseded)
		}
		for _, it := range sorted {
			if _, done := answers[it]; done {
				continue
			}
			l, err := scanLockedLease(tx.QueryRowContext(ctx,
				`SELECT `+lockedLeaseColumns+` FROM judge_job
				 WHERE id = ? AND state = 'RUNNING' AND node_id = ? AND session_epoch = ? AND lease_epoch = ? FOR UPDATE`,
				it.JobID, sess.NodeID, sess.SessionEpoch, it.LeaseEpoch))
			if errors.Is(err, sql.ErrNoRows) {
				var outcome string
				err := tx.QueryRowContext(ctx,
					`SELECT outcome FROM judge_job_attempt WHERE job_id = ? AND lease_epoch = ? AND node_id = ? AND session_epoch = ?`,
					it.JobID, it.LeaseEpoch, sess.NodeID, sess.SessionEpoch).Scan(&outcome)
				if err != nil && !errors.Is(err, sql.ErrNoRows) {
					return fmt.Errorf("store: release: %w", err)
				}
				st := ReleaseLost
				if outcome == AttemptReleased {
					st = ReleaseReleased
				}
				answers[it] = ReleaseResult{JobID: it.JobID, LeaseEpoch: it.LeaseEpoch, State: st}
				continue
			}
			if err != nil {
				return fmt.Errorf("store: release: job %d: %w", it.JobID, err)
			}
			js, err := s.endLeaseLocked(ctx, tx, l, leaseEnding{outcome: AttemptReleased, errCode: reason, immediate: true})
			if err != nil {
				return err
			}
			if js == jobdb.StateQueued {
				pools[l.pool] = true
			}
			answers[it] = ReleaseResult{JobID: it.JobID, LeaseEpoch: it.LeaseEpoch, State: ReleaseReleased, JobState: js}
		}
		return jobdb.BumpPools(ctx, tx, pools)
	})
	if err != nil {
		return nil, err
	}
	out := make([]ReleaseResult, len(items))
	for i, it := range items {
		out[i] = answers[it]
	}
	return out, nil
}

// RequeueOldSession takes back, when a node opens a session for a new
// boot, every lease its earlier sessions still hold: that process is gone
// (or must stop: its session is refused from now on), so its jobs need not
// wait for their leases to run out. Called in OpenSession's transaction
// with the node locked (the lock order: doc.go). It returns the pools that got work.
func (s *Engine) RequeueOldSession(ctx context.Context, tx *sql.Tx, nodeID, newEpoch int64) (map[string]bool, int, error) {
	leases, err := jobdb.QueryAll(ctx, tx, scanLockedLease,
		`SELECT `+lockedLeaseColumns+` FROM judge_job WHERE node_id = ? AND state = 'RUNNING' AND session_epoch < ?
		 ORDER BY id FOR UPDATE`, nodeID, newEpoch)
	if err != nil {
		return nil, 0, fmt.Errorf("store: open session: old leases: %w", err)
	}
	pools := map[string]bool{}
	for _, l := range leases {
		js, err := s.endLeaseLocked(ctx, tx, l, leaseEnding{outcome: AttemptSessionReplaced, errCode: NodeRestartedErrorCode})
		if err != nil {
			return nil, 0, err
		}
		if js == jobdb.StateQueued {
			pools[l.pool] = true
		}
	}
	return pools, len(leases), jobdb.BumpPools(ctx, tx, pools)
}
