package migrations_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/dbtest"
	"github.com/kece-oj/kece/migrations"
)

// 00018 gives the jobs queued before it the slot weight of their manifest
// (interactive 2, communication processes + 1, others 1), leaves running
// and finished ones at 1, and its Down drops the column.
func TestSlotWeightMigrationWeighsQueuedJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.Open(t)
	p, err := migrations.Provider(db)
	require.NoError(t, err)
	_, err = p.DownTo(ctx, 17)
	require.NoError(t, err)
	manifests := map[string]string{
		"plain": `{"kind":"CODE","checker":{"type":"tolerant"}}`,
		"inter": `{"kind":"CODE","checker":{"type":"interactive","special":{"language":"cpp17"}}}`,
		"comm":  `{"kind":"CODE","checker":{"type":"communication","special":{"language":"cpp17","processes":3}}}`,
	}
	ids := map[string]int64{}
	for name, body := range manifests {
		r, err := db.ExecContext(ctx, `INSERT INTO judge_manifest (digest, owner, kind, case_count, body) VALUES (SHA2(?, 256), '', 'CODE', 1, ?)`,
			name, body)
		require.NoError(t, err)
		ids[name], err = r.LastInsertId()
		require.NoError(t, err)
	}
	job := func(id, man, state string) {
		t.Helper()
		_, err := db.ExecContext(ctx, `INSERT INTO judge_job (submission_type, submission_id, generation, kind, pool, runtime_spec,
			manifest_id, request_snapshot, request_digest, state, max_attempts) VALUES ('ALGO', ?, 1, 'SUBMISSION', 'cpp', 'cpp17', ?, '{}', REPEAT('a', 64), ?, 3)`,
			id, ids[man], state)
		require.NoError(t, err)
	}
	job("q-plain", "plain", "QUEUED")
	job("q-inter", "inter", "QUEUED")
	job("q-comm", "comm", "QUEUED")
	job("r-comm", "comm", "RUNNING")
	job("c-comm", "comm", "COMPLETED")

	require.NoError(t, migrations.Up(ctx, db))
	weight := func(id string) int {
		var w int
		require.NoError(t, db.QueryRowContext(ctx, `SELECT slot_weight FROM judge_job WHERE submission_id = ?`, id).Scan(&w))
		return w
	}
	for id, want := range map[string]int{"q-plain": 1, "q-inter": 2, "q-comm": 4, "r-comm": 1, "c-comm": 1} {
		require.Equal(t, want, weight(id), id)
	}

	_, err = p.DownTo(ctx, 17)
	require.NoError(t, err)
	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = 'judge_job' AND column_name = 'slot_weight'`).Scan(&n))
	require.Zero(t, n, "the Down drops the column")
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM judge_job`).Scan(&n))
	require.Equal(t, 5, n)
}
