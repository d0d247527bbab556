package jobdb

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/dbtest"
)

// A transaction whose context ends before COMMIT is rolled back by
// database/sql, and COMMIT then fails with sql.ErrTxDone; the store reports
// the cancellation, so callers (and the HTTP layer) do not take it for a
// database fault.
func TestTransactionEndedByItsContextIsACancellation(t *testing.T) {
	t.Parallel()
	s, _ := openCore(t)
	ctx, cancel := context.WithCancel(t.Context())
	err := s.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT 1`); err != nil {
			return err
		}
		cancel()
		// database/sql rolls back in its own goroutine once ctx is done.
		require.Eventually(t, func() bool {
			_, err := tx.ExecContext(context.Background(), `SELECT 1`)
			return errors.Is(err, sql.ErrTxDone)
		}, 5*time.Second, time.Millisecond)
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, Classify(err), ErrDatabase)
}

// openCore is a handle with the default config on a fresh test database,
// and that database.
func openCore(t *testing.T) (*Core, *sql.DB) {
	t.Helper()
	db, _ := dbtest.Open(t)
	s, err := NewCore(db, Config{})
	require.NoError(t, err)
	return s, db
}

// A try that stays open past its bound (the replica starved or stuck
// between statements) is rolled back on the replica's side: its row lock
// goes, another transaction takes it, and the caller sees errTxTooLong, not
// a commit.
func TestTransactionOpenTooLongIsRolledBack(t *testing.T) {
	t.Parallel()
	s, db := openCore(t)
	s.TxTimeout = 300 * time.Millisecond
	ctx := t.Context()
	_, err := db.ExecContext(ctx, `CREATE TABLE held (id INT PRIMARY KEY, v INT) ENGINE=InnoDB`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO held VALUES (1, 0)`)
	require.NoError(t, err)
	locked, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.TryTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `UPDATE held SET v = 1 WHERE id = 1`); err != nil {
				return err
			}
			close(locked)
			<-release // stuck until the other transaction has the lock
			return nil
		})
	}()
	<-locked
	start := time.Now()
	other, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	var v int
	require.NoError(t, other.QueryRowContext(ctx, `SELECT v FROM held WHERE id = 1 FOR UPDATE`).Scan(&v))
	took := time.Since(start)
	require.NoError(t, other.Rollback())
	close(release)
	require.Zero(t, v, "the stuck try's update was rolled back")
	require.Less(t, took, 5*time.Second, "the lock went at the try's bound, not at a server timeout")
	require.ErrorIs(t, <-done, errTxTooLong)
}

// An aggregate on TxHandle (webhook groups) retries a transaction that
// met a lock-wait timeout, as the store's own transactions do: the first
// try waits on a row another session holds and fails with 1205; once that
// session commits, the second try goes through.
func TestTxHandleRetriesALockWaitTimeout(t *testing.T) {
	t.Parallel()
	_, db := openCore(t)
	ctx := t.Context()
	_, err := db.ExecContext(ctx, `CREATE TABLE tx_handle_probe (id INT PRIMARY KEY, v INT NOT NULL)`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO tx_handle_probe VALUES (1, 0)`)
	require.NoError(t, err)
	holder, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = holder.ExecContext(ctx, `UPDATE tx_handle_probe SET v = 1 WHERE id = 1`)
	require.NoError(t, err)

	h := TxHandle(db)
	tries := 0
	err = h.InTx(ctx, func(tx *sql.Tx) error {
		tries++
		if tries == 2 {
			require.NoError(t, holder.Commit())
		}
		if _, err := tx.ExecContext(ctx, `SET SESSION innodb_lock_wait_timeout = 1`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE tx_handle_probe SET v = v + 10 WHERE id = 1`)
		return err
	})
	require.NoError(t, err)
	require.Equal(t, 2, tries, "one try timed out on the held row, the next committed")
	require.EqualValues(t, 1, h.Stats.Retries.Load())
	var v int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT v FROM tx_handle_probe WHERE id = 1`).Scan(&v))
	require.Equal(t, 11, v)
}
