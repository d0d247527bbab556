package lease

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/kece-oj/kece/control/internal/jobdb"
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

// lockedLease is a RUNNING job's lease as read under the job's lock, with
// what deciding its end needs.
type lockedLease struct {
	jobID, leaseEpoch int64
	kind              jobdb.JobKind
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

func scanLockedLease(r jobdb.RowScanner) (lockedLease, error) {
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
func (s *Engine) endLeaseLocked(ctx context.Context, tx *sql.Tx, l lockedLease, e leaseEnding) (jobdb.JobState, error) {
	// A RUNNING attempt has no receipt yet: closeAttempt's empty digest
	// leaves it NULL.
	if err := closeAttempt(ctx, tx, l.jobID, l.leaseEpoch, e.outcome, e.errCode, "", l.started, nil); err != nil {
		return "", err
	}
	retries, uncount := l.attempts < l.maxAttempts, 0
	errCode, delay := e.errCode, s.db.Backoff(l.attempts)
	// A CHECK job is never requeued unstarted: it is one try (max_attempts
	// 1) that an admin repeats with verify, and the claim only looks for
	// CHECK jobs its node's pending_checks counter announces, which the
	// requeue could not raise without taking the node lock after the job's.
	if !l.started && l.kind != jobdb.KindCheck {
		uncount = 1
		retries = l.unstarted+1 < s.db.Cfg.MaxUnstartedAttempts
		delay = s.db.Backoff(l.unstarted + 1)
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
			 WHERE id = ?`, jobdb.Micros(delay), uncount, uncount, errCode, l.jobID); err != nil {
			return "", fmt.Errorf("store: requeue: %w", err)
		}
		return jobdb.StateQueued, nil
	}
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_job SET state = 'FAILED', last_error_code = ?, lease_until = NULL,
		   attempt_count = GREATEST(attempt_count - ?, 0), unstarted_attempts = unstarted_attempts + ?,
		   status_version = status_version + 1, finished_at = NOW(6), updated_at = NOW(6)
		 WHERE id = ?`, errCode, uncount, uncount, l.jobID); err != nil {
		return "", fmt.Errorf("store: fail: %w", err)
	}
	return jobdb.StateFailed, jobdb.Settle(ctx, tx, jobdb.Settlement{JobID: l.jobID, Kind: l.kind, Typ: l.typ, Sid: l.sid,
		Generation: l.generation, Status: "SYSTEM_ERROR", ErrorCode: errCode})
}
