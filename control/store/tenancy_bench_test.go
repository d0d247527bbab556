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
	"github.com/kece-oj/kece/control/internal/jobdb"
)

// BenchmarkSettlementFanOut measures what consumer groups add to the
// settlement path: the per-group fan-out INSERT … SELECT (jobdb.InsertSettlements)
// against the baseline, the single-outbox INSERT … VALUES it replaced (one
// row per settlement), both timed inside a transaction on the same table,
// interleaved, for one completion and a batch of 16, with only the default
// group and with three groups. It prints key=value lines (medians): the
// statements alone, and the transaction with its commit (the fsync both
// share), which is what the settlement path pays.
//
//	go test ./control/store -run '^$' -bench SettlementFanOut -benchtime 1x
func BenchmarkSettlementFanOut(b *testing.B) {
	db, _ := dbtest.Open(b)
	ctx := context.Background()
	// A payload the size of a judged submission's result with a few cases.
	payload := []byte(`{"status":"AC","result":"` + strings.Repeat("x", 3000) + `"}`)
	const rounds = 200
	job := int64(0)
	rows := func(n int) []jobdb.SettlementRow {
		out := make([]jobdb.SettlementRow, n)
		for i := range out {
			job++
			out[i] = jobdb.SettlementRow{JobID: job, Typ: "ALGO", Sid: fmt.Sprint(job), Generation: 1, Payload: payload}
		}
		return out
	}
	// once times the statement and, apart, the whole transaction with its
	// commit: what a settlement pays end to end.
	once := func(fn func(tx *sql.Tx) error) (stmt, whole time.Duration) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := fn(tx); err != nil {
			b.Fatal(err)
		}
		stmt = time.Since(start)
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		return stmt, time.Since(start)
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
				base, fan := make([]time.Duration, rounds), make([]time.Duration, rounds)
				baseTx, fanTx := make([]time.Duration, rounds), make([]time.Duration, rounds)
				for i := range rounds {
					base[i], baseTx[i] = once(func(tx *sql.Tx) error { return baselineInsertSettlements(ctx, tx, rows(batch)) })
					fan[i], fanTx[i] = once(func(tx *sql.Tx) error { return jobdb.InsertSettlements(ctx, tx, rows(batch)) })
				}
				median := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
				bm, fm := median(base), median(fan)
				fmt.Printf("settlement_fanout_with_commit groups=%d batch=%d fanout_p50_us_per_tx=%d baseline_single_outbox_p50_us_per_tx=%d\n",
					groups, batch, median(fanTx).Microseconds(), median(baseTx).Microseconds())
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
func baselineInsertSettlements(ctx context.Context, tx *sql.Tx, rows []jobdb.SettlementRow) error {
	var q strings.Builder
	q.WriteString(`INSERT INTO judge_settlement_event (job_id, event_type, submission_type, submission_id, generation, payload) VALUES `)
	args := make([]any, 0, 6*len(rows))
	for i, r := range rows {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?)")
		args = append(args, r.JobID, SettledEventType, r.Typ, r.Sid, r.Generation, r.Payload)
	}
	_, err := tx.ExecContext(ctx, q.String(), args...)
	return err
}
