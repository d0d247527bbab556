package main

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"
	"sync/atomic"
)

// roundTrips counts the requests this process sent (a store script is one
// request however many statements it holds).
var roundTrips atomic.Int64

// countingConnector counts the statements this process sends (every query,
// exec, BEGIN, COMMIT and ROLLBACK), so statements per lifecycle are the
// bench's own and not the shared server's global counter, which other
// clients of the same server inflate.
type countingConnector struct {
	driver.Connector
	n *atomic.Int64
}

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, n: c.n}, nil
}

type countingConn struct {
	driver.Conn
	n *atomic.Int64
}

// counted adds the statements of q (a store script sends several in one
// request, separated by ";\n") unless the driver declined the call (ErrSkip:
// database/sql then prepares and executes, which is counted there), and
// one round trip.
func (c *countingConn) counted(q string, err error) {
	if !errors.Is(err, driver.ErrSkip) {
		c.n.Add(int64(strings.Count(q, ";\n") + 1))
		roundTrips.Add(1)
	}
}

func (c *countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
	c.counted(q, err)
	return r, err
}

func (c *countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
	c.counted(q, err)
	return r, err
}

func (c *countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	s, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
	c.n.Add(1)
	roundTrips.Add(1)
	if err != nil {
		return nil, err
	}
	return countingStmt{Stmt: s, n: c.n}, nil
}

func (c *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	c.n.Add(1)
	roundTrips.Add(1)
	if opts.Isolation != 0 {
		c.n.Add(1) // SET TRANSACTION ISOLATION LEVEL before START TRANSACTION
		roundTrips.Add(1)
	}
	if err != nil {
		return nil, err
	}
	return countingTx{Tx: tx, n: c.n}, nil
}

func (c *countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (c *countingConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *countingConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

type countingTx struct {
	driver.Tx
	n *atomic.Int64
}

func (t countingTx) Commit() error   { t.n.Add(1); roundTrips.Add(1); return t.Tx.Commit() }
func (t countingTx) Rollback() error { t.n.Add(1); roundTrips.Add(1); return t.Tx.Rollback() }

type countingStmt struct {
	driver.Stmt
	n *atomic.Int64
}

func (s countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.n.Add(1)
	roundTrips.Add(1)
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.n.Add(1)
	roundTrips.Add(1)
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}
