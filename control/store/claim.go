package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// NodeSession identifies an authenticated node process: the node and the
// session epoch of its current boot.
type NodeSession struct {
	NodeID       int64
	SessionEpoch int64
}

// ClaimedJob is one job handed to a node with a fresh lease.
type ClaimedJob struct {
	JobID          int64
	LeaseEpoch     int64
	LeaseRemaining time.Duration
	Kind           JobKind
	Pool           string
	SubmissionType string
	SubmissionID   string
	Generation     int
	Language       string
	ManifestID     int64
	Snapshot       []byte
	Attempt        int
	// ReadyWait is how long the job had been ready (now − available_at)
	// when it was claimed: the pickup latency metrics report it.
	ReadyWait time.Duration
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

// claim leases up to freeSlots ready jobs of the node's pool to the session.
// Capacity = min(freeSlots, node slots − node in-flight, group capacity −
// group in-flight, batch cap); in-flight counts RUNNING jobs, expired-but-
// unreaped leases included. CHECK jobs bound to the node come first and may
// be claimed in any state; pool work needs ENABLED.
//
// The host-group lock serializes the claims of one physical host, so the
// transaction is kept to six round trips: lock group, lock node, count
// in-flight, pick (full rows), lease, attempts.
func (s *Store) claim(ctx context.Context, sess NodeSession, freeSlots int) ([]ClaimedJob, error) {
	if freeSlots <= 0 {
		return nil, nil
	}
	groupID, err := s.nodeGroup(ctx, sess.NodeID)
	if err != nil {
		return nil, err
	}
	var out []ClaimedJob
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		out = nil
		// Lock order: host group, then node.
		var groupCap int
		if err := tx.QueryRowContext(ctx,
			`SELECT slot_capacity FROM judge_host_group WHERE id = ? FOR UPDATE`, groupID).Scan(&groupCap); err != nil {
			return fmt.Errorf("store: claim: host group: %w", err)
		}
		n, err := lockNodeForSession(ctx, tx, sess)
		if err != nil {
			return err
		}
		var nodeBusy, groupBusy int
		if err := tx.QueryRowContext(ctx,
			`SELECT COALESCE(SUM(node_id = ?), 0), COUNT(*) FROM judge_job WHERE host_group_id = ? AND state = 'RUNNING'`,
			sess.NodeID, groupID).Scan(&nodeBusy, &groupBusy); err != nil {
			return fmt.Errorf("store: claim: in-flight: %w", err)
		}
		capacity := min(freeSlots, n.slots-nodeBusy, groupCap-groupBusy, s.cfg.ClaimBatchMax)
		if capacity <= 0 {
			return nil
		}
		if n.pendingChecks > 0 {
			checks, err := pickReady(ctx, tx, n.pool, sess.NodeID, capacity)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx,
				`UPDATE judge_node SET pending_checks = IF(? < ?, 0, GREATEST(pending_checks - ?, 0)) WHERE id = ?`,
				len(checks), capacity, len(checks), sess.NodeID); err != nil {
				return fmt.Errorf("store: claim: pending checks: %w", err)
			}
			out = append(out, checks...)
		}
		if n.state == NodeEnabled && len(out) < capacity {
			more, err := pickReady(ctx, tx, n.pool, 0, capacity-len(out))
			if err != nil {
				return err
			}
			out = append(out, more...)
		}
		if len(out) == 0 {
			return nil
		}
		ids := make([]int64, len(out))
		for i := range out {
			c := &out[i]
			s.facts.put(c.JobID, jobFacts{typ: c.SubmissionType, sid: c.SubmissionID, manifestID: c.ManifestID,
				kind: c.Kind, pool: c.Pool, generation: c.Generation})
			ids[i] = out[i].JobID
			out[i].LeaseEpoch++
			out[i].Attempt++
			out[i].LeaseRemaining = s.cfg.LeaseTTL
		}
		in, args := inList(ids)
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_job SET state = 'RUNNING', node_id = ?, host_group_id = ?, session_epoch = ?,
			   lease_epoch = lease_epoch + 1, lease_until = NOW(6) + INTERVAL ? MICROSECOND,
			   attempt_count = attempt_count + 1, started_at = COALESCE(started_at, NOW(6)),
			   status_version = status_version + 1, phase = NULL, progress_seq = 0, cases_done = 0,
			   updated_at = NOW(6)
			 WHERE id IN (`+in+`)`,
			append([]any{sess.NodeID, groupID, sess.SessionEpoch, micros(s.cfg.LeaseTTL)}, args...)...); err != nil {
			return fmt.Errorf("store: claim: lease: %w", err)
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO judge_job_attempt (job_id, lease_epoch, node_id, host_group_id, session_epoch, started_at)
			 SELECT id, lease_epoch, node_id, host_group_id, session_epoch, NOW(6) FROM judge_job WHERE id IN (`+in+`)`,
			args...); err != nil {
			return fmt.Errorf("store: claim: attempts: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// NextReady says how long until the soonest job of the pool that a claim
// could take becomes ready (its retry backoff ends); ok is false when no job
// waits. A long-poll that found nothing sleeps at most that long, so a retry
// is picked up when its backoff ends rather than at the next poll.
func (s *Store) NextReady(ctx context.Context, pool string, nodeID int64) (d time.Duration, ok bool, err error) {
	var us sql.NullInt64
	err = s.db.QueryRowContext(ctx,
		`SELECT GREATEST(TIMESTAMPDIFF(MICROSECOND, NOW(6), MIN(available_at)), 0) FROM judge_job
		 WHERE pool = ? AND state = 'QUEUED' AND required_node_id IN (0, ?)`, pool, nodeID).Scan(&us)
	if err != nil {
		return 0, false, fmt.Errorf("store: next ready: %w", err)
	}
	if !us.Valid {
		return 0, false, nil
	}
	return time.Duration(us.Int64) * time.Microsecond, true, nil
}

// nodeGroup returns a node's host group; it never changes, so it is cached.
func (s *Store) nodeGroup(ctx context.Context, nodeID int64) (int64, error) {
	if g, ok := s.groups.get(nodeID); ok {
		return g, nil
	}
	var g int64
	err := s.db.QueryRowContext(ctx, `SELECT host_group_id FROM judge_node WHERE id = ?`, nodeID).Scan(&g)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("node %d: %w", nodeID, ErrUnauthenticated)
	}
	if err != nil {
		return 0, fmt.Errorf("store: node group: %w", err)
	}
	s.groups.put(nodeID, g)
	return g, nil
}

// pickReady locks up to limit ready jobs of a pool (requiredNode 0 = pool
// work, else that node's CHECK jobs), skipping rows other claimers hold, and
// returns them as they are before leasing. The query is served by
// ix_job_claim for both WHERE and ORDER BY.
func pickReady(ctx context.Context, tx *sql.Tx, pool string, requiredNode int64, limit int) ([]ClaimedJob, error) {
	out, err := queryAll(ctx, tx, func(r rowScanner) (ClaimedJob, error) {
		var c ClaimedJob
		var waitedUs int64
		err := r.Scan(&c.JobID, &c.LeaseEpoch, &c.Kind, &c.Pool, &c.SubmissionType, &c.SubmissionID,
			&c.Generation, &c.Language, &c.ManifestID, &c.Snapshot, &c.Attempt, &waitedUs)
		c.ReadyWait = time.Duration(waitedUs) * time.Microsecond
		return c, err
	}, claimQuery, pool, requiredNode, limit)
	if err != nil {
		return nil, fmt.Errorf("store: claim: pick: %w", err)
	}
	return out, nil
}

const claimColumns = `id, lease_epoch, kind, pool, submission_type, submission_id, generation, runtime_spec, manifest_id,
 request_snapshot, attempt_count, TIMESTAMPDIFF(MICROSECOND, available_at, NOW(6))`

const claimWhere = ` FROM judge_job FORCE INDEX (ix_job_claim)
 WHERE pool = ? AND state = 'QUEUED' AND required_node_id = ? AND available_at <= NOW(6)
 ORDER BY priority, available_at, id LIMIT ?`

const claimQuery = `SELECT ` + claimColumns + claimWhere + ` FOR UPDATE SKIP LOCKED`

// ClaimQueryForExplain is the claim's pick statement, for EXPLAIN in tests and docs.
func ClaimQueryForExplain() string { return `SELECT id` + claimWhere }

type lockedNode struct {
	hostGroupID   int64
	pool          string
	state         NodeState
	slots         int
	pendingChecks int
}

// lockNodeForSession locks the node row and checks that the session is the
// node's current one and the node is not revoked.
func lockNodeForSession(ctx context.Context, tx *sql.Tx, sess NodeSession) (lockedNode, error) {
	var n lockedNode
	var epoch int64
	var revoked bool
	err := tx.QueryRowContext(ctx,
		`SELECT host_group_id, pool, desired_state, slots, session_epoch, revoked_at IS NOT NULL, pending_checks
		 FROM judge_node WHERE id = ? FOR UPDATE`, sess.NodeID).Scan(
		&n.hostGroupID, &n.pool, &n.state, &n.slots, &epoch, &revoked, &n.pendingChecks)
	if errors.Is(err, sql.ErrNoRows) {
		return n, fmt.Errorf("node %d: %w", sess.NodeID, ErrUnauthenticated)
	}
	if err != nil {
		return n, fmt.Errorf("store: lock node: %w", err)
	}
	if revoked {
		return n, fmt.Errorf("node %d: %w", sess.NodeID, ErrNodeRevoked)
	}
	if epoch != sess.SessionEpoch {
		return n, fmt.Errorf("node %d session %d (current %d): %w", sess.NodeID, sess.SessionEpoch, epoch, ErrSessionSuperseded)
	}
	return n, nil
}

// RenewItem is one lease a node wants extended, with its progress.
type RenewItem struct {
	JobID       int64
	LeaseEpoch  int64
	ProgressSeq int64
	Phase       string // COMPILING or JUDGING; empty keeps the current one
	CasesDone   int
	CasesTotal  int
}

// RenewState answers one renew item.
type RenewState string

// Renew answers.
const (
	RenewOK        RenewState = "OK"
	RenewLost      RenewState = "LOST"
	RenewCancelled RenewState = "CANCELLED"
)

// RenewResult answers one RenewItem.
type RenewResult struct {
	JobID      int64
	LeaseEpoch int64
	State      RenewState
	Remaining  time.Duration
}

// Renew extends the session's live leases in one transaction. An expired
// lease is LOST even if not yet reaped; progress only moves forward.
func (s *Store) Renew(ctx context.Context, sess NodeSession, items []RenewItem) ([]RenewResult, error) {
	if len(items) == 0 {
		return nil, nil
	}
	sorted := append([]RenewItem(nil), items...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].JobID < sorted[j].JobID })
	results := make(map[[2]int64]RenewResult, len(items))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		clear(results)
		for _, it := range sorted {
			if it.Phase != "" && it.Phase != "COMPILING" && it.Phase != "JUDGING" {
				return invalid("phase", "must be COMPILING or JUDGING, got %q", it.Phase)
			}
			// Assignments run left to right: progress_seq is updated last so
			// the IF()s compare against the stored value.
			r, err := tx.ExecContext(ctx,
				`UPDATE judge_job SET lease_until = NOW(6) + INTERVAL ? MICROSECOND,
				   phase = IF(? > progress_seq AND ? <> '', ?, phase),
				   cases_done = IF(? > progress_seq, GREATEST(cases_done, ?), cases_done),
				   cases_total = IF(? > progress_seq, ?, cases_total),
				   progress_seq = GREATEST(progress_seq, ?), updated_at = NOW(6)
				 WHERE id = ? AND state = 'RUNNING' AND node_id = ? AND session_epoch = ? AND lease_epoch = ?
				   AND lease_until > NOW(6)
				   AND EXISTS (SELECT 1 FROM judge_node n WHERE n.id = ? AND n.session_epoch = ? AND n.revoked_at IS NULL)`,
				micros(s.cfg.LeaseTTL),
				it.ProgressSeq, it.Phase, it.Phase,
				it.ProgressSeq, it.CasesDone,
				it.ProgressSeq, it.CasesTotal,
				it.ProgressSeq,
				it.JobID, sess.NodeID, sess.SessionEpoch, it.LeaseEpoch, sess.NodeID, sess.SessionEpoch)
			if err != nil {
				return fmt.Errorf("store: renew: %w", err)
			}
			key := [2]int64{it.JobID, it.LeaseEpoch}
			if n, _ := r.RowsAffected(); n == 1 {
				results[key] = RenewResult{JobID: it.JobID, LeaseEpoch: it.LeaseEpoch, State: RenewOK, Remaining: s.cfg.LeaseTTL}
				continue
			}
			var state JobState
			var epoch int64
			err = tx.QueryRowContext(ctx, `SELECT state, lease_epoch FROM judge_job WHERE id = ?`, it.JobID).Scan(&state, &epoch)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				results[key] = RenewResult{JobID: it.JobID, LeaseEpoch: it.LeaseEpoch, State: RenewLost}
			case err != nil:
				return fmt.Errorf("store: renew: %w", err)
			case state == StateCancelled && epoch == it.LeaseEpoch:
				results[key] = RenewResult{JobID: it.JobID, LeaseEpoch: it.LeaseEpoch, State: RenewCancelled}
			default:
				results[key] = RenewResult{JobID: it.JobID, LeaseEpoch: it.LeaseEpoch, State: RenewLost}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]RenewResult, 0, len(items))
	for _, it := range items {
		out = append(out, results[[2]int64{it.JobID, it.LeaseEpoch}])
	}
	return out, nil
}

// inList renders "?, ?, …" and its arguments.
func inList(ids []int64) (string, []any) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", "), args
}
