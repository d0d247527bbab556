package jobdb

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// InTx runs fn in a transaction, retrying the whole transaction on deadlock
// (1213) and lock-wait timeout (1205) with jittered backoff.
func (s *Core) InTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.Retried(ctx, func() error { return s.TryTx(ctx, fn) })
}

// Retried runs one try of a transaction until it commits, fails for a
// reason other than a deadlock (1213) or a lock-wait timeout (1205), or
// TxRetries tries have conflicted, with jittered exponential backoff between
// tries; the error is classified (Classify).
func (s *Core) Retried(ctx context.Context, try func() error) error {
	var err error
	for attempt := 0; attempt < s.Cfg.TxRetries; attempt++ {
		err = try()
		if err == nil || !Retryable(err) {
			return Classify(err)
		}
		s.Stats.Retries.Add(1)
		s.Observer().TxRetried(ctx, txRetryCode(err))
		d := time.Duration(1+rand.IntN(5<<attempt)) * time.Millisecond
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
	return Classify(fmt.Errorf("store: transaction still conflicting after %d tries: %w", s.Cfg.TxRetries, err))
}

// txTryTimeout bounds one try of a transaction on the replica's side: a
// try still open after it (the replica was starved or paused, a statement
// hung) is rolled back by database/sql and its connection discarded, so its
// locks go even if the server's own bounds (idle_transaction_timeout or
// wait_timeout, innodb_lock_wait_timeout, the statement time limit; see
// kece-control's openDB) did not apply. A healthy try takes milliseconds.
const txTryTimeout = 10 * time.Second

// errTxTooLong is the cause of a try that txTryTimeout ended.
var errTxTooLong = errors.New("store: transaction open longer than its bound; rolled back")

// TryTx is one try of InTx, bounded by TxTimeout (txTryTimeout unless set).
func (s *Core) TryTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tctx, cancel := context.WithTimeoutCause(ctx, cmp.Or(s.TxTimeout, txTryTimeout), errTxTooLong)
	defer cancel()
	// READ COMMITTED on every transaction (set per transaction unless it is
	// the server's default): counts taken after a lock must see the latest
	// commits, not a snapshot taken before the lock was granted.
	tx, err := s.Pool.BeginTx(tctx, s.TxOpts)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return endedByContext(ctx, tctx, err)
	}
	if err := tx.Commit(); err != nil {
		return endedByContext(ctx, tctx, fmt.Errorf("store: commit: %w", err))
	}
	return nil
}

// endedByContext names the cause of an sql.ErrTxDone that database/sql
// returns after it rolled a transaction back because its context ended:
// nothing was committed, and callers must see a cancellation
// (context.Canceled or DeadlineExceeded) when ctx ended, or errTxTooLong
// when the try's own bound (tctx) did.
func endedByContext(ctx, tctx context.Context, err error) error {
	switch {
	case !errors.Is(err, sql.ErrTxDone):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %w", ctx.Err(), err)
	case tctx.Err() != nil:
		return fmt.Errorf("%w: %w", context.Cause(tctx), err)
	}
	return err
}

// Retryable says whether err is a deadlock (1213) or a lock-wait timeout
// (1205): the transaction may be tried again.
func Retryable(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213 || me.Number == 1205
	}
	return false
}

// IsDuplicate says whether err is a duplicate key (1062).
func IsDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

// Micros renders a duration for INTERVAL … MICROSECOND.
func Micros(d time.Duration) int64 { return d.Microseconds() }

// RowScanner is what a row scan needs (*sql.Row and *sql.Rows both fit).
type RowScanner interface{ Scan(dest ...any) error }

// Querier runs a query on the pool or inside a transaction.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// QueryAll runs query and scans every row with scan.
func QueryAll[T any](ctx context.Context, q Querier, scan func(RowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// ScanID scans a single BIGINT column.
func ScanID(r RowScanner) (int64, error) {
	var id int64
	err := r.Scan(&id)
	return id, err
}

// IDs lists the ids of xs, id telling each one's.
func IDs[T any](xs []T, id func(T) int64) []int64 {
	ids := make([]int64, len(xs))
	for i, x := range xs {
		ids[i] = id(x)
	}
	return ids
}

// Txx lends sqlx's struct scanning (Get, Select, named statements) to a
// transaction begun by inTx. inTx keeps handing out *sql.Tx so the hot paths
// that scan by hand are untouched.
func (s *Core) Txx(tx *sql.Tx) *sqlx.Tx { return &sqlx.Tx{Tx: tx, Mapper: s.Pool.Mapper} }

// NilIfEmpty turns a JSON column read as COALESCE(col, ”) back into "no
// value": a nil RawMessage is omitted or null when marshalled, an empty one
// is invalid JSON. (database/sql cannot scan NULL into a RawMessage.)
func NilIfEmpty(m json.RawMessage) json.RawMessage {
	if len(m) == 0 {
		return nil
	}
	return m
}

// NotIn renders " AND id NOT IN (?, …)" and its arguments, or nothing when
// ids is empty (an empty list is not SQL).
func NotIn(ids []int64) (string, []any) {
	if len(ids) == 0 {
		return "", nil
	}
	in, args := InList(ids)
	return ` AND id NOT IN (` + in + `)`, args
}

// InList renders "?, ?, …" and its arguments.
func InList(ids []int64) (string, []any) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", "), args
}
