package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/kece-oj/kece/cmd/internal/settings"
)

// dbFlags registers the control database settings every subcommand shares:
// --mysql-dsn (KECE_MYSQL_DSN) or --mysql-dsn-file (KECE_MYSQL_DSN_FILE).
func dbFlags(fs *settings.FlagSet) *string {
	return fs.Secret("mysql-dsn", "KECE_MYSQL_DSN", "KECE_MYSQL_DSN_FILE", "control database DSN (user:password@tcp(host:port)/database)")
}

// openDB opens the control database with the session settings the store
// relies on (UTC clock, parsed times) and checks it answers. A missing or
// malformed DSN is a settings error naming where it came from.
func openDB(ctx context.Context, fs *settings.FlagSet, dsn string, maxConns int) (*sql.DB, error) {
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
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxLifetime(30 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("database %s@%s unreachable: %w", cfg.DBName, cfg.Addr, err)
	}
	return db, nil
}
