package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/kece-oj/kece/migrations"
)

// benchDSNDefault is the private MariaDB of scripts/mariadb.sh.
const benchDSNDefault = "root@tcp(127.0.0.1:33061)/"

// statementsSent counts the statements sent through freshDatabase's pools.
var statementsSent atomic.Int64

// freshDatabase creates and migrates a throwaway database; drop removes it.
func freshDatabase(ctx context.Context, serverDSN string, conns int) (db *sql.DB, dsn string, drop func(), err error) {
	if serverDSN == "" {
		serverDSN = os.Getenv("KECE_BENCH_MYSQL_DSN")
	}
	if serverDSN == "" {
		serverDSN = benchDSNDefault
	}
	admin, err := sql.Open("mysql", serverDSN)
	if err != nil {
		return nil, "", nil, err
	}
	var b [5]byte
	_, _ = rand.Read(b[:])
	name := "kece_bench_" + hex.EncodeToString(b[:])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		return nil, "", nil, fmt.Errorf("create database (is scripts/mariadb.sh start running?): %w", err)
	}
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		admin.Close()
		return nil, "", nil, err
	}
	cfg.DBName, cfg.ParseTime, cfg.Loc = name, true, time.UTC
	cfg.InterpolateParams = true
	cfg.MultiStatements = true // as kece-control opens it (store scripts)
	dsn = cfg.FormatDSN()
	if db, err = countedPool(dsn, conns); err != nil {
		admin.Close()
		return nil, "", nil, err
	}
	drop = func() {
		db.Close()
		_, _ = admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name)
		admin.Close()
	}
	if err := migrations.Up(ctx, db); err != nil {
		drop()
		return nil, "", nil, err
	}
	return db, dsn, drop, nil
}

// countedPool opens another pool on a database freshDatabase made (a second
// control replica has its own pool), counted like the first.
func countedPool(dsn string, conns int) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(countingConnector{Connector: conn, n: &statementsSent})
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return db, nil
}

// storePool is the pool the bench's stores run on: db itself, or with
// multi false another pool on the same database whose connections take one
// statement per request, so the store sends a script's statements one by
// one (the bench's switch for what scripts buy). closePool closes that
// other pool; db stays open, it is the bench's own.
func storePool(db *sql.DB, dsn string, conns int, multi bool) (pool *sql.DB, poolDSN string, closePool func(), err error) {
	if multi {
		return db, dsn, func() {}, nil
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, "", nil, err
	}
	cfg.MultiStatements = false
	poolDSN = cfg.FormatDSN()
	if pool, err = countedPool(poolDSN, conns); err != nil {
		return nil, "", nil, err
	}
	return pool, poolDSN, func() { pool.Close() }, nil
}
