package store_test

import (
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

// planRowsDefault is the judge_job size TestSearchQueryPlans fills by
// default; KECE_PLAN_ROWS asks for more (e.g. 2000000) when checking plans
// at production size.
const planRowsDefault = 200_000

// TestSearchQueryPlans fills judge_job and judge_audit with a realistic
// mix and runs every admin search through MariaDB's ANALYZE, which executes
// the statement and reports the rows each table really read (r_rows): each
// must read a bounded number of rows — its page or the window — never the
// table. It prints one key=value line per statement.
//
// Not parallel, on purpose: filling the tables keeps the shared MariaDB busy
// for seconds, and the package's lease tests (5 s leases) would see that as
// nodes going silent. A serial test runs before the parallel ones start.
func TestSearchQueryPlans(t *testing.T) {
	b := setup(t)
	n := planRowsDefault
	if v := os.Getenv("KECE_PLAN_ROWS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	// Jobs one every 100 ms, ending now; 60% cpp; verdicts mostly AC/WA,
	// CE 1%, OLE 0.01%, PARTIAL never; the newest 1% QUEUED; 1% FAILED,
	// 1% CANCELLED; one CHECK job in a thousand.
	_, err := b.DB.ExecContext(b.Ctx, fmt.Sprintf(`INSERT INTO judge_job
	  (id, submission_type, submission_id, generation, kind, pool, runtime_spec, manifest_id, request_snapshot, request_digest,
	   state, verdict, max_attempts, created_at, finished_at)
	  SELECT seq, IF(seq %% 1000 = 0, 'KECE_CHECK', 'ALGO'), CONCAT('s-', seq), 1,
	         IF(seq %% 1000 = 0, 'CHECK', 'SUBMISSION'),
	         ELT(1 + seq %% 10, 'cpp', 'cpp', 'cpp', 'cpp', 'cpp', 'cpp', 'java', 'python', 'arkts', 'mysql'), 'cpp17', %d, '{}', REPEAT('0', 64),
	         CASE WHEN seq > %d THEN 'QUEUED' WHEN seq %% 100 = 1 THEN 'FAILED' WHEN seq %% 100 = 2 THEN 'CANCELLED' ELSE 'COMPLETED' END,
	         CASE WHEN seq > %d OR seq %% 100 IN (1, 2) THEN NULL WHEN seq %% 10000 = 3 THEN 'OLE' WHEN seq %% 100 = 3 THEN 'CE'
	              WHEN seq DIV 10 %% 10 < 6 THEN 'AC' WHEN seq DIV 10 %% 10 < 9 THEN 'WA' ELSE 'TLE' END,
	         3, NOW(6) - INTERVAL (%d - seq) * 100000 MICROSECOND,
	         IF(seq > %d, NULL, NOW(6) - INTERVAL (%d - seq) * 100000 MICROSECOND + INTERVAL 2 SECOND)
	  FROM seq_1_to_%d`, b.Manifest, n*99/100, n*99/100, n, n*99/100, n, n))
	require.NoError(t, err)
	audits := n / 10
	_, err = b.DB.ExecContext(b.Ctx, fmt.Sprintf(`INSERT INTO judge_audit (actor, action, node_id, job_id, reason, created_at)
	  SELECT IF(seq %% 50 = 0, 'ADMIN:alice', 'control'), IF(seq %% 50 = 0, 'node.drain', 'job.lease_revoked'),
	         1 + seq %% 40, IF(seq %% 50 = 0, NULL, seq), 'r', NOW(6) - INTERVAL (%d - seq) SECOND
	  FROM seq_1_to_%d`, audits, audits))
	require.NoError(t, err)
	_, err = b.DB.ExecContext(b.Ctx, `ANALYZE TABLE judge_job, judge_audit`)
	require.NoError(t, err)

	var now time.Time
	require.NoError(t, b.DB.QueryRowContext(b.Ctx, `SELECT NOW(6)`).Scan(&now))
	hourAgo, threeHoursAgo := now.Add(-time.Hour), now.Add(-3*time.Hour)
	type plan struct {
		name    string
		q       string
		args    []any
		maxRead int64 // rows any one table may read
	}
	job := func(name string, f store.JobFilter, maxRead int64) plan {
		require.NoError(t, f.Validate())
		q, args, err := store.JobSearchSQL(b.Ctx, b.Store, f)
		require.NoError(t, err)
		return plan{name, q, args, maxRead}
	}
	aud := func(name string, f store.AuditFilter, maxRead int64) plan {
		require.NoError(t, f.Validate())
		q, args := store.AuditSearchSQL(f)
		return plan{name, q, args, maxRead}
	}
	mid := strconv.Itoa(n/2 + 1)
	// VerdictMixSQL's arguments: the last bucket's index, the window's end,
	// the bucket width in microseconds, and the window's start and end.
	mix3hBucket := store.MixBucket(3 * 60)
	mix3hBuckets := int((3*time.Hour + mix3hBucket - 1) / mix3hBucket)
	window := int64(15 * 60 * 10) // jobs finished in 15 minutes at 10/s
	plans := []plan{
		job("jobs_newest", store.JobFilter{}, 200),
		job("jobs_by_submission", store.JobFilter{SubmissionType: "ALGO", SubmissionID: "s-" + mid}, 10),
		job("jobs_by_pool", store.JobFilter{Pool: "python"}, 2000),
		job("jobs_by_pool_page_deep", store.JobFilter{Pool: "python", BeforeID: int64(n / 2)}, 2000),
		job("jobs_by_pool_verdict", store.JobFilter{Pool: "cpp", Verdict: "WA"}, 2000),
		job("jobs_by_pool_verdict_page_deep", store.JobFilter{Pool: "cpp", Verdict: "WA", BeforeID: int64(n / 2)}, 2000),
		job("jobs_by_rare_verdict", store.JobFilter{Verdict: "OLE"}, 1000),
		job("jobs_by_absent_verdict", store.JobFilter{Verdict: "PARTIAL"}, 1000),
		job("jobs_queued", store.JobFilter{State: store.StateQueued}, int64(n/100)+200),
		job("jobs_last_hour", store.JobFilter{CreatedAfter: hourAgo}, 200),
		job("jobs_failed", store.JobFilter{State: store.StateFailed}, 200),
		// A window reads at most its rows and createdSlack's on each side.
		job("jobs_an_hour_3h_ago", store.JobFilter{CreatedAfter: threeHoursAgo, CreatedBefore: threeHoursAgo.Add(time.Hour)}, 200+2*1200),
		job("jobs_pool_an_hour_3h_ago", store.JobFilter{Pool: "python", CreatedAfter: threeHoursAgo, CreatedBefore: threeHoursAgo.Add(time.Hour)}, 2000+2*1200),
		job("jobs_pool_verdict_hour_3h_ago", store.JobFilter{Pool: "java", Verdict: "CE", CreatedAfter: threeHoursAgo,
			CreatedBefore: threeHoursAgo.Add(time.Hour)}, 36_000+2*1200),
		aud("audit_newest", store.AuditFilter{}, 200),
		aud("audit_by_actor", store.AuditFilter{Actor: "ADMIN:alice"}, 200),
		aud("audit_by_action", store.AuditFilter{Action: "node.drain"}, 200),
		aud("audit_by_node", store.AuditFilter{NodeID: 7}, 200),
		aud("audit_an_hour_ago", store.AuditFilter{After: hourAgo.Add(-time.Hour), Before: hourAgo}, 3600+200),
		{"verdict_mix_15m", store.VerdictMixSQL, []any{14, now, time.Minute.Microseconds(), now.Add(-15 * time.Minute), now}, window + 100},
		// The window's rows are fewer than the table's (which spans n/10 s,
		// over 5 h at the default size), so this bound can fail.
		{"verdict_mix_3h", store.VerdictMixSQL, []any{mix3hBuckets - 1, now, mix3hBucket.Microseconds(), threeHoursAgo, now}, 3*3600*10 + 100},
	}
	for _, p := range plans {
		start := time.Now()
		read, keys := analyze(t, b.DB, p.q, p.args)
		took := time.Since(start)
		fmt.Printf("plan=%s table_rows=%d rows_read=%d max_rows_read=%d keys=%s ms=%.1f\n", p.name, n, read, p.maxRead,
			strings.Join(keys, ","), float64(took.Microseconds())/1000)
		assert.LessOrEqual(t, read, p.maxRead, "%s reads too many rows (keys %v): %s", p.name, keys, p.q)
	}
}

// analyze runs q under ANALYZE and returns the most rows one table read and
// the keys used.
func analyze(t *testing.T, db *sql.DB, q string, args []any) (int64, []string) {
	t.Helper()
	rows, err := db.Query("ANALYZE "+q, args...)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	require.Contains(t, cols, "r_rows", "ANALYZE output has no r_rows column: %v", cols)
	var most int64
	var keys []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		for i, c := range cols {
			switch c {
			case "key":
				keys = append(keys, cmpNull(vals[i], "NONE"))
			case "r_rows":
				f, err := strconv.ParseFloat(cmpNull(vals[i], "0"), 64)
				require.NoError(t, err)
				most = max(most, int64(f))
			}
		}
	}
	require.NoError(t, rows.Err())
	return most, keys
}

func cmpNull(v sql.NullString, def string) string {
	if v.Valid {
		return v.String
	}
	return def
}
