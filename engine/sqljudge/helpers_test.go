package sqljudge

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// judgeDSNDefault is the private judge MariaDB of scripts/mariadb.sh.
const judgeDSNDefault = "root@tcp(127.0.0.1:33062)/"

func judgeDSN() string {
	if d := os.Getenv("KECE_TEST_JUDGE_MYSQL_DSN"); d != "" {
		return d
	}
	return judgeDSNDefault
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// rootDBForBench is rootDB for benchmarks.
func rootDBForBench(b *testing.B) *sql.DB {
	b.Helper()
	db, err := sql.Open("mysql", judgeDSN())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		if os.Getenv("KECE_REQUIRE_MYSQL") == "1" {
			b.Fatalf("judge MariaDB required (KECE_REQUIRE_MYSQL=1) but unreachable: %v", err)
		}
		b.Skipf("judge MariaDB unreachable: %v", err)
	}
	return db
}

// rootDB opens the judge server as its admin for assertions. Without a
// server the test skips, or fails when KECE_REQUIRE_MYSQL=1.
func rootDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", judgeDSN())
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		if os.Getenv("KECE_REQUIRE_MYSQL") == "1" {
			t.Fatalf("judge MariaDB required (KECE_REQUIRE_MYSQL=1) but unreachable: %v", err)
		}
		t.Skipf("judge MariaDB unreachable (start it with scripts/mariadb.sh start judge): %v", err)
	}
	return db
}

var nodeSanitizeRE = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// testAccountPrefix begins every account a test creates on the judge
// server beside the executor's own (kju…), so a test that counts the
// server's other accounts can leave out those of tests running beside it.
const testAccountPrefix = "kece_test_"

// testAccount is a new account name for a test: the prefix, what the
// account is for, and random hex.
func testAccount(t *testing.T, kind string) string {
	t.Helper()
	return testAccountPrefix + kind + "_" + randHex(t, 4)
}

// testNodeID is unique per test, so parallel tests never share registry rows.
func testNodeID(t *testing.T) string {
	name := nodeSanitizeRE.ReplaceAllString(t.Name(), "-")
	if len(name) > 80 {
		name = name[:80]
	}
	return "t-" + name + "-" + randHex(t, 4)
}

type testBundle struct {
	exec *Executor
	root *sql.DB
	node string
}

func setup(t *testing.T, mod func(*Config)) *testBundle {
	t.Helper()
	root := rootDB(t)
	cfg := Config{
		AdminDSN: judgeDSN(),
		NodeID:   testNodeID(t),
		Logger:   discardLogger(),
	}
	if mod != nil {
		mod(&cfg)
	}
	e, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	return &testBundle{exec: e, root: root, node: cfg.NodeID}
}

func (b *testBundle) run(t *testing.T, job string, p *engine.SQLProblem, src string) (engine.Verdict, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return b.exec.Execute(ctx, engine.Task{JobID: job, LeaseEpoch: 1, Source: []byte(src), SQL: p}, engine.NoProgress)
}

// requireVerdict runs src and requires the status.
func (b *testBundle) requireVerdict(t *testing.T, p *engine.SQLProblem, src string, want engine.Status) engine.Verdict {
	t.Helper()
	job := "job-" + randHex(t, 4)
	v, err := b.run(t, job, p, src)
	require.NoError(t, err)
	require.Equal(t, want, v.Status, "message: %s", v.Message)
	b.requireNoLeftovers(t)
	names := namesFor(b.node, job, 1)
	require.False(t, b.dbExists(t, names.DB), "temporary database left behind")
	require.False(t, b.userExists(t, names.User), "temporary account left behind")
	return v
}

// requireNoLeftovers checks that this test's node has no registry rows and
// that no database or account recorded for it exists.
func (b *testBundle) requireNoLeftovers(t *testing.T) {
	t.Helper()
	var n int
	err := b.root.QueryRow("SELECT COUNT(*) FROM `"+RegistrySchemaDefault+"`.`resource` WHERE node_id = ?", b.node).Scan(&n)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1146 {
		// A fresh judge server on which no executor ever ran (e.g. every one
		// refused it): no registry, so nothing recorded and nothing left.
		return
	}
	require.NoError(t, err)
	require.Zero(t, n, "registry rows left for node %s", b.node)
}

func (b *testBundle) dbExists(t *testing.T, name string) bool {
	t.Helper()
	var n int
	require.NoError(t, b.root.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name).Scan(&n))
	return n > 0
}

func (b *testBundle) userExists(t *testing.T, name string) bool {
	t.Helper()
	var n int
	require.NoError(t, b.root.QueryRow("SELECT COUNT(*) FROM mysql.user WHERE User = ?", name).Scan(&n))
	return n > 0
}

func (b *testBundle) registryRows(t *testing.T, job string, epoch int64) int {
	t.Helper()
	var n int
	require.NoError(t, b.root.QueryRow("SELECT COUNT(*) FROM `"+RegistrySchemaDefault+"`.`resource` WHERE node_id = ? AND job_id = ? AND lease_epoch = ?",
		b.node, job, epoch).Scan(&n))
	return n
}

func str(s string) *string { return &s }

// rowsOf builds expected rows; "\x00NULL" stands for NULL.
func rowsOf(rows ...[]string) [][]*string {
	out := make([][]*string, len(rows))
	for i, r := range rows {
		out[i] = make([]*string, len(r))
		for j, v := range r {
			if v != "\x00NULL" {
				out[i][j] = str(v)
			}
		}
	}
	return out
}

const null = "\x00NULL"

const peopleSchema = `CREATE TABLE person (id INT PRIMARY KEY, name VARCHAR(40), dept VARCHAR(20), salary DECIMAL(10,2), ratio DOUBLE, born DATETIME(3));`
const peopleSeed = `INSERT INTO person VALUES
 (1, 'Ada', 'eng', 1200.50, 0.1, '1990-01-02 03:04:05.000'),
 (2, 'Bob', 'ops', 900.00, 0.2, NULL),
 (3, 'Cyd', 'eng', 1500.00, NULL, '1985-06-07 08:09:10.500'),
 (4, 'Dee', NULL, NULL, 0.3, '2000-12-31 23:59:59.000');`

func selectProblem(ref string, ordered bool) *engine.SQLProblem {
	return &engine.SQLProblem{
		Kind: engine.SQLKindSelect, Schema: peopleSchema, Seed: peopleSeed,
		Reference: ref, Ordered: ordered,
		StatementTimeout: 2 * time.Second, MaxRows: 1000, MaxBytes: 1 << 20,
	}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// adminAddr is the host:port of the judge server under test.
func adminAddr(t *testing.T) string {
	t.Helper()
	mc, err := mysql.ParseDSN(judgeDSN())
	require.NoError(t, err)
	return mc.Addr
}

func containsMariaDB(version string) bool {
	return strings.Contains(strings.ToLower(version), "mariadb")
}
