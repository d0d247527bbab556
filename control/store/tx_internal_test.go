package store

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
	s, _ := openStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	err := s.inTx(ctx, func(tx *sql.Tx) error {
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

// openStore is a store with the default config on a fresh test database,
// and that database.
func openStore(t *testing.T) (*Store, *sql.DB) {
	t.Helper()
	db, _ := dbtest.Open(t)
	s, err := New(db, Config{})
	require.NoError(t, err)
	return s, db
}
