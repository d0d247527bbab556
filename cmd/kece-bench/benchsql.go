package main

// Bench-only SQL. The benchmarks reach the control database through the
// business, admin and machine APIs like any client, except for what those
// APIs do not offer: reads of outcomes on the database clock (the burst,
// fleet, footprint and chaos figures), the chaos run's lock stand-in, and
// the one shortcut that skips a node's self-check. Everything here reads or
// writes the judge_* tables directly, so it lives in this one file; nothing
// in the product calls it, and no other file of the bench names a judge_*
// table.

import (
	"context"
	"database/sql"
	"time"
)

// enableNode enables a node directly, skipping the self-check flow (it is
// tested elsewhere): the benches measure scheduling, not verification.
func enableNode(ctx context.Context, db *sql.DB, id int64) error {
	_, err := db.ExecContext(ctx, `UPDATE judge_node SET desired_state = 'ENABLED' WHERE id = ?`, id)
	return err
}

// queuedJobs is how many jobs wait in every pool.
func queuedJobs(ctx context.Context, db *sql.DB) (n int, err error) {
	err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM judge_job WHERE state = 'QUEUED'`).Scan(&n)
	return n, err
}

// duplicateSettlements counts settlement events of a submission type beyond
// one per (submission, event type, consumer group): each is a duplicate.
func duplicateSettlements(ctx context.Context, db *sql.DB, submissionType string) (n int, err error) {
	err = db.QueryRowContext(ctx, `SELECT COALESCE(SUM(c - 1), 0) FROM (SELECT COUNT(*) AS c FROM judge_settlement_event
		WHERE submission_type = ? GROUP BY submission_id, event_type, consumer_group) AS x`, submissionType).Scan(&n)
	return n, err
}

// jobTimeline is the timeline of finished jobs on the database clock: per
// job the queue wait (created → first claim) and execution (first claim →
// finished) in ms, and when it finished, in s after the first job of the
// set was created.
func jobTimeline(ctx context.Context, db *sql.DB, submissionType, idPrefix string) (queueMs, execMs, doneS []float64, err error) {
	like := idPrefix + "%"
	rows, err := db.QueryContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, created_at, started_at),
		TIMESTAMPDIFF(MICROSECOND, started_at, finished_at),
		TIMESTAMPDIFF(MICROSECOND, (SELECT MIN(created_at) FROM judge_job WHERE submission_type = ? AND submission_id LIKE ?), finished_at)
		FROM judge_job WHERE submission_type = ? AND submission_id LIKE ? AND finished_at IS NOT NULL`,
		submissionType, like, submissionType, like)
	if err != nil {
		return nil, nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var q, e, d int64
		if err := rows.Scan(&q, &e, &d); err != nil {
			return nil, nil, nil, err
		}
		queueMs, execMs, doneS = append(queueMs, float64(q)/1000), append(execMs, float64(e)/1000), append(doneS, float64(d)/1e6)
	}
	return queueMs, execMs, doneS, rows.Err()
}

// The chaos run's reads: its figures come from the database's own rows
// (attempts, their outcomes and times on the database clock), not from what
// the clients saw.

// readyBacklog counts jobs queued and ready now.
func readyBacklog(ctx context.Context, db *sql.DB) int {
	var n int
	_ = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM judge_job WHERE state = 'QUEUED' AND available_at <= UTC_TIMESTAMP(6)`).Scan(&n)
	return n
}

// lockEveryGroupAndNode locks every host group and node row in the lock
// order (docs/design.md), as a replica's transaction that froze holding
// them would (the chaos run's lock stand-in).
const lockEveryGroupAndNode = `SELECT COUNT(*) FROM (SELECT g.id FROM judge_host_group g JOIN judge_node n ON n.host_group_id = g.id
	ORDER BY g.id, n.id FOR UPDATE) l`

// poolClaimSample is, for pool, how many jobs are queued and ready now and
// how many seconds ago its latest attempt started (invalid: none in the
// last ten minutes).
func poolClaimSample(ctx context.Context, db *sql.DB, pool string) (queued int, sinceGrant sql.NullFloat64, err error) {
	err = db.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM judge_job WHERE pool = ? AND state = 'QUEUED' AND available_at <= UTC_TIMESTAMP(6)),
		(SELECT TIMESTAMPDIFF(MICROSECOND, MAX(a.started_at), UTC_TIMESTAMP(6)) / 1e6 FROM judge_job_attempt a
		   JOIN judge_job j ON j.id = a.job_id WHERE j.pool = ? AND a.started_at > UTC_TIMESTAMP(6) - INTERVAL 10 MINUTE)`,
		pool, pool).Scan(&queued, &sinceGrant)
	return queued, sinceGrant, err
}

// startedAttemptsExpiredBetween counts counted attempts (judging had
// started) whose lease expired between from and to.
func startedAttemptsExpiredBetween(ctx context.Context, db *sql.DB, from, to time.Time) (n int, err error) {
	err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM judge_job_attempt WHERE outcome = 'EXPIRED' AND judging_started = 1
		AND ended_at BETWEEN ? AND ?`, from.UTC(), to.UTC()).Scan(&n)
	return n, err
}

// jobsCommittedTwice counts jobs with more than one committed attempt.
func jobsCommittedTwice(ctx context.Context, db *sql.DB) (n int, err error) {
	err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT job_id FROM judge_job_attempt WHERE outcome = 'COMPLETED'
		GROUP BY job_id HAVING COUNT(*) > 1) d`).Scan(&n)
	return n, err
}

// attemptTotals counts every attempt and the expired ones (0, 0 when the
// database cannot answer: the figures are informational).
func attemptTotals(ctx context.Context, db *sql.DB) (attempts, expired int) {
	_ = db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(outcome = 'EXPIRED'), 0) FROM judge_job_attempt`).Scan(&attempts, &expired)
	return attempts, expired
}

// firstCompletionPerPool is, per pool, when the first attempt that started
// at or after since committed its result.
func firstCompletionPerPool(ctx context.Context, db *sql.DB, since time.Time) (map[string]time.Time, error) {
	rows, err := db.QueryContext(ctx, `SELECT j.pool, MIN(a.ended_at) FROM judge_job_attempt a JOIN judge_job j ON j.id = a.job_id
		WHERE a.outcome = 'COMPLETED' AND a.started_at >= ? GROUP BY j.pool`, since.UTC())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	first := map[string]time.Time{}
	for rows.Next() {
		var pool string
		var t time.Time
		if err := rows.Scan(&pool, &t); err != nil {
			return nil, err
		}
		first[pool] = t
	}
	return first, rows.Err()
}

// chaosJobs reads every chaos submission's jobs: how many, the latest state
// and verdict.
func chaosJobs(ctx context.Context, db *sql.DB) (map[string]chaosRow, error) {
	rows, err := db.QueryContext(ctx, `SELECT submission_id, COUNT(*), MAX(state), COALESCE(MAX(verdict), '')
		FROM judge_job WHERE submission_type = 'CHAOS' GROUP BY submission_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	inDB := map[string]chaosRow{}
	for rows.Next() {
		var id string
		var rw chaosRow
		if err := rows.Scan(&id, &rw.jobs, &rw.state, &rw.verdict); err != nil {
			return nil, err
		}
		inDB[id] = rw
	}
	return inDB, rows.Err()
}
