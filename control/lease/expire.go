package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

// ReapStats counts what one Reap pass did.
type ReapStats struct {
	Requeued int
	Failed   int
	// Pools are the pools that got work back, in name order.
	Pools []string
	// Silent counts the leases (among Requeued and Failed) taken from nodes
	// that missed their heartbeats before the leases ran out.
	Silent int
}

// Reap returns expired leases to QUEUED or FAILED; see reap.
func (s *Engine) Reap(ctx context.Context) (ReapStats, error) {
	return s.reap(ctx)
}

// reap ends expired leases, and the leases of nodes silent for
// HeartbeatTTL (so a dead node's jobs run again long before their leases
// would run out): each goes back to QUEUED with backoff, or to FAILED when
// its attempts are used up (endLeaseLocked). Candidates are read without
// locks, then each job is re-checked under its lock in its own short
// transaction, skipping rows another replica holds; running it in every
// replica at once is safe. A reaped lease is fenced as always: its node's
// renew answers LOST and its result is refused.
func (s *Engine) reap(ctx context.Context) (ReapStats, error) {
	var st ReapStats
	cands, err := s.reapCandidates(ctx)
	if err != nil {
		return st, err
	}
	pools := map[string]bool{}
	for _, c := range cands {
		outcome, pool, err := s.reapOne(ctx, c)
		if err != nil {
			return st, err
		}
		if outcome != "" && c.silent {
			st.Silent++
		}
		switch outcome {
		case jobdb.StateQueued:
			st.Requeued++
			pools[pool] = true
		case jobdb.StateFailed:
			st.Failed++
		}
	}
	st.Pools = slices.Sorted(maps.Keys(pools))
	return st, nil
}

// silentNodeSQL is true for a node that has shown no sign of life (heartbeat,
// or the opening of its current session) for the interval bound to the
// placeholder.
const silentNodeSQL = `GREATEST(COALESCE(n.last_heartbeat_at, n.session_started_at), COALESCE(n.session_started_at, n.last_heartbeat_at))
  < NOW(6) - INTERVAL ? MICROSECOND`

// reapCandidate is a lease the reaper may end: expired, or held by a silent node.
type reapCandidate struct {
	jobID, leaseEpoch int64
	silent            bool
}

// reapCandidates reads, without locks, the expired leases and the live
// leases of nodes silent for HeartbeatTTL.
func (s *Engine) reapCandidates(ctx context.Context) ([]reapCandidate, error) {
	scan := func(r jobdb.RowScanner) (reapCandidate, error) {
		var c reapCandidate
		return c, r.Scan(&c.jobID, &c.leaseEpoch, &c.silent)
	}
	expired, err := jobdb.QueryAll(ctx, s.db.Pool, scan,
		`SELECT id, lease_epoch, FALSE FROM judge_job WHERE state = 'RUNNING' AND lease_until < NOW(6)
		 ORDER BY lease_until, id LIMIT ?`, s.db.Cfg.ReapBatch)
	if err != nil {
		return nil, fmt.Errorf("store: reap: candidates: %w", err)
	}
	// Nodes are few; their running jobs come from ix_job_node.
	silent, err := jobdb.QueryAll(ctx, s.db.Pool, scan,
		`SELECT j.id, j.lease_epoch, TRUE FROM judge_node n
		 JOIN judge_job j ON j.node_id = n.id AND j.state = 'RUNNING' AND j.lease_until >= NOW(6)
		 WHERE `+silentNodeSQL+` ORDER BY j.id LIMIT ?`, jobdb.Micros(s.db.Cfg.HeartbeatTTL), s.db.Cfg.ReapBatch)
	if err != nil {
		return nil, fmt.Errorf("store: reap: silent nodes: %w", err)
	}
	return append(expired, silent...), nil
}

// reapOne ends one candidate lease if it still is what the candidate says,
// skipping a row another replica or a result commit holds. It returns the
// job's new state (empty: nothing done) and its pool.
func (s *Engine) reapOne(ctx context.Context, c reapCandidate) (jobdb.JobState, string, error) {
	var state jobdb.JobState
	var pool string
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		state, pool = "", ""
		if c.silent {
			// Re-read the node (no lock: a heartbeat that lands after this
			// read finds its lease fenced, as a late one always does).
			var silent bool
			err := tx.QueryRowContext(ctx,
				`SELECT COALESCE(`+silentNodeSQL+`, FALSE) FROM judge_job j JOIN judge_node n ON n.id = j.node_id WHERE j.id = ?`,
				jobdb.Micros(s.db.Cfg.HeartbeatTTL), c.jobID).Scan(&silent)
			if errors.Is(err, sql.ErrNoRows) || (err == nil && !silent) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("store: reap: job %d: %w", c.jobID, err)
			}
		}
		l, err := scanLockedLease(tx.QueryRowContext(ctx,
			`SELECT `+lockedLeaseColumns+` FROM judge_job
			 WHERE id = ? AND state = 'RUNNING' AND lease_epoch = ? AND (lease_until < NOW(6) OR ?)
			 FOR UPDATE SKIP LOCKED`, c.jobID, c.leaseEpoch, c.silent))
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("store: reap: job %d: %w", c.jobID, err)
		}
		pool = l.pool
		end := leaseEnding{outcome: AttemptExpired, errCode: "LEASE_EXPIRED"}
		if !l.expired {
			end = leaseEnding{outcome: AttemptNodeSilent, errCode: NodeSilentErrorCode}
		}
		if state, err = s.endLeaseLocked(ctx, tx, l, end); err != nil || state != jobdb.StateQueued {
			return err
		}
		return jobdb.BumpPool(ctx, tx, l.pool)
	})
	return state, pool, err
}

// DrainDeadlineErrorCode is the error code a job taken back at a drain
// deadline carries (last_error_code) and its attempt's error class.
const DrainDeadlineErrorCode = "DRAIN_DEADLINE"

// DrainExpiry counts what one ExpireDrainDeadlines pass did.
type DrainExpiry struct {
	// Nodes disabled because their drain deadline passed.
	Nodes int
	// Requeued leases taken back from them.
	Requeued int
	// Pools are the pools that got work back, in name order.
	Pools []string
}

// ExpireDrainDeadlines enforces drain deadlines (admin API `deadlineSeconds`,
// like `nomad node drain -deadline`): a DRAINING node whose deadline has
// passed loses its remaining leases — each attempt is closed as REVOKED, the
// job goes back to QUEUED at once with its attempt not counted toward
// max_attempts — and becomes DISABLED; each step is audited. The lease epoch
// stays, so the next claim bumps it and the old lease's renew and result are
// refused (fencing). Candidates are read without locks, then each node is
// re-checked under its locks, taken in the lock order (control/store/doc.go);
// running it in every replica at once is safe.
func (s *Engine) ExpireDrainDeadlines(ctx context.Context) (DrainExpiry, error) {
	var st DrainExpiry
	ids, err := jobdb.QueryAll(ctx, s.db.Pool, jobdb.ScanID,
		`SELECT id FROM judge_node WHERE desired_state = 'DRAINING' AND drain_deadline_at <= NOW(6)
		 ORDER BY drain_deadline_at, id LIMIT ?`, s.db.Cfg.ReapBatch)
	if err != nil {
		return st, fmt.Errorf("store: drain deadlines: candidates: %w", err)
	}
	pools := map[string]bool{}
	for _, nodeID := range ids {
		var requeued []int64
		var pool string
		var disabled bool
		err := s.db.InTx(ctx, func(tx *sql.Tx) error {
			requeued, disabled = nil, false
			var groupID int64
			if err := tx.QueryRowContext(ctx, `SELECT host_group_id FROM judge_node WHERE id = ?`, nodeID).Scan(&groupID); err != nil {
				return fmt.Errorf("store: drain deadline: node %d: %w", nodeID, err)
			}
			if err := tx.QueryRowContext(ctx, `SELECT id FROM judge_host_group WHERE id = ? FOR UPDATE`, groupID).Scan(&groupID); err != nil {
				return fmt.Errorf("store: drain deadline: lock host group: %w", err)
			}
			err := tx.QueryRowContext(ctx,
				`SELECT pool FROM judge_node
				 WHERE id = ? AND desired_state = 'DRAINING' AND drain_deadline_at <= NOW(6) FOR UPDATE`, nodeID).Scan(&pool)
			if errors.Is(err, sql.ErrNoRows) {
				return nil // re-enabled, re-drained or disabled meanwhile
			}
			if err != nil {
				return fmt.Errorf("store: drain deadline: lock node: %w", err)
			}
			type lease struct {
				jobID, epoch int64
				pool         string
				started      bool
			}
			leases, err := jobdb.QueryAll(ctx, tx, func(sc jobdb.RowScanner) (lease, error) {
				var l lease
				return l, sc.Scan(&l.jobID, &l.epoch, &l.pool, &l.started)
			}, `SELECT id, lease_epoch, pool, phase IS NOT NULL FROM judge_job WHERE node_id = ? AND state = 'RUNNING' ORDER BY id FOR UPDATE`, nodeID)
			if err != nil {
				return fmt.Errorf("store: drain deadline: leases: %w", err)
			}
			nodePools := map[string]bool{}
			for _, l := range leases {
				if err := closeAttempt(ctx, tx, l.jobID, l.epoch, "REVOKED", DrainDeadlineErrorCode, "", l.started, nil); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx,
					`UPDATE judge_job SET state = 'QUEUED', available_at = NOW(6),
					   node_id = NULL, host_group_id = NULL, session_epoch = NULL, lease_until = NULL,
					   attempt_count = GREATEST(attempt_count - 1, 0), last_error_code = ?,
					   status_version = status_version + 1, updated_at = NOW(6)
					 WHERE id = ?`, DrainDeadlineErrorCode, l.jobID); err != nil {
					return fmt.Errorf("store: drain deadline: requeue job %d: %w", l.jobID, err)
				}
				if err := jobdb.Audit(ctx, tx, jobdb.ActorControl, "job.lease_revoked", nodeID, l.jobID, "drain deadline passed",
					map[string]any{"leaseEpoch": l.epoch, "counted": false}); err != nil {
					return err
				}
				requeued = append(requeued, l.jobID)
				pools[l.pool], nodePools[l.pool] = true, true
			}
			if _, err := tx.ExecContext(ctx,
				`UPDATE judge_node SET desired_state = 'DISABLED', drain_deadline_at = NULL, revision = revision + 1,
				   updated_at = NOW(6) WHERE id = ?`, nodeID); err != nil {
				return fmt.Errorf("store: drain deadline: disable: %w", err)
			}
			disabled = true
			if err := jobdb.Audit(ctx, tx, jobdb.ActorControl, "node.drain_deadline", nodeID, 0,
				"drain deadline passed: remaining leases requeued, node disabled", map[string]any{"requeuedJobs": len(requeued)}); err != nil {
				return err
			}
			return jobdb.BumpPools(ctx, tx, nodePools)
		})
		if err != nil {
			return st, err
		}
		if disabled {
			st.Nodes++
			st.Requeued += len(requeued)
		}
	}
	st.Pools = slices.Sorted(maps.Keys(pools))
	return st, nil
}
