package jobdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Settlement is a job's final outcome, for its SETTLED event (Settle).
type Settlement struct {
	JobID      int64
	Kind       JobKind
	Typ, Sid   string
	Generation int
	Status     string
	ErrorCode  string
	Result     []byte
	NodeID     int64
}

// SettledEventType is the event type of a submission's final outcome.
const SettledEventType = "SETTLED"

// SettlementPayload is the JSON body of a SETTLED event.
type SettlementPayload struct {
	JobID          string          `json:"jobId"`
	SubmissionType string          `json:"submissionType"`
	SubmissionID   string          `json:"submissionId"`
	Generation     int             `json:"generation"`
	Status         string          `json:"status"`
	ErrorCode      string          `json:"errorCode,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
}

// Settle writes the outbox event of a SUBMISSION job, or finishes the node
// check of a CHECK job (checks never reach the business).
func Settle(ctx context.Context, tx *sql.Tx, st Settlement) error {
	if st.Kind == KindCheck {
		outcome := "FAILED"
		if st.Status == "AC" {
			outcome = "PASSED"
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_node_check SET outcome = ?, steps = ?, finished_at = NOW(6) WHERE job_id = ?`,
			outcome, string(st.Result), st.JobID); err != nil {
			return fmt.Errorf("store: settle check: %w", err)
		}
		return nil
	}
	payload, err := json.Marshal(SettlementPayload{
		JobID: strconv.FormatInt(st.JobID, 10), SubmissionType: st.Typ, SubmissionID: st.Sid, Generation: st.Generation,
		Status: st.Status, ErrorCode: st.ErrorCode, Result: st.Result,
	})
	if err != nil {
		return fmt.Errorf("store: settle: %w", err)
	}
	return InsertSettlements(ctx, tx, []SettlementRow{{JobID: st.JobID, Typ: st.Typ, Sid: st.Sid, Generation: st.Generation, Payload: payload}})
}

// SettlementRow is one SETTLED outbox row with its payload rendered.
type SettlementRow struct {
	JobID      int64
	Typ, Sid   string
	Generation int
	Payload    []byte
}

// InsertSettlements writes SETTLED events with settlementSQL, the one
// statement that does: every settlement (fast completion, in its script;
// slow completion, failure, reap, here) goes through it. Each
// Settlement fans out to every consumer group that takes its submission type
// (the default group takes all), one row per group, in one INSERT … SELECT
// for the whole batch: the group set is read by the statement itself, in the
// settling transaction, so a group created on another replica is seen at
// once and the settlement path gains no round trip. Under READ COMMITTED the
// group rows are read without locks (token changes never wait on
// settlements). The payload travels once per settlement, not per group.
func InsertSettlements(ctx context.Context, tx *sql.Tx, rows []SettlementRow) error {
	q, args, err := SettlementSQL(rows)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("store: settle: %w", err)
	}
	return nil
}

// SettlementSQL is the INSERT of insertSettlements.
func SettlementSQL(rows []SettlementRow) (string, []any, error) {
	const head = `INSERT INTO judge_settlement_event
		(job_id, event_type, consumer_group, submission_type, submission_id, generation, payload) `
	const takes = `g.submission_types IS NULL OR FIND_IN_SET(v.typ, g.submission_types) > 0`
	if len(rows) == 1 {
		r := rows[0]
		return head + `SELECT ?, ?, g.name, ?, ?, ?, ? FROM judge_consumer_group g
			WHERE g.submission_types IS NULL OR FIND_IN_SET(?, g.submission_types) > 0`,
			[]any{r.JobID, SettledEventType, r.Typ, r.Sid, r.Generation, r.Payload, r.Typ}, nil
	}
	// The batch's small columns travel as one JSON array read by JSON_TABLE
	// (MySQL 8.0+, MariaDB 10.6+) and joined with the groups; each payload
	// is picked by its row number with ELT, so the (large) payloads are sent
	// once and never copied into an intermediate table.
	type small struct {
		N          int    `json:"n"`
		JobID      int64  `json:"j"`
		Typ        string `json:"t"`
		SID        string `json:"s"`
		Generation int    `json:"g"`
	}
	list := make([]small, len(rows))
	var q strings.Builder
	q.WriteString(head + `SELECT v.job_id, ?, g.name, v.typ, v.sid, v.generation, ELT(v.n`)
	args := make([]any, 0, len(rows)+2)
	args = append(args, SettledEventType)
	for i, r := range rows {
		q.WriteString(", ?")
		args = append(args, r.Payload)
		list[i] = small{N: i + 1, JobID: r.JobID, Typ: r.Typ, SID: r.Sid, Generation: r.Generation}
	}
	js, err := json.Marshal(list)
	if err != nil {
		return "", nil, fmt.Errorf("store: settle: %w", err)
	}
	q.WriteString(`) FROM JSON_TABLE(?, '$[*]' COLUMNS (n INT PATH '$.n', job_id BIGINT PATH '$.j',
		typ VARCHAR(32) PATH '$.t', sid VARCHAR(64) PATH '$.s', generation INT PATH '$.g')) v
		JOIN judge_consumer_group g ON ` + takes)
	args = append(args, string(js))
	return q.String(), args, nil
}
