package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-sql-driver/mysql"
)

// dsnFlag registers --mysql-dsn with KECE_MYSQL_DSN as its default.
func dsnFlag(fs *flag.FlagSet) *string {
	return fs.String("mysql-dsn", os.Getenv("KECE_MYSQL_DSN"), "control database DSN (env KECE_MYSQL_DSN)")
}

// openDB opens the control database with the session settings the store
// relies on (UTC clock, parsed times) and checks it answers.
func openDB(ctx context.Context, dsn string, maxConns int) (*sql.DB, error) {
	if dsn == "" {
		return nil, usagef("no database: set KECE_MYSQL_DSN or --mysql-dsn (e.g. kece:secret@tcp(127.0.0.1:3306)/kece)")
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, usagef("KECE_MYSQL_DSN does not parse: %v", err)
	}
	if cfg.DBName == "" {
		return nil, usagef("KECE_MYSQL_DSN names no database: add /<database> after the address")
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
