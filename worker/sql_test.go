package worker_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/engine/sqljudge"
	"github.com/kece-oj/kece/worker"
)

// judgeDSN returns the judge MariaDB of scripts/mariadb.sh start judge (or
// KECE_TEST_JUDGE_MYSQL_DSN); it skips without one, or fails under
// KECE_REQUIRE_MYSQL=1.
func judgeDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("KECE_TEST_JUDGE_MYSQL_DSN")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:33062)/"
	}
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		if os.Getenv("KECE_REQUIRE_MYSQL") == "1" {
			t.Fatalf("KECE_REQUIRE_MYSQL=1 but the judge MySQL at %s is unreachable: %v", dsn, err)
		}
		t.Skipf("no judge MySQL at %s (scripts/mariadb.sh start judge): %v", dsn, err)
	}
	return dsn
}

// publishSQL publishes a SELECT problem whose reference is "SELECT a FROM t".
func publishSQL(t *testing.T, e *controltest.Env, timeoutMs int64) int64 {
	t.Helper()
	p, err := e.Store.Manifests().PublishManifest(e.Ctx, manifest.Manifest{Kind: manifest.KindSQL, Checker: manifest.Checker{Type: "exact"},
		SQL: &manifest.SQL{ProblemKind: "SELECT", SchemaSQL: "CREATE TABLE t (a INT NOT NULL)", SeedSQL: "INSERT INTO t VALUES (1), (2)",
			ReferenceSQL: "SELECT a FROM t", StatementTimeoutMs: timeoutMs, MaxRows: 100, MaxBytes: 1 << 20}})
	require.NoError(t, err)
	return p.ID
}

func enqueueSQL(e *controltest.Env, manID int64, src string) int64 {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return e.Enqueue("DATABASE", "q"+hex.EncodeToString(b[:]), "mysql", src, manID)
}

// The mysql pool end to end with the real SQL executor on the judge MariaDB.
// (Node ids restart at 1 in every test's control database; the executor
// name carries the control plane's address, so the janitors of parallel
// tests on the shared judge server never touch each other's leases.)
func TestSQLPoolEndToEnd(t *testing.T) {
	t.Parallel()
	dsn := judgeDSN(t)
	e := env(t, 5*time.Second)
	man := publishSQL(t, e, 5000)
	nd := e.NewNode("mysql", 2, 4)
	e.ForceEnable(nd.ID)
	cfg := nodeConfig(t, e.URL, "mysql", nd.JoinCode, nil)
	factory, err := worker.NewSQLBackend(worker.SQLBackendConfig{Executor: sqljudge.Config{AdminDSN: dsn}})
	require.NoError(t, err)
	cfg.NewBackend = factory
	cfg.LocalSlots = 2
	n := runNode(t, cfg)
	ac := enqueueSQL(e, man, "SELECT a FROM t ORDER BY a DESC")
	wa := enqueueSQL(e, man, "SELECT a + 1 FROM t")
	require.Equal(t, "AC", waitJob(t, e, ac, 30*time.Second, "completed", completed).Verdict)
	require.Equal(t, "WA", waitJob(t, e, wa, 30*time.Second, "completed", completed).Verdict)
	st := healthz(t, n)
	require.Contains(t, st.Runtime, "judge-mysql")
	require.Equal(t, []worker.Dependency{{Name: "judge_mysql", Healthy: true}}, st.Dependencies)
}

var nodeBinary struct {
	sync.Once
	path string
	err  error
}

// buildNode builds cmd/kece-node once per test binary.
func buildNode(t *testing.T) string {
	t.Helper()
	nodeBinary.Do(func() {
		dir, err := os.MkdirTemp("", "kece-node-bin-")
		if err != nil {
			nodeBinary.err = err
			return
		}
		_, file, _, _ := runtime.Caller(0)
		out := filepath.Join(dir, "kece-node")
		cmd := exec.Command("go", "build", "-o", out, "./cmd/kece-node")
		cmd.Dir = filepath.Join(filepath.Dir(file), "..")
		if b, err := cmd.CombinedOutput(); err != nil {
			nodeBinary.err = fmt.Errorf("go build ./cmd/kece-node: %v: %s", err, b)
			return
		}
		nodeBinary.path = out
	})
	require.NoError(t, nodeBinary.err)
	return nodeBinary.path
}

type nodeProc struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	mu     *sync.Mutex
	done   chan struct{}
	err    error
}

type lockedBuffer struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// startNodeProcess runs kece-node as a mysql-pool process against url.
// Its files live in dir (a restart passes the same dir and no code).
func startNodeProcess(t *testing.T, bin, url, joinCode, dsn, dir string, extraEnv ...string) *nodeProc {
	t.Helper()
	dsnFile := filepath.Join(dir, "judge.dsn")
	require.NoError(t, os.WriteFile(dsnFile, []byte(dsn), 0o600))
	cmd := exec.Command(bin, "--heartbeat-interval", "200ms", "--renew-interval", "300ms", "--claim-wait", "2s", "--safety-margin", "500ms",
		"--drain-grace", "20s")
	cmd.Env = append(os.Environ(), "KECE_POOL=mysql", "KECE_CONTROL_URL="+url, "KECE_CREDENTIAL_FILE="+filepath.Join(dir, "cred.json"),
		"KECE_JOIN_CODE="+joinCode, "KECE_LOCAL_SLOTS=1", "KECE_CACHE_DIR="+filepath.Join(dir, "cache"),
		"KECE_LISTEN=127.0.0.1:0", "KECE_JUDGE_MYSQL_DSN_FILE="+dsnFile, "KECE_LOG_LEVEL=debug")
	cmd.Env = append(cmd.Env, extraEnv...)
	p := &nodeProc{cmd: cmd, stderr: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	cmd.Stderr = lockedBuffer{p.mu, p.stderr}
	require.NoError(t, cmd.Start())
	go func() { defer close(p.done); p.err = cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			p.mu.Lock()
			t.Logf("kece-node %d stderr:\n%s", cmd.Process.Pid, p.stderr.String())
			p.mu.Unlock()
		}
	})
	return p
}

// judgeRunning reports whether a statement containing marker runs on the judge server.
func judgeRunning(t *testing.T, dsn, marker string) bool {
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND INFO NOT LIKE '%PROCESSLIST%'`,
		"%"+marker+"%").Scan(&n))
	return n > 0
}

// T09: a kece-node process is SIGKILLed mid-job (its SQL statement running on
// the judge server). A second node takes the job after the lease; the
// attempts show both; restarting the killed node removes its leftovers on
// the judge server; both processes exit 0 on SIGTERM; none of them ever
// dials the Docker socket it is given.
func TestT09NodeProcessKilled(t *testing.T) {
	t.Parallel()
	dsn := judgeDSN(t)
	bin := buildNode(t)
	e := env(t, 2*time.Second)
	man := publishSQL(t, e, 20000)
	a, b := e.NewNode("mysql", 1, 4), e.NewNode("mysql", 1, 4)
	e.ForceEnable(a.ID)
	e.ForceEnable(b.ID)
	var m [5]byte
	_, _ = rand.Read(m[:])
	marker := "t09_" + hex.EncodeToString(m[:])
	// The derived table sleeps once; the rows equal the reference's.
	jobID := enqueueSQL(e, man, "SELECT a AS "+marker+" FROM t, (SELECT SLEEP(2) AS z) AS s")

	// A Docker socket that counts who dials it: the mysql pool never does.
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	var dialed atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dialed.Add(1)
			c.Close()
		}
	}()
	docker := []string{"DOCKER_HOST=unix://" + sock, "KECE_DOCKER_HOST=unix://" + sock}

	dirA := t.TempDir()
	pa := startNodeProcess(t, bin, e.URL, a.JoinCode, dsn, dirA, docker...)
	waitJob(t, e, jobID, 20*time.Second, "running on A", func(j store.Job) bool { return j.State == store.StateRunning && j.NodeID == a.ID })
	require.Eventually(t, func() bool { return judgeRunning(t, dsn, marker) }, 20*time.Second, 20*time.Millisecond,
		"A's statement runs on the judge server")
	require.NoError(t, pa.cmd.Process.Signal(syscall.SIGKILL))
	<-pa.done

	pb := startNodeProcess(t, bin, e.URL, b.JoinCode, dsn, t.TempDir(), docker...)
	j := waitJob(t, e, jobID, 30*time.Second, "completed by B", completed)
	require.Equal(t, b.ID, j.NodeID)
	require.Equal(t, "AC", j.Verdict)
	att, err := e.Store.Jobs().Attempts(e.Ctx, jobID)
	require.NoError(t, err)
	require.Len(t, att, 2)
	require.Equal(t, a.ID, att[0].NodeID)
	require.Equal(t, "EXPIRED", strings.ToUpper(att[0].Outcome))
	require.Equal(t, b.ID, att[1].NodeID)

	// A's killed statement left its temporary database and account behind;
	// restarting A (same credential, new boot) removes them before it claims.
	leftovers := func() int {
		db, err := sql.Open("mysql", dsn)
		require.NoError(t, err)
		defer db.Close()
		var n int
		require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM kece_judge_registry.resource WHERE node_id = ? AND job_id = ? AND lease_epoch = 1`,
			worker.ExecutorNodeID(e.URL, idStr(a.ID)), idStr(jobID)).Scan(&n))
		return n
	}
	require.Positive(t, leftovers(), "the killed process could not clean up")
	pa2 := startNodeProcess(t, bin, e.URL, "", dsn, dirA, docker...)
	require.Eventually(t, func() bool { return leftovers() == 0 }, 20*time.Second, 50*time.Millisecond, "janitor at restart")
	node, err := e.Store.Nodes().GetNode(e.Ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, int64(2), node.SessionEpoch, "the restart is a new session")

	for _, p := range []*nodeProc{pb, pa2} {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Fatal("kece-node did not exit after SIGTERM")
		}
		var ee *exec.ExitError
		if errors.As(p.err, &ee) {
			t.Fatalf("kece-node exited with %v after SIGTERM", p.err)
		}
		require.NoError(t, p.err)
	}
	require.Zero(t, dialed.Load(), "a mysql node never opens the Docker socket")
}
