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
