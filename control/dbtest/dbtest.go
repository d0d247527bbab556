// Package dbtest gives tests a fresh, migrated control-plane database on a real
// MySQL-compatible server: KECE_TEST_MYSQL_DSN when set, otherwise the private
// MariaDB started by scripts/mariadb.sh (127.0.0.1:33061). With
// KECE_REQUIRE_MYSQL=1 a missing server fails the test instead of skipping it.
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/kece-oj/kece/migrations"
)

// DefaultDSN is the private MariaDB instance of scripts/mariadb.sh.
const DefaultDSN = "root@tcp(127.0.0.1:33061)/"

// ServerDSN returns the DSN of the test server, without a database name.
func ServerDSN() string {
	if v := os.Getenv("KECE_TEST_MYSQL_DSN"); v != "" {
		return v
	}
	return DefaultDSN
}

// DSNFor returns a DSN for database name on the test server with the options
// the control plane uses.
func DSNFor(t testing.TB, name string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(ServerDSN())
	if err != nil {
		t.Fatalf("dbtest: bad KECE_TEST_MYSQL_DSN: %v", err)
	}
	cfg.DBName = name
	cfg.ParseTime = true
	cfg.InterpolateParams = true
	cfg.MultiStatements = true // as kece-control opens it (store scripts)
	cfg.Loc = time.UTC
	cfg.Params = map[string]string{"time_zone": "'+00:00'"}
	return cfg.FormatDSN()
}

// Open creates a fresh database with a random name, applies all migrations and
// returns a pool connected to it plus its DSN. The database is dropped when the
// test ends.
func Open(t testing.TB) (*sql.DB, string) {
	t.Helper()
	ctx := context.Background()
	admin, err := sql.Open("mysql", ServerDSN())
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := admin.PingContext(pingCtx); err != nil {
		if os.Getenv("KECE_REQUIRE_MYSQL") == "1" {
			t.Fatalf("dbtest: MySQL required (KECE_REQUIRE_MYSQL=1) but unreachable at %s: %v", ServerDSN(), err)
		}
		t.Skipf("dbtest: no MySQL at %s (start it with scripts/mariadb.sh start): %v", ServerDSN(), err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "kece_test_" + hex.EncodeToString(b[:])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatalf("dbtest: create database: %v", err)
	}
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name)
	})
	dsn := DSNFor(t, name)
	db := OpenDSN(t, dsn)
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return db, dsn
}

// OpenDSN opens another independent pool (e.g. a second control replica) on dsn.
func OpenDSN(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	t.Cleanup(func() { _ = db.Close() })
	return db
}
