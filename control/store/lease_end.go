package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
)

// How a lease can end without a result, and what each one records on the
// attempt (outcome) and the job (last_error_code). An attempt on which
// judging never started (the node never reported progress: see Started in
// RenewItem) is not counted toward max_attempts; it counts toward the
// separate cap MaxUnstartedAttempts, so a job that kills its node before
// the node reports a start still ends (FAILED, NeverStartedErrorCode).
const (
	// AttemptExpired: the lease ran out (no renewal).
	AttemptExpired = "EXPIRED"
	// AttemptNodeSilent: the node missed its heartbeats for HeartbeatTTL;
	// its leases were taken back before they ran out.
	AttemptNodeSilent = "NODE_SILENT"
	// AttemptReleased: the node gave the lease back (Release).
	AttemptReleased = "RELEASED"
	// AttemptSessionReplaced: the node process restarted; the new session
	// took back the old session's leases when it opened.
	AttemptSessionReplaced = "SESSION_REPLACED"

	// NodeSilentErrorCode is the error code of a lease taken from a node
	// that missed its heartbeats.
	NodeSilentErrorCode = "NODE_SILENT"
	// NodeRestartedErrorCode is the error code of a lease taken back because
	// its node opened a new session (a new boot).
	NodeRestartedErrorCode = "NODE_RESTARTED"
	// NeverStartedErrorCode is the error code of a job that failed because
	// MaxUnstartedAttempts leases ended before judging started on any of
	// them: the business sees SYSTEM_ERROR with this code.
	NeverStartedErrorCode = "NEVER_STARTED"
)

// Release reasons a node may give (machine protocol `POST jobs/release`).
const (
	ReleaseDraining          = "DRAINING"
	ReleaseShuttingDown      = "SHUTTING_DOWN"
	ReleaseInputsUnavailable = "INPUTS_UNAVAILABLE"
	ReleaseDependencyDown    = "DEPENDENCY_DOWN"
)

// claimRequestRE is the shape of a claim request id (the machine contract's
// pattern).
var claimRequestRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{7,63}$`)

func checkClaimRequestID(id string) error {
	if id != "" && !claimRequestRE.MatchString(id) {
		return invalid("requestId", "must match %s", claimRequestRE)
	}
	return nil
}

// replayClaims answers the calls (indexes live, nodes locked by the claim)
// whose claim request already granted leases (byCall, read after the
// locks by readGrants) with replayGranted, and returns the live calls left
// to take new work.
func (s *Store) replayClaims(ctx context.Context, q execQuerier, calls []claimCall, live []int, byCall map[int][]granted, out []claimAnswer) ([]int, error) {
	if len(byCall) == 0 {
		return live, nil
	}
	rest := live[:0:0]
	for _, i := range live {
		if g := byCall[i]; len(g) > 0 {
			jobs, err := s.replayGranted(ctx, q, calls[i].sess, g)
			if err != nil {
				return nil, err
			}
			if len(jobs) > 0 {
				out[i].jobs = jobs
				continue
			}
		}
		rest = append(rest, i)
	}
	return rest, nil
}

// execQuerier runs statements inside a transaction: a *sql.Tx, or the
// *sql.Conn of a transaction made of scripts.
type execQuerier interface {
	querier
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// granted is a lease an earlier try of a claim request was given.
type granted struct{ jobID, epoch int64 }

// replayGranted answers a claim request that already granted leases: the
// ones still live and held by this session are extended (the node is alive
// and about to run them) and returned as they were granted. Called with the
// node locked, so no claim of this node runs meanwhile; the jobs are locked
// and re-checked here.
func (s *Store) replayGranted(ctx context.Context, tx execQuerier, sess NodeSession, prior []granted) ([]ClaimedJob, error) {
	ids := make([]int64, len(prior))
	epochs := make(map[int64]int64, len(prior))
	for i, g := range prior {
		ids[i], epochs[g.jobID] = g.jobID, g.epoch
	}
	in, args := inList(ids)
	rows, err := queryAll(ctx, tx, scanClaimed,
		`SELECT `+claimColumns+` FROM judge_job
		 WHERE id IN (`+in+`) AND state = 'RUNNING' AND node_id = ? AND session_epoch = ? AND lease_until > NOW(6)
		 ORDER BY id FOR UPDATE`, append(args, sess.NodeID, sess.SessionEpoch)...)
	if err != nil {
		return nil, fmt.Errorf("store: claim: replay: %w", err)
	}
	out := rows[:0]
	for _, c := range rows {
		if epochs[c.JobID] == c.LeaseEpoch {
			c.Replayed, c.ReadyWait, c.LeaseRemaining = true, 0, s.cfg.LeaseTTL
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	live := make([]int64, len(out))
	for i, c := range out {
		live[i] = c.JobID
	}
	in, args = inList(live)
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_job SET lease_until = NOW(6) + INTERVAL ? MICROSECOND, updated_at = NOW(6) WHERE id IN (`+in+`)`,
		append([]any{micros(s.cfg.LeaseTTL)}, args...)...); err != nil {
		return nil, fmt.Errorf("store: claim: replay: %w", err)
	}
	return out, nil
}

// lockedLease is a RUNNING job's lease as read under the job's lock, with
// what deciding its end needs.
type lockedLease struct {
	jobID, leaseEpoch int64
	kind              JobKind
	pool, typ, sid    string
	generation        int
	attempts          int
	maxAttempts       int
	unstarted         int
	// started: judging started on this lease (the job has a phase: the
	// node reported progress since the claim, which reset it).
	started bool
	expired bool
}

const lockedLeaseColumns = `id, lease_epoch, kind, pool, submission_type, submission_id, generation,
  attempt_count, max_attempts, unstarted_attempts, phase IS NOT NULL, COALESCE(lease_until < NOW(6), TRUE)`

func scanLockedLease(r rowScanner) (lockedLease, error) {
	var l lockedLease
	err := r.Scan(&l.jobID, &l.leaseEpoch, &l.kind, &l.pool, &l.typ, &l.sid, &l.generation,
		&l.attempts, &l.maxAttempts, &l.unstarted, &l.started, &l.expired)
	return l, err
}

// leaseEnding says how a lease ends without a result.
type leaseEnding struct {
	// outcome is the attempt's outcome (AttemptExpired, …).
	outcome string
	// errCode is the attempt's error class and the job's last error code.
	errCode string
	// immediate requeues at once instead of after the retry backoff: the
	// node gave the lease back itself.
	immediate bool
}

// endLeaseLocked ends a locked RUNNING job's lease without a result: the
// attempt is closed with its outcome and whether judging started; the job
// goes back to QUEUED (after the backoff unless immediate), or to FAILED
// with a settlement when its attempts are used up. A started attempt counts
// toward max_attempts (it was counted at claim); one that never started is
// uncounted and counts toward MaxUnstartedAttempts instead. The lease epoch
// stays, so the next claim bumps it and the old lease's renew and result
// are refused (fencing). It returns the job's new state; a caller whose job
// went back to QUEUED bumps its pool once, as the transaction's last
// statement (bumpPools).
func (s *Store) endLeaseLocked(ctx context.Context, tx *sql.Tx, l lockedLease, e leaseEnding) (JobState, error) {
	// A RUNNING attempt has no receipt yet: closeAttempt's empty digest
	// leaves it NULL.
	if err := closeAttempt(ctx, tx, l.jobID, l.leaseEpoch, e.outcome, e.errCode, "", l.started); err != nil {
		return "", err
	}
	retries, uncount := l.attempts < l.maxAttempts, 0
	errCode, delay := e.errCode, s.backoff(l.attempts)
	// A CHECK job is never requeued unstarted: it is one try (max_attempts
	// 1) that an admin repeats with verify, and the claim only looks for
	// CHECK jobs its node's pending_checks counter announces, which the
	// requeue could not raise without taking the node lock after the job's.
	if !l.started && l.kind != KindCheck {
		uncount = 1
		retries = l.unstarted+1 < s.cfg.MaxUnstartedAttempts
		delay = s.backoff(l.unstarted + 1)
		if !retries {
			errCode = NeverStartedErrorCode
		}
	}
	if e.immediate {
		delay = 0
	}
	if retries {
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_job SET state = 'QUEUED', available_at = NOW(6) + INTERVAL ? MICROSECOND,
			   node_id = NULL, host_group_id = NULL, session_epoch = NULL, lease_until = NULL,
			   attempt_count = GREATEST(attempt_count - ?, 0), unstarted_attempts = unstarted_attempts + ?,
			   last_error_code = ?, status_version = status_version + 1, updated_at = NOW(6)
			 WHERE id = ?`, micros(delay), uncount, uncount, errCode, l.jobID); err != nil {
			return "", fmt.Errorf("store: requeue: %w", err)
		}
		return StateQueued, nil
	}
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_job SET state = 'FAILED', last_error_code = ?, lease_until = NULL,
		   attempt_count = GREATEST(attempt_count - ?, 0), unstarted_attempts = unstarted_attempts + ?,
		   status_version = status_version + 1, finished_at = NOW(6), updated_at = NOW(6)
		 WHERE id = ?`, errCode, uncount, uncount, l.jobID); err != nil {
		return "", fmt.Errorf("store: fail: %w", err)
	}
	return StateFailed, settle(ctx, tx, settlement{jobID: l.jobID, kind: l.kind, typ: l.typ, sid: l.sid,
		generation: l.generation, status: "SYSTEM_ERROR", errorCode: errCode})
}

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
	JobState JobState
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
func (s *Store) Release(ctx context.Context, sess NodeSession, items []ReleaseItem, reason string) ([]ReleaseResult, error) {
	switch reason {
	case ReleaseDraining, ReleaseShuttingDown, ReleaseInputsUnavailable, ReleaseDependencyDown:
	default:
		return nil, invalid("reason", "must be %s, %s, %s or %s, got %q",
			ReleaseDraining, ReleaseShuttingDown, ReleaseInputsUnavailable, ReleaseDependencyDown, reason)
	}
	if len(items) == 0 || len(items) > 64 {
		return nil, invalid("leases", "must hold 1..64 leases, got %d", len(items))
	}
	sorted := slices.Clone(items)
	slices.SortFunc(sorted, func(a, b ReleaseItem) int { return cmp.Compare(a.JobID, b.JobID) })
	answers := make(map[ReleaseItem]ReleaseResult, len(items))
	pools := map[string]bool{}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		clear(answers)
		clear(pools)
		// Lock order: node (shared: it only has to hold still against a new
		// session or a revoke) → job → attempt.
		var epoch int64
		var revoked bool
		err := tx.QueryRowContext(ctx,
			`SELECT session_epoch, revoked_at IS NOT NULL FROM judge_node WHERE id = ? LOCK IN SHARE MODE`, sess.NodeID).Scan(&epoch, &revoked)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("node %d: %w", sess.NodeID, ErrUnauthenticated)
		case err != nil:
			return fmt.Errorf("store: release: node: %w", err)
		case revoked:
			return fmt.Errorf("node %d: %w", sess.NodeID, ErrNodeRevoked)
		case epoch != sess.SessionEpoch:
			return fmt.Errorf("node %d session %d (current %d): %w", sess.NodeID, sess.SessionEpoch, epoch, ErrSessionSuperseded)
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
			if js == StateQueued {
				pools[l.pool] = true
			}
			answers[it] = ReleaseResult{JobID: it.JobID, LeaseEpoch: it.LeaseEpoch, State: ReleaseReleased, JobState: js}
		}
		return bumpPools(ctx, tx, pools)
	})
	if err != nil {
		return nil, err
	}
	for p := range pools {
		s.notify(p)
	}
	// Released leases free capacity whether or not the job was requeued.
	s.notifyFreed(ctx, sess.NodeID)
	out := make([]ReleaseResult, len(items))
	for i, it := range items {
		out[i] = answers[it]
	}
	return out, nil
}

// requeueOldSessionLocked takes back, when a node opens a session for a new
// boot, every lease its earlier sessions still hold: that process is gone
// (or must stop: its session is refused from now on), so its jobs need not
// wait for their leases to run out. Called in OpenSession's transaction
// with the node locked (node → job). It returns the pools that got work.
func (s *Store) requeueOldSessionLocked(ctx context.Context, tx *sql.Tx, nodeID, newEpoch int64) (map[string]bool, int, error) {
	leases, err := queryAll(ctx, tx, scanLockedLease,
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
		if js == StateQueued {
			pools[l.pool] = true
		}
	}
	return pools, len(leases), bumpPools(ctx, tx, pools)
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
func (s *Store) reapCandidates(ctx context.Context) ([]reapCandidate, error) {
	scan := func(r rowScanner) (reapCandidate, error) {
		var c reapCandidate
		return c, r.Scan(&c.jobID, &c.leaseEpoch, &c.silent)
	}
	expired, err := queryAll(ctx, s.db, scan,
		`SELECT id, lease_epoch, FALSE FROM judge_job WHERE state = 'RUNNING' AND lease_until < NOW(6)
		 ORDER BY lease_until, id LIMIT ?`, s.cfg.ReapBatch)
	if err != nil {
		return nil, fmt.Errorf("store: reap: candidates: %w", err)
	}
	// Nodes are few; their running jobs come from ix_job_node.
	silent, err := queryAll(ctx, s.db, scan,
		`SELECT j.id, j.lease_epoch, TRUE FROM judge_node n
		 JOIN judge_job j ON j.node_id = n.id AND j.state = 'RUNNING' AND j.lease_until >= NOW(6)
		 WHERE `+silentNodeSQL+` ORDER BY j.id LIMIT ?`, micros(s.cfg.HeartbeatTTL), s.cfg.ReapBatch)
	if err != nil {
		return nil, fmt.Errorf("store: reap: silent nodes: %w", err)
	}
	return append(expired, silent...), nil
}

// reapOne ends one candidate lease if it still is what the candidate says,
// skipping a row another replica or a result commit holds. It returns the
// job's new state (empty: nothing done) and its pool.
func (s *Store) reapOne(ctx context.Context, c reapCandidate) (JobState, string, error) {
	var state JobState
	var pool string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		state, pool = "", ""
		if c.silent {
			// Re-read the node (no lock: a heartbeat that lands after this
			// read finds its lease fenced, as a late one always does).
			var silent bool
			err := tx.QueryRowContext(ctx,
				`SELECT COALESCE(`+silentNodeSQL+`, FALSE) FROM judge_job j JOIN judge_node n ON n.id = j.node_id WHERE j.id = ?`,
				micros(s.cfg.HeartbeatTTL), c.jobID).Scan(&silent)
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
		if state, err = s.endLeaseLocked(ctx, tx, l, end); err != nil || state != StateQueued {
			return err
		}
		return bumpPool(ctx, tx, l.pool)
	})
	return state, pool, err
}
