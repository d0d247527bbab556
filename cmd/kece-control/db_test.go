package main

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/control/dbtest"
)

func openTestDB(t *testing.T, lim dbLimits) *sql.DB {
	t.Helper()
	_, dsn := dbtest.Open(t)
	fs := settings.NewFlagSet("test", func(string) string { return "" })
	dbFlags(fs)
	require.NoError(t, fs.Parse(nil))
	db, err := openDBWith(context.Background(), fs, dsn, 4, lim)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// The replica's sessions carry the bounds: a lock wait gives up, and an
// idle transaction is ended by the server (MariaDB's
// idle_transaction_timeout, MySQL's wait_timeout).
func TestDBSessionsAreBounded(t *testing.T) {
	t.Parallel()
	db := openTestDB(t, dbLimits{idleTx: dbIdleTxDefault, lockWait: dbLockWaitDefault})
	var version string
	var lockWait, idle int
	require.NoError(t, db.QueryRow(`SELECT VERSION(), @@session.innodb_lock_wait_timeout`).Scan(&version, &lockWait))
	require.Equal(t, 10, lockWait)
	q := `SELECT @@session.wait_timeout`
	if strings.Contains(strings.ToLower(version), "mariadb") {
		q = `SELECT @@session.idle_transaction_timeout`
	}
	require.NoError(t, db.QueryRow(q).Scan(&idle))
	require.Equal(t, 10, idle)
}

// A replica that stops in the middle of a transaction (here: a transaction
// left idle) does not hold its row lock for longer than the bound: the
// server ends it and another replica's transaction gets the lock. Without
// the bound the second transaction waits until its own lock wait timeout.
func TestFrozenTransactionReleasesItsLocks(t *testing.T) {
	t.Parallel()
	db := openTestDB(t, dbLimits{idleTx: time.Second, lockWait: 10 * time.Second})
	ctx := context.Background()
	_, err := db.ExecContext(ctx, `CREATE TABLE lockme (id INT PRIMARY KEY) ENGINE=InnoDB`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO lockme VALUES (1)`)
	require.NoError(t, err)
	frozen, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	var id int
	require.NoError(t, frozen.QueryRowContext(ctx, `SELECT id FROM lockme WHERE id = 1 FOR UPDATE`).Scan(&id))
	defer frozen.Rollback() //nolint:errcheck // the server has ended it

	start := time.Now()
	other, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer other.Rollback() //nolint:errcheck
	require.NoError(t, other.QueryRowContext(ctx, `SELECT id FROM lockme WHERE id = 1 FOR UPDATE`).Scan(&id))
	took := time.Since(start)
	require.Less(t, took, 5*time.Second, "the lock came free after the 1 s idle bound, not the 10 s lock wait")
	require.Error(t, frozen.Commit(), "the frozen transaction was ended")
}

// A serving replica's sessions carry the tight bounds (two seconds for an
// idle transaction and a lock wait) and a statement time limit, which ends
// a statement that runs past it.
func TestServeSessionsAreBoundedTighter(t *testing.T) {
	t.Parallel()
	db := openTestDB(t, serveLimits)
	var version string
	var lockWait, idle int
	require.NoError(t, db.QueryRow(`SELECT VERSION(), @@session.innodb_lock_wait_timeout`).Scan(&version, &lockWait))
	require.Equal(t, 2, lockWait)
	mariadb := strings.Contains(strings.ToLower(version), "mariadb")
	q, stmtQ := `SELECT @@session.wait_timeout`, `SELECT @@session.max_execution_time / 1000`
	if mariadb {
		q, stmtQ = `SELECT @@session.idle_transaction_timeout`, `SELECT @@session.max_statement_time`
	}
	require.NoError(t, db.QueryRow(q).Scan(&idle))
	require.Equal(t, 2, idle)
	var stmt float64
	require.NoError(t, db.QueryRow(stmtQ).Scan(&stmt))
	require.InDelta(t, 5, stmt, 0.001)

	short := openTestDB(t, dbLimits{idleTx: 2 * time.Second, lockWait: 2 * time.Second, stmt: 300 * time.Millisecond})
	start := time.Now()
	var slept int
	err := short.QueryRow(`SELECT SLEEP(3)`).Scan(&slept)
	took := time.Since(start)
	require.Less(t, took, 2*time.Second, "the statement was ended at its limit")
	// MariaDB fails the statement; MySQL ends SLEEP early and returns 1.
	require.True(t, err != nil || slept == 1, "err %v, SLEEP returned %d", err, slept)
}
