// Package migrations holds the control plane's schema as goose SQL migrations,
// embedded in the binary. The SQL is valid for MySQL 8.0+ and MariaDB 10.6+.
// All scheduling times are DATETIME(6) in UTC, set from the database clock.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io"
	"log"

	"github.com/pressly/goose/v3"
)

//go:embed *.sql
var files embed.FS

// Provider returns a goose provider over the embedded migrations.
func Provider(db *sql.DB) (*goose.Provider, error) {
	p, err := goose.NewProvider(goose.DialectMySQL, db, files,
		goose.WithLogger(log.New(io.Discard, "", 0)))
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// lockName is the MySQL named lock that serializes migrations across hosts.
const lockName = "kece_migrations"

// Lock takes a server-wide named lock (GET_LOCK) on a dedicated connection
// so that replicas started at once migrate one after the other; unlock
// releases it. It waits up to two minutes.
func Lock(ctx context.Context, db *sql.DB) (unlock func(), err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations lock: %w", err)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, 120)`, lockName).Scan(&got); err != nil {
		conn.Close()
		return nil, fmt.Errorf("migrations lock: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		conn.Close()
		return nil, fmt.Errorf("migrations lock: another host has been migrating for 2 minutes; try again")
	}
	return func() {
		_, _ = conn.ExecContext(context.Background(), `SELECT RELEASE_LOCK(?)`, lockName)
		conn.Close()
	}, nil
}

// UpLocked applies every pending migration under Lock.
func UpLocked(ctx context.Context, db *sql.DB) error {
	unlock, err := Lock(ctx, db)
	if err != nil {
		return err
	}
	defer unlock()
	return Up(ctx, db)
}

// Up applies every pending migration.
func Up(ctx context.Context, db *sql.DB) error {
	p, err := Provider(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations up: %w", err)
	}
	return nil
}
