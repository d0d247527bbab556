package jobdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/dbtest"
)

// A script does the same on a multi-statement connection (one round trip)
// and on one that takes a statement per request (one by one): rows reach
// their readers in order, a failing statement stops the script and its
// transaction is rolled back, and the connection goes back to the pool
// outside any transaction.
func TestScriptsAreTheSameOneByOne(t *testing.T) {
	t.Parallel()
	db, dsn := dbtest.Open(t)
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	cfg.MultiStatements = false
	single := dbtest.OpenDSN(t, cfg.FormatDSN())
	_, err = db.ExecContext(t.Context(), `CREATE TABLE script_t (k VARCHAR(8) PRIMARY KEY, v INT NOT NULL)`)
	require.NoError(t, err)

	multi, err := NewCore(db, Config{})
	require.NoError(t, err)
	each, err := NewCore(single, Config{})
	require.NoError(t, err)
	require.True(t, multi.Multi, "dbtest opens the pool as kece-control does: multiStatements=true")
	require.False(t, each.Multi)
	require.True(t, multi.MultiCounts, "go-sql-driver/mysql reports each statement's row count")
	require.False(t, each.MultiCounts)

	for _, s := range []*Core{multi, each} {
		p := "m"
		if !s.Multi {
			p = "e"
		}
		var n int
		var keys []string
		sc := s.Begin(&Script{}).
			Exec(`INSERT INTO script_t (k, v) VALUES (?, 1), (?, 2)`, p+"1", p+"2").
			Rows(`SELECT ROW_COUNT()`).
			Exec(`UPDATE script_t SET v = v + 10 WHERE k = ?`, p+"1").
			Rows(`SELECT k FROM script_t WHERE k LIKE ? ORDER BY k`, p+"%").
			Exec(`COMMIT`)
		err := s.InScripts(t.Context(), func(c *ScriptConn) error {
			return c.Send(t.Context(), sc,
				func(r RowScanner) error { return r.Scan(&n) },
				func(r RowScanner) error {
					var k string
					keys = append(keys, k)
					return r.Scan(&keys[len(keys)-1])
				})
		})
		require.NoError(t, err, p)
		require.Equal(t, 2, n, p)
		require.Equal(t, []string{p + "1", p + "2"}, keys, p)

		// counts gives each statement's changed rows, BEGIN's included; an
		// error inside it leaves the transaction to inScripts' rollback.
		var got []int64
		err = s.InScripts(t.Context(), func(c *ScriptConn) error {
			var err error
			got, err = c.Counts(t.Context(), s.Begin(&Script{}).
				Exec(`UPDATE script_t SET v = v + 1 WHERE k LIKE ?`, p+"%").
				Exec(`UPDATE script_t SET v = v + 1 WHERE k = ?`, p+"2").
				Exec(`UPDATE script_t SET v = v WHERE k = ?`, p+"1"))
			if err != nil {
				return err
			}
			_, err = c.Counts(t.Context(), (&Script{}).Exec(`ROLLBACK`))
			return err
		})
		require.NoError(t, err, p)
		begins := len(got) - 3
		require.Equal(t, []int64{2, 1, 0}, got[begins:], "%s: rows changed per statement (an unchanged row is not counted)", p)
		require.NoError(t, s.Pool.QueryRowContext(t.Context(), `SELECT v FROM script_t WHERE k = ?`, p+"2").Scan(&n))
		require.Equal(t, 2, n, "%s: rolled back", p)
		err = s.InScripts(t.Context(), func(c *ScriptConn) error {
			_, err := c.Counts(t.Context(), s.Begin(&Script{}).
				Exec(`UPDATE script_t SET v = 7 WHERE k = ?`, p+"2").
				Exec(`INSERT INTO script_t (k, v) VALUES (?, 5)`, p+"1"))
			return err
		})
		require.ErrorAs(t, err, new(*mysql.MySQLError), p)
		require.NoError(t, s.Pool.QueryRowContext(t.Context(), `SELECT v FROM script_t WHERE k = ?`, p+"2").Scan(&n))
		require.Equal(t, 2, n, "%s: a failed counts script is rolled back", p)

		// The second INSERT fails (duplicate key): nothing of the script
		// stays, and the next user of the pool is not inside a transaction.
		sc = s.Begin(&Script{}).
			Exec(`INSERT INTO script_t (k, v) VALUES (?, 3)`, p+"3").
			Exec(`INSERT INTO script_t (k, v) VALUES (?, 4)`, p+"1").
			Exec(`COMMIT`)
		err = s.InScripts(t.Context(), func(c *ScriptConn) error { return c.Send(t.Context(), sc) })
		var me *mysql.MySQLError
		require.ErrorAs(t, err, &me, p)
		require.EqualValues(t, 1062, me.Number, p)
		var rows int
		require.NoError(t, s.Pool.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM script_t WHERE k = ?`, p+"3").Scan(&rows))
		require.Zero(t, rows, "%s: the failed script's first insert was rolled back", p)
		for range 4 { // every pooled connection is clean
			require.NoError(t, outsideTransaction(t, s.Pool.DB), p)
		}
	}
}

// A script whose caller gives up reports the cancellation, also when the
// driver answers the next statement with a bad connection (it closes a
// connection whose context ends during a statement, possibly just after
// the statement answered).
func TestScriptsReportTheCallersCancellation(t *testing.T) {
	t.Parallel()
	s, db := openCore(t)
	ctx, cancel := context.WithCancel(t.Context())
	err := s.TryScripts(ctx, func(c *ScriptConn) error {
		if err := c.Send(ctx, s.Begin(&Script{})); err != nil {
			return err
		}
		cancel()
		return driver.ErrBadConn
	})
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, driver.ErrBadConn, "the driver's error is kept")
	require.NoError(t, outsideTransaction(t, db))
}

// outsideTransaction fails (1568) when the pooled connection it gets is
// inside a transaction: transaction characteristics can only be set between
// transactions, on MariaDB and MySQL alike. (information_schema.innodb_trx
// would need no write, but it is a cache InnoDB refreshes only after 100 ms
// without reads, so other tests' reads keep it stale.)
func outsideTransaction(t *testing.T, db *sql.DB) error {
	_, err := db.ExecContext(t.Context(), `SET TRANSACTION READ WRITE`)
	return err
}
