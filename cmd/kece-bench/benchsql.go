package main

// Bench-only SQL. The benchmarks reach the control database through the
// business, admin and machine APIs like any client, except for what those
// APIs do not offer: these reads of outcomes on the database clock and the
// one shortcut that skips a node's self-check. Everything here reads or
// writes the judge_* tables directly, so it lives in this one file; nothing
// in the product calls it.

import (
	"context"
	"database/sql"
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
