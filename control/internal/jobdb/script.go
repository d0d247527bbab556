package jobdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
)

// A script is statements sent to the server together. On a connection that
// allows several statements per request (the DSN's multiStatements=true, as
// kece-control, the tests and the benchmarks open it) a script is one round
// trip, however many statements it holds; elsewhere its statements go one
// by one, in the same order, on the same connection, with the same effect.
//
// The hot path sends every statement that does not need the answer of the
// one before it in one script. Fewer round trips shorten each call but have
// not moved throughput, which follows server CPU per lifecycle (the figures:
// docs/scheduling.md, the table of what moved throughput).
//
// Arguments are interpolated by the driver (interpolateParams=true), so no
// statement is prepared; statements must not contain a ';' of their own.
type Script struct {
	text  strings.Builder
	args  []any
	query []bool // per statement: whether it returns rows
}

// Exec adds a statement that returns no rows.
func (sc *Script) Exec(q string, args ...any) *Script { return sc.add(false, q, args) }

// Rows adds a statement whose rows go to the next read func of send.
func (sc *Script) Rows(q string, args ...any) *Script { return sc.add(true, q, args) }

func (sc *Script) add(query bool, q string, args []any) *Script {
	if len(sc.query) > 0 {
		sc.text.WriteString(";\n")
	}
	sc.text.WriteString(q)
	sc.args = append(sc.args, args...)
	sc.query = append(sc.query, query)
	return sc
}

// statements returns each statement with its own arguments, for the
// one-by-one path.
func (sc *Script) statements() (qs []string, args [][]any) {
	qs = strings.Split(sc.text.String(), ";\n")
	rest := sc.args
	for _, q := range qs {
		n := strings.Count(q, "?")
		args = append(args, rest[:n])
		rest = rest[n:]
	}
	return qs, args
}

// ScriptConn is one pooled connection running a transaction made of
// scripts (the first starts it with begin, the last ends with COMMIT).
type ScriptConn struct {
	Conn               *sql.Conn
	multi, multiCounts bool
	// open: a script began a transaction that no script has committed.
	open bool
}

// Begin starts sc with the transaction's opening (READ COMMITTED when the
// server's default is not).
func (s *Core) Begin(sc *Script) *Script {
	if s.TxOpts != nil {
		sc.Exec(`SET TRANSACTION ISOLATION LEVEL READ COMMITTED`)
	}
	return sc.Exec(`START TRANSACTION`)
}

// Send runs sc and gives the rows of its row statements, in order, to
// reads (one func per row statement, called once per row). An error stops
// the script where it happened, as the server does.
func (c *ScriptConn) Send(ctx context.Context, sc *Script, reads ...func(RowScanner) error) error {
	qs := 0
	for _, q := range sc.query {
		if q {
			qs++
		}
	}
	if qs != len(reads) {
		return fmt.Errorf("store: script has %d row statements and %d readers", qs, len(reads))
	}
	return c.tracked(sc, func() error {
		if c.multi {
			return c.sendMulti(ctx, sc, reads)
		}
		return c.sendEach(ctx, sc, reads)
	})
}

// tracked runs sc by run, keeping c.open: a script that begins a
// transaction opens it, one that ends with COMMIT and succeeds closes it.
func (c *ScriptConn) tracked(sc *Script, run func() error) error {
	if strings.Contains(sc.text.String(), "START TRANSACTION") {
		c.open = true
	}
	err := run()
	if err == nil && strings.HasSuffix(sc.text.String(), "COMMIT") {
		c.open = false
	}
	return err
}

func (c *ScriptConn) sendMulti(ctx context.Context, sc *Script, reads []func(RowScanner) error) error {
	if len(reads) == 0 {
		_, err := c.Conn.ExecContext(ctx, sc.text.String(), sc.args...)
		return err
	}
	rows, err := c.Conn.QueryContext(ctx, sc.text.String(), sc.args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for i, read := range reads {
		// Statements without rows answer with empty result sets: skip them.
		for {
			cols, err := rows.Columns()
			if err != nil {
				return err
			}
			if len(cols) > 0 {
				break
			}
			if !rows.NextResultSet() {
				return errors.Join(rows.Err(), fmt.Errorf("store: script: result set %d missing", i))
			}
		}
		for rows.Next() {
			if err := read(rows); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if i < len(reads)-1 && !rows.NextResultSet() {
			return errors.Join(rows.Err(), fmt.Errorf("store: script: result set %d missing", i+1))
		}
	}
	// The statements after the last row statement (COMMIT …) answer here.
	for rows.NextResultSet() {
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}

func (c *ScriptConn) sendEach(ctx context.Context, sc *Script, reads []func(RowScanner) error) error {
	qs, args := sc.statements()
	for i, q := range qs {
		if !sc.query[i] {
			if _, err := c.Conn.ExecContext(ctx, q, args[i]...); err != nil {
				return err
			}
			continue
		}
		read := reads[0]
		reads = reads[1:]
		rows, err := c.Conn.QueryContext(ctx, q, args[i]...)
		if err != nil {
			return err
		}
		for rows.Next() {
			if err := read(rows); err != nil {
				rows.Close()
				return err
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
	}
	return nil
}

// Counts runs sc, a script of statements that return no rows, and returns
// how many rows each statement changed (one entry per statement, BEGIN and
// COMMIT included): the fences of a transaction step read in the same round
// trip as its writes.
func (c *ScriptConn) Counts(ctx context.Context, sc *Script) ([]int64, error) {
	for _, q := range sc.query {
		if q {
			return nil, errors.New("store: counts: the script has a row statement")
		}
	}
	var out []int64
	err := c.tracked(sc, func() error {
		if c.multiCounts {
			var err error
			out, err = c.countsMulti(ctx, sc)
			return err
		}
		qs, args := sc.statements()
		for i, q := range qs {
			r, err := c.Conn.ExecContext(ctx, q, args[i]...)
			if err != nil {
				return err
			}
			n, err := r.RowsAffected()
			if err != nil {
				return err
			}
			out = append(out, n)
		}
		return nil
	})
	return out, err
}

// countsMulti sends sc in one request through the driver itself, whose
// result keeps every statement's row count (database/sql's keeps the last).
func (c *ScriptConn) countsMulti(ctx context.Context, sc *Script) ([]int64, error) {
	var out []int64
	err := c.Conn.Raw(func(dc any) error {
		ex, ok := dc.(driver.ExecerContext)
		if !ok {
			return errors.New("store: counts: the driver connection cannot exec")
		}
		args := make([]driver.NamedValue, len(sc.args))
		for i, a := range sc.args {
			args[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
			if ch, ok := dc.(driver.NamedValueChecker); ok {
				if err := ch.CheckNamedValue(&args[i]); err != nil {
					return err
				}
				continue
			}
			v, err := driver.DefaultParameterConverter.ConvertValue(a)
			if err != nil {
				return err
			}
			args[i].Value = v
		}
		r, err := ex.ExecContext(ctx, sc.text.String(), args)
		if err != nil {
			return err
		}
		all, ok := r.(interface{ AllRowsAffected() []int64 })
		if !ok {
			return errors.New("store: counts: the driver does not report each statement's rows")
		}
		out = all.AllRowsAffected()
		return nil
	})
	if err == nil && len(out) != len(sc.query) {
		err = fmt.Errorf("store: counts: %d statements, %d row counts", len(sc.query), len(out))
	}
	return out, err
}

// InScripts runs fn on one connection of the pool: a transaction of
// scripts, retried on deadlock and lock-wait timeout like inTx. A
// transaction fn leaves open (an error mid-script) is rolled back; a
// connection whose rollback fails is closed, never handed to the next
// caller in the middle of a transaction.
func (s *Core) InScripts(ctx context.Context, fn func(c *ScriptConn) error) error {
	return s.Retried(ctx, func() error { return s.TryScripts(ctx, fn) })
}

// TryScripts is one try of InScripts.
func (s *Core) TryScripts(ctx context.Context, fn func(c *ScriptConn) error) error {
	conn, err := s.Pool.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: connection: %w", err)
	}
	c := &ScriptConn{Conn: conn, multi: s.Multi, multiCounts: s.MultiCounts}
	err = fn(c)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		// The caller gave up mid-transaction. The driver closes a
		// connection whose context ends during a statement, and may do so
		// just after the statement answered: the next one then fails with
		// a bad connection, whose cause is the cancellation.
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	if c.open {
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`); rerr != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}
	_ = conn.Close()
	return err
}

// multiRowCounts reports whether one request of several statements on db
// answers each statement's row count (go-sql-driver/mysql's Result does; a
// wrapped driver may not), so counts can send a script at once.
func multiRowCounts(ctx context.Context, db *sql.DB) bool {
	conn, err := db.Conn(ctx)
	if err != nil {
		return false
	}
	defer conn.Close()
	c := &ScriptConn{Conn: conn, multi: true, multiCounts: true}
	n, err := c.countsMulti(ctx, (&Script{}).Exec(`DO ?`, 1).Exec(`DO ?`, 2))
	return err == nil && len(n) == 2
}

// multiStatements reports whether db's connections take several statements
// per request with arguments (which needs interpolateParams too: a
// prepared statement holds one statement).
func multiStatements(ctx context.Context, db *sql.DB) bool {
	rows, err := db.QueryContext(ctx, `SELECT ?; SELECT ?`, 1, 2)
	if err != nil {
		return false
	}
	for rows.NextResultSet() {
	}
	return rows.Close() == nil && rows.Err() == nil
}
