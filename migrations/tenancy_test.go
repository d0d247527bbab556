package migrations_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/dbtest"
	"github.com/kece-oj/kece/migrations"
)

// 00008 keeps what is deployed as it was: a business token and an outbox
// row written before it become an every-type token and an event of the
// default group, and the default group takes every type; its Down drops
// the tenancy columns and table again.
func TestTenancyMigrationKeepsExistingTokensAndEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.Open(t)
	p, err := migrations.Provider(db)
	require.NoError(t, err)
	_, err = p.DownTo(ctx, 5)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO judge_api_token (kind, name, token_hash) VALUES ('BUSINESS', 'oj', REPEAT('a', 32))`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO judge_settlement_event (job_id, event_type, submission_type, submission_id, generation, payload)
		VALUES (7, 'SETTLED', 'ALGO', 's-7', 1, '{}')`)
	require.NoError(t, err)

	require.NoError(t, migrations.Up(ctx, db))
	var types sql.NullString
	var group string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT submission_types, consumer_group FROM judge_api_token WHERE name = 'oj'`).Scan(&types, &group))
	require.False(t, types.Valid, "an existing token may use every type")
	require.Equal(t, "default", group)
	require.NoError(t, db.QueryRowContext(ctx, `SELECT consumer_group FROM judge_settlement_event WHERE job_id = 7`).Scan(&group))
	require.Equal(t, "default", group, "an undelivered event stays with the consumers that had it")
	require.NoError(t, db.QueryRowContext(ctx, `SELECT submission_types FROM judge_consumer_group WHERE name = 'default'`).Scan(&types))
	require.False(t, types.Valid, "the default group takes every type")

	_, err = p.DownTo(ctx, 5)
	require.NoError(t, err)
	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name = 'judge_consumer_group'`).Scan(&n))
	require.Zero(t, n)
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM judge_settlement_event WHERE job_id = 7`).Scan(&n))
	require.Equal(t, 1, n, "the default group's rows survive the Down")
}

// 00011 attributes every manifest and artifact published before it to the
// shared owner, so each keeps working for every token; its Down keeps every
// manifest, also the same content published by two owners.
func TestTestDataMigrationSharesExistingData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.Open(t)
	p, err := migrations.Provider(db)
	require.NoError(t, err)
	_, err = p.DownTo(ctx, 10)
	require.NoError(t, err)
	digest := "ab" + strings.Repeat("0", 62)
	_, err = db.ExecContext(ctx, `INSERT INTO judge_artifact (sha256, size) VALUES (?, 3)`, digest)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO judge_manifest (digest, kind, case_count, body) VALUES (?, 'CODE', 1, '{}')`, digest)
	require.NoError(t, err)

	require.NoError(t, migrations.Up(ctx, db))
	var owner string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT owner FROM judge_manifest WHERE digest = ?`, digest).Scan(&owner))
	require.Equal(t, "", owner, "an existing manifest is shared")
	require.NoError(t, db.QueryRowContext(ctx, `SELECT owner FROM judge_artifact_owner WHERE sha256 = ?`, digest).Scan(&owner))
	require.Equal(t, "", owner, "an existing artifact is shared")
	_, err = db.ExecContext(ctx, `INSERT INTO judge_manifest (digest, owner, kind, case_count, body) VALUES (?, 'ALGO', 'CODE', 1, '{}')`, digest)
	require.NoError(t, err, "the same content under another owner is another manifest")

	_, err = p.DownTo(ctx, 10)
	require.NoError(t, err)
	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM judge_manifest WHERE digest = ?`, digest).Scan(&n))
	require.Equal(t, 2, n, "the Down keeps every manifest")
}

// 00012 ends the console sessions open at upgrade (no row says which secret
// opened them, so none can be bound to one); its Down drops what it added.
func TestSecretHistoryMigrationEndsOpenSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.Open(t)
	p, err := migrations.Provider(db)
	require.NoError(t, err)
	_, err = p.DownTo(ctx, 11)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO judge_console_session (session_hash, token_id, csrf_token, remote_addr, expires_at)
		VALUES (REPEAT('s', 32), 1, REPEAT('c', 64), '127.0.0.1', NOW(6) + INTERVAL 1 HOUR)`)
	require.NoError(t, err)

	require.NoError(t, migrations.Up(ctx, db))
	var ended sql.NullTime
	require.NoError(t, db.QueryRowContext(ctx, `SELECT ended_at FROM judge_console_session`).Scan(&ended))
	require.True(t, ended.Valid, "a session open at upgrade is ended")

	_, err = p.DownTo(ctx, 11)
	require.NoError(t, err)
	var n int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name = 'judge_api_token_retired'`).Scan(&n))
	require.Zero(t, n)
}
