package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kece-oj/kece/control/dbtest"
)

// BenchmarkSettlementFanOut measures what consumer groups add to the
// settlement path: the per-group fan-out INSERT … SELECT (insertSettlements)
// against the baseline, the single-outbox INSERT … VALUES it replaced (one
// row per settlement), both timed inside a transaction on the same table,
// interleaved, for one completion and a batch of 16, with only the default
// group and with three groups. It prints key=value lines (medians); the
// commit (an fsync shared by both) is left out so the figures compare the
// statements themselves.
//
//	go test ./control/store -run '^$' -bench SettlementFanOut -benchtime 1x
func BenchmarkSettlementFanOut(b *testing.B) {
	db, _ := dbtest.Open(b)
	ctx := context.Background()
	// A payload the size of a judged submission's result with a few cases.
	payload := []byte(`{"status":"AC","result":"` + strings.Repeat("x", 3000) + `"}`)
	const rounds = 200
	job := int64(0)
	rows := func(n int) []settlementRow {
		out := make([]settlementRow, n)
		for i := range out {
			job++
			out[i] = settlementRow{jobID: job, typ: "ALGO", sid: fmt.Sprint(job), generation: 1, payload: payload}
		}
		return out
	}
	once := func(fn func(tx *sql.Tx) error) time.Duration {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := fn(tx); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		return d
	}
	for range b.N {
		for _, groups := range []int{1, 3} {
			if groups == 3 {
				if _, err := db.ExecContext(ctx, `INSERT IGNORE INTO judge_consumer_group (name, submission_types)
					VALUES ('algo', 'ALGO'), ('grader', NULL), ('sql', 'DATABASE')`); err != nil {
					b.Fatal(err)
				}
			}
			for _, batch := range []int{1, 16} {
				// Interleaved, and compared by median, so a load spike on a
				// shared machine hits both sides alike.
				base := make([]time.Duration, rounds)
				fan := make([]time.Duration, rounds)
				for i := range rounds {
					base[i] = once(func(tx *sql.Tx) error { return baselineInsertSettlements(ctx, tx, rows(batch)) })
					fan[i] = once(func(tx *sql.Tx) error { return insertSettlements(ctx, tx, rows(batch)) })
				}
				slices.Sort(base)
				slices.Sort(fan)
				bm, fm := base[rounds/2], fan[rounds/2]
				// groups=3: default and grader take ALGO, sql does not — two
				// rows per settlement against the baseline's one.
				fmt.Printf("settlement_fanout groups=%d batch=%d fanout_p50_us_per_tx=%d baseline_single_outbox_p50_us_per_tx=%d fanout_us_per_settlement=%.1f baseline_us_per_settlement=%.1f ratio=%.2f\n",
					groups, batch, fm.Microseconds(), bm.Microseconds(),
					float64(fm.Microseconds())/float64(batch), float64(bm.Microseconds())/float64(batch),
					float64(fm)/float64(max(bm, 1)))
			}
		}
	}
}

// baselineInsertSettlements is the outbox write before consumer groups
// existed (one row per settlement, default group), kept here only as the
// benchmark's baseline.
func baselineInsertSettlements(ctx context.Context, tx *sql.Tx, rows []settlementRow) error {
	var q strings.Builder
	q.WriteString(`INSERT INTO judge_settlement_event (job_id, event_type, submission_type, submission_id, generation, payload) VALUES `)
	args := make([]any, 0, 6*len(rows))
	for i, r := range rows {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?)")
		args = append(args, r.jobID, SettledEventType, r.typ, r.sid, r.generation, r.payload)
	}
	_, err := tx.ExecContext(ctx, q.String(), args...)
	return err
}
