package main

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/kece-oj/kece/cmd/internal/settings"
)

// dbFlags registers the control database settings every subcommand shares:
// --mysql-dsn (KECE_MYSQL_DSN) or --mysql-dsn-file (KECE_MYSQL_DSN_FILE).
func dbFlags(fs *settings.FlagSet) *string {
	return fs.Secret("mysql-dsn", "KECE_MYSQL_DSN", "KECE_MYSQL_DSN_FILE", "control database DSN (user:password@tcp(host:port)/database)")
}

// Database session bounds, applied unless the DSN sets the same parameter.
// The client-side ones keep a replica from waiting forever on a database
// that stopped answering; the server-side ones keep a replica that stopped
// (frozen, paused, partitioned) in the middle of a transaction from holding
// its row locks — a host group's, a node's — for longer than idleTx: the
// server ends such a transaction (MariaDB: idle_transaction_timeout; MySQL 8,
// which lacks it: wait_timeout, which also closes idle pooled connections,
// so the pool retires them sooner), and a transaction waiting on a lock gives
// up after lockWait (innodb_lock_wait_timeout, both) and is retried by the
// store. Nothing in KECE keeps a transaction open while it waits for
// anything but the database, so the bounds never cut healthy work.
//
// A serving replica (kece-control serve) gets tight bounds: its transactions
// are the hot path, short by design, and a frozen replica must not stall the
// fleet's claims behind its locks for longer than about two seconds; its
// statements are also limited in time (MariaDB max_statement_time, MySQL 8
// max_execution_time, which covers SELECTs only). The figures a healthy
// replica under load needs, and how these were chosen, are in
// docs/operations.md ("Database session bounds"). Offline commands
// (migrate, reconcile, token) keep the looser ones: a migration may wait
// behind a serving replica's locks, and a reconcile reads whole tables.
const (
	dbDialTimeoutDefault = 5 * time.Second
	dbIOTimeoutDefault   = 30 * time.Second
	dbIdleTxDefault      = 10 * time.Second
	dbLockWaitDefault    = 10 * time.Second

	dbServeIdleTxDefault    = 2 * time.Second
	dbServeLockWaitDefault  = 2 * time.Second
	dbServeStatementDefault = 5 * time.Second
)

// dbLimits are the server-side bounds (tests shorten them). stmt 0: no
// statement time limit.
type dbLimits struct {
	idleTx, lockWait, stmt time.Duration
}

// serveLimits are the bounds of a serving replica's sessions.
var serveLimits = dbLimits{idleTx: dbServeIdleTxDefault, lockWait: dbServeLockWaitDefault, stmt: dbServeStatementDefault}

// openDB opens the control database with the session settings the store
// relies on (UTC clock, parsed times) and the bounds above, and checks it
// answers. A missing or malformed DSN is a settings error naming where it
// came from.
func openDB(ctx context.Context, fs *settings.FlagSet, dsn string, maxConns int) (*sql.DB, error) {
	return openDBWith(ctx, fs, dsn, maxConns, dbLimits{idleTx: dbIdleTxDefault, lockWait: dbLockWaitDefault})
}

func openDBWith(ctx context.Context, fs *settings.FlagSet, dsn string, maxConns int, lim dbLimits) (*sql.DB, error) {
	src := fs.Source("mysql-dsn")
	if fs.Lookup("mysql-dsn-file").Value.String() != "" {
		src = fs.Source("mysql-dsn-file")
	}
	if dsn == "" {
		return nil, settings.Errorf("KECE_MYSQL_DSN", "no database: set KECE_MYSQL_DSN_FILE (a file holding the DSN), KECE_MYSQL_DSN or --mysql-dsn (e.g. kece:secret@tcp(127.0.0.1:3306)/kece)")
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		// The driver's messages are fixed texts; they never quote the DSN.
		return nil, settings.Errorf(src, "the DSN does not parse (%v); expected user:password@tcp(host:port)/database", err)
	}
	if cfg.DBName == "" {
		return nil, settings.Errorf(src, "the DSN names no database: add /<database> after the address")
	}
	cfg.ParseTime, cfg.Loc = true, time.UTC
	// Client-side interpolation (escaped by the driver) saves a prepare
	// round trip per statement; the schema is utf8mb4 throughout.
	cfg.InterpolateParams = true
	// Several statements per request: the store sends each step of a hot
	// transaction as one script, one round trip (control/internal/jobdb/script.go).
	// Every value is still an argument the driver escapes, never SQL text.
	cfg.MultiStatements = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	cfg.Timeout = cmp.Or(cfg.Timeout, dbDialTimeoutDefault)
	cfg.ReadTimeout = cmp.Or(cfg.ReadTimeout, dbIOTimeoutDefault)
	cfg.WriteTimeout = cmp.Or(cfg.WriteTimeout, dbIOTimeoutDefault)
	// Which server decides which idle-transaction bound exists; ask first.
	mariadb, err := isMariaDB(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database %s@%s unreachable: %w", cfg.DBName, cfg.Addr, err)
	}
	setDefault := func(k string, d time.Duration) {
		if _, ok := cfg.Params[k]; !ok {
			cfg.Params[k] = strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second)))
		}
	}
	setDefault("innodb_lock_wait_timeout", lim.lockWait)
	if mariadb {
		setDefault("idle_transaction_timeout", lim.idleTx)
	} else {
		setDefault("wait_timeout", lim.idleTx)
	}
	if _, set := cfg.Params["max_statement_time"]; lim.stmt > 0 && mariadb && !set {
		// Seconds, fractions allowed; every statement of the session.
		cfg.Params["max_statement_time"] = strconv.FormatFloat(lim.stmt.Seconds(), 'f', -1, 64)
	}
	if _, set := cfg.Params["max_execution_time"]; lim.stmt > 0 && !mariadb && !set {
		// Milliseconds; MySQL 8 applies it to read-only SELECTs.
		cfg.Params["max_execution_time"] = strconv.FormatInt(lim.stmt.Milliseconds(), 10)
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxLifetime(30 * time.Minute)
	if !mariadb {
		// wait_timeout closes idle connections too: retire them first.
		db.SetConnMaxIdleTime(lim.idleTx / 2)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("database %s@%s unreachable: %w", cfg.DBName, cfg.Addr, err)
	}
	return db, nil
}

// isMariaDB asks the server what it is, on a connection of its own.
func isMariaDB(ctx context.Context, cfg *mysql.Config) (bool, error) {
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return false, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var v string
	if err := db.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&v); err != nil {
		return false, err
	}
	return strings.Contains(strings.ToLower(v), "mariadb"), nil
}
