package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/dbtest"
)

func TestBadSettingsAreRefusedWithAHint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--mysql-dsn", ""}, "KECE_ARTIFACT_DIR"},
		{[]string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", ""}, "KECE_MYSQL_DSN"},
		{[]string{"serve", "--artifact-dir", t.TempDir(), "--listen", "nonsense", "--mysql-dsn", "x"}, "host:port"},
		{[]string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "root@tcp(127.0.0.1:1)/"}, "names no database"},
		{[]string{"token", "create", "--kind", "root", "--name", "x", "--mysql-dsn", "a@tcp(b)/c"}, "--kind must be admin or business"},
		{[]string{"migrate", "sideways", "--mysql-dsn", "a@tcp(b)/c"}, "unknown migrate action"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c", "--webhook-url", "https://oj.example/hook"}, "--webhook-secret-file"},
		{[]string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c", "--probe-allow-cidrs", "10.0.0.0/33"}, "--probe-allow-cidrs"},
		{[]string{"reconcile", "--format", "xml", "--mysql-dsn", "a@tcp(b)/c"}, "--format must be json or csv"},
		{[]string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c", "--log-format", "yaml"}, "log format \"yaml\": want json or text"},
		{[]string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c", "--log-level", "loud"}, "log level \"loud\""},
		{[]string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c", "--metrics-listen", "9465"}, "--metrics-listen \"9465\" is not host:port"},
		{[]string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c", "--metrics-cache-ttl", "20m"}, "--metrics-cache-ttl: metrics: fleet cache TTL 20m0s must be 0..10m"},
		{[]string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c", "--webhook-url", "https://oj.example/hook", "--webhook-secret-file", "/nonexistent/secret"}, "webhook secret"},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		code := run(ctx, c.args, &out, &errOut)
		require.Equal(t, 2, code, "%v: %s", c.args, errOut.String())
		require.Contains(t, errOut.String(), c.want, c.args)
	}
}

func TestUnparsableEnvironmentRefusesToStart(t *testing.T) {
	t.Setenv("KECE_LEASE_TTL", "sixty")
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"serve", "--artifact-dir", t.TempDir(), "--mysql-dsn", "a@tcp(b)/c"}, &out, &errOut)
	require.Equal(t, 2, code)
	require.Contains(t, errOut.String(), `KECE_LEASE_TTL="sixty" is not a duration`)
}

func TestMigrateTokenAndServe(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, dsn := dbtest.Open(t) // already migrated: migrate up is then a no-op
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(ctx, []string{"migrate", "up", "--mysql-dsn", dsn}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "up to date")
	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"migrate", "status", "--mysql-dsn", dsn}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "00001_schema.sql")

	// Down removes the schema, status shows it pending, up brings it back.
	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"migrate", "down", "--mysql-dsn", dsn}, &out, &errOut), errOut.String())
	var tables int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE 'judge_%'`).Scan(&tables))
	require.Zero(t, tables)
	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"migrate", "status", "--mysql-dsn", dsn}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "pending")
	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"migrate", "up", "--mysql-dsn", dsn}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "applied")

	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"token", "create", "--kind", "admin", "--name", "ops", "--mysql-dsn", dsn}, &out, &errOut), errOut.String())
	tok := strings.TrimSpace(out.String())
	require.True(t, strings.HasPrefix(tok, "kat_"))
	var stored int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM judge_api_token WHERE token_hash = ?`, tok).Scan(&stored))
	require.Zero(t, stored, "the token itself is never stored")
	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"token", "create", "--kind", "business", "--name", "old-oj", "--mysql-dsn", dsn}, &out, &errOut), errOut.String())
	require.Equal(t, 0, run(ctx, []string{"token", "revoke", "--kind", "business", "--name", "old-oj", "--mysql-dsn", dsn}, &out, &errOut), errOut.String())
	require.Equal(t, 1, run(ctx, []string{"token", "revoke", "--kind", "business", "--name", "old-oj", "--mysql-dsn", dsn}, &out, &errOut))
	require.Contains(t, errOut.String(), "no live business token")

	// Reconcile: a healthy database exits 0; a planted violation exits 1.
	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"reconcile", "--mysql-dsn", dsn}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), `"violations": []`)
	_, err := db.Exec(`INSERT INTO judge_submission (submission_type, submission_id, current_job_id, generation) VALUES ('ALGO', 'dangling', 999999, 1)`)
	require.NoError(t, err)
	out.Reset()
	require.Equal(t, 1, run(ctx, []string{"reconcile", "--format", "csv", "--mysql-dsn", dsn}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "POINTER_DANGLING")
	_, err = db.Exec(`DELETE FROM judge_submission WHERE submission_id = 'dangling'`)
	require.NoError(t, err)

	var revoked int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM judge_api_token WHERE name = 'old-oj' AND revoked_at IS NOT NULL`).Scan(&revoked))
	require.Equal(t, 1, revoked)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	done := make(chan int, 1)
	var serveErr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"serve", "--listen", addr, "--artifact-dir", t.TempDir(), "--mysql-dsn", dsn}, &out, &serveErr)
	}()
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/api/v1/admin/judge-host-groups", addr), nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.NotEqual(t, http.StatusUnauthorized, resp.StatusCode, "the created admin token is accepted")
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, serveErr.String())
	case <-time.After(25 * time.Second):
		t.Fatal("serve did not stop on cancel")
	}
	_ = sql.ErrNoRows
}
