package sqljudge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/kece-oj/kece/engine"
)

// killTimeout bounds one KILL sent by the watchdog.
const killTimeout = 5 * time.Second

// studentSession is the one connection of a lease's temporary account.
type studentSession struct {
	e        *Executor
	db       *sql.DB
	conn     *sql.Conn
	threadID int64
	limit    time.Duration
}

// openStudent connects as the temporary account, with one connection,
// without multi-statements or LOCAL INFILE, and sets the server-side statement
// limit (limit 0: none, for the self-check probe).
func (l *lease) openStudent(ctx context.Context, limit time.Duration) (*studentSession, error) {
	mc := l.e.adminCfg.Clone()
	mc.User, mc.Passwd, mc.DBName = l.names.User, l.password, l.names.DB
	mc.MultiStatements = false
	mc.AllowAllFiles = false
	mc.InterpolateParams = false
	// An I/O timeout shorter than the statement limit would turn a slow
	// statement into a broken connection; the limit, the watchdog and the
	// lease context bound the session instead.
	mc.ReadTimeout, mc.WriteTimeout = 0, 0
	connector, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, engine.Infra(engine.InfraConfig, errors.New("sqljudge: student DSN refused by the driver"))
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, classifyAdmin(ctx, err, "connect as the temporary account")
	}
	s := &studentSession{e: l.e, db: db, conn: conn, limit: limit}
	l.student = s
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&s.threadID); err != nil {
		return nil, classifyAdmin(ctx, err, "read the temporary session id")
	}
	if limit > 0 {
		q := fmt.Sprintf("SET SESSION max_statement_time = %.6f", limit.Seconds())
		if l.srv.Flavour == FlavourMySQL {
			ms := limit.Milliseconds()
			if ms < 1 {
				ms = 1
			}
			q = fmt.Sprintf("SET SESSION max_execution_time = %d", ms)
		}
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return nil, classifyAdmin(ctx, err, "set the statement time limit")
		}
	}
	return s, nil
}

func (s *studentSession) close() {
	s.conn.Close()
	s.db.Close()
}

// stmtOutcome is the result of one student statement: a user outcome
// (status set), a result set, or an infrastructure error.
type stmtOutcome struct {
	status  engine.Status
	message string
	result  *engine.ResultSet
	elapsed time.Duration
	err     error
}

// run executes one student statement under a watchdog. The server's own
// limit normally stops it first; the watchdog's KILL QUERY at limit+grace
// covers MySQL's non-SELECT statements and a student who reset the session
// variable. Cancellation of ctx (lease lost) kills the statement too.
func (s *studentSession) run(ctx context.Context, stmt string, maxRows, maxBytes int64, sc scrubber) stmtOutcome {
	var timedOut atomic.Bool
	done, wdDone := make(chan struct{}), make(chan struct{})
	killNow := func() {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
		defer cancel()
		if err := s.e.kill(kctx, "QUERY", s.threadID); err != nil {
			s.e.log.Warn("sql judge: kill query failed", "node_id", s.e.cfg.NodeID, "err", err)
		}
	}
	go func() {
		defer close(wdDone)
		t := time.NewTimer(s.limit + s.e.cfg.KillGrace)
		defer t.Stop()
		select {
		case <-t.C:
			timedOut.Store(true)
			killNow()
		case <-ctx.Done():
			killNow()
		case <-done:
		}
	}()
	start := time.Now()
	rs, capped, err := readResults(ctx, s.conn, stmt, maxRows, maxBytes, killNow)
	elapsed := time.Since(start)
	close(done)
	<-wdDone

	out := stmtOutcome{elapsed: elapsed}
	switch {
	case ctx.Err() != nil:
		out.err = engine.Infra(engine.InfraCancelled, fmt.Errorf("student statement: %w", ctx.Err()))
	case timedOut.Load() || elapsed >= s.limit:
		// Past the limit is TLE even without an error: an interrupted
		// BENCHMARK() or SLEEP() returns normally on MariaDB.
		out.status, out.message = engine.StatusTimeLimitExceeded, fmt.Sprintf("statement exceeded the time limit of %s", s.limit)
	case capped:
		out.status, out.message = engine.StatusOutputLimitExceeded, fmt.Sprintf("result exceeds the limit of %d rows or %d bytes", maxRows, maxBytes)
	case err == nil:
		out.result = rs
	default:
		no, isSQL := mysqlErrNo(err)
		switch {
		case isSQL && (no == erStatementTimeout || no == erQueryTimeout):
			out.status, out.message = engine.StatusTimeLimitExceeded, fmt.Sprintf("statement exceeded the time limit of %s", s.limit)
		case isSQL && (no == erServerShutdown || no == erDiskFull):
			out.err = classifyAdmin(ctx, err, "student statement")
		case isSQL:
			out.status, out.message = engine.StatusRuntimeError, sc.studentError(err)
		default:
			// Not a server error: the connection broke. If the server is fine
			// the statement broke it (e.g. KILL CONNECTION_ID()); that is the
			// student's RE, not a reason to retry the job.
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
			perr := s.e.db.PingContext(pctx)
			cancel()
			if perr != nil {
				out.err = classifyAdmin(ctx, perr, "judge server after a broken student connection")
			} else {
				out.status, out.message = engine.StatusRuntimeError, sc.studentError(err)
			}
		}
	}
	return out
}

// queryer is a connection results can be read from (student or admin).
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// readResults runs query and returns its last result set that has columns,
// reading at most maxRows rows and maxBytes bytes of values per result set.
// Past a cap it calls onCap (which kills the statement, so closing the rows
// does not drain a huge result) and reports capped.
func readResults(ctx context.Context, q queryer, query string, maxRows, maxBytes int64, onCap func()) (*engine.ResultSet, bool, error) {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var last *engine.ResultSet
	for {
		cols, err := rows.Columns()
		if err != nil {
			return nil, false, err
		}
		if len(cols) > 0 {
			rs, capped, err := readSet(rows, cols, maxRows, maxBytes)
			if capped {
				if onCap != nil {
					onCap()
				}
				return nil, true, nil
			}
			if err != nil {
				return nil, false, err
			}
			last = rs
		}
		if !rows.NextResultSet() {
			break
		}
	}
	return last, false, rows.Err()
}

func readSet(rows *sql.Rows, cols []string, maxRows, maxBytes int64) (*engine.ResultSet, bool, error) {
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, false, err
	}
	rs := &engine.ResultSet{Columns: cols, Types: make([]string, len(cts))}
	for i, ct := range cts {
		rs.Types[i] = ct.DatabaseTypeName()
	}
	vals := make([]sql.NullString, len(cols))
	dest := make([]any, len(cols))
	for i := range vals {
		dest[i] = &vals[i]
	}
	var n, size int64
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, false, err
		}
		n++
		row := make([]*string, len(cols))
		for i, v := range vals {
			if v.Valid {
				s := v.String
				row[i] = &s
				size += int64(len(s))
			}
		}
		if n > maxRows || size > maxBytes {
			return nil, true, nil
		}
		rs.Rows = append(rs.Rows, row)
	}
	return rs, false, rows.Err()
}
