package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/contracts/machineapi"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
)

// runFailover measures how long a job waits after its node dies: an
// in-process control plane on a fresh database, two real kece-node processes
// of the mysql pool judging with the real SQL executor (a statement that
// sleeps, so the job is mid-execution), SIGKILL of the node running it, and
// the time until the job runs on the other node. The bound it is compared
// with is lease TTL + reap interval + 1 s.
func runFailover(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	lease := fs.Duration("lease", 10*time.Second, "lease TTL of the control plane")
	reap := fs.Duration("reap", time.Second, "reaper interval of the control plane")
	backoff := fs.Duration("backoff", store.BackoffBaseDefault, "retry backoff base after an expired lease (store BackoffBase)")
	runs := fs.Int("runs", 3, "kill/failover rounds (two fresh nodes each)")
	sleep := fs.Duration("statement", 0, "how long the judged SQL statement sleeps (default: 2×lease)")
	dsn := fs.String("dsn", "", "control MySQL server DSN without database (default $KECE_BENCH_MYSQL_DSN or the private MariaDB)")
	judgeDSN := fs.String("judge-dsn", envOr("KECE_BENCH_JUDGE_MYSQL_DSN", "root@tcp(127.0.0.1:33062)/"), "judge MySQL admin DSN")
	bin := fs.String("node-bin", "", "kece-node binary (default: next to kece-bench, else built from ./cmd/kece-node)")
	if err := settings.ParseWithEnv(fs, "KECE_BENCH_FAILOVER_", args, os.Getenv); err != nil {
		return err
	}
	if *sleep == 0 {
		*sleep = 2 * *lease
	}
	nodeBin, cleanupBin, err := findNodeBinary(*bin)
	if err != nil {
		return err
	}
	defer cleanupBin()

	db, _, drop, err := freshDatabase(ctx, *dsn, 16)
	if err != nil {
		return err
	}
	defer drop()
	st, err := store.New(db, store.Config{LeaseTTL: *lease, BackoffBase: *backoff, BackoffMax: max(*backoff, time.Second)})
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "kece-failover-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	arts, err := artifact.OpenStore(ctx, artifact.StoreConfig{Root: filepath.Join(work, "artifacts")})
	if err != nil {
		return err
	}
	srv, err := httpapi.New(httpapi.Config{ReapInterval: *reap, RenewInterval: max(*lease/4, 100*time.Millisecond),
		HeartbeatInterval: time.Second}, st, arts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	go srv.Run(cctx)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := httpapi.NewHTTPServer(srv.Handler())
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	url := "http://" + ln.Addr().String()
	st = srv.Store()

	man, err := st.PublishManifest(ctx, manifest.Manifest{Kind: manifest.KindSQL, Checker: manifest.Checker{Type: "exact"},
		SQL: &manifest.SQL{ProblemKind: "SELECT", SchemaSQL: "CREATE TABLE t (a INT NOT NULL)", SeedSQL: "INSERT INTO t VALUES (1), (2)",
			ReferenceSQL: "SELECT a FROM t", StatementTimeoutMs: min(sleep.Milliseconds()+10_000, manifest.MaxStatementMs),
			MaxRows: 100, MaxBytes: 1 << 20}})
	if err != nil {
		return err
	}
	dsnFile := filepath.Join(work, "judge.dsn")
	if err := os.WriteFile(dsnFile, []byte(*judgeDSN), 0o600); err != nil {
		return err
	}

	var failovers []float64
	for r := 1; r <= *runs; r++ {
		fo, jd, err := failoverRound(ctx, st, url, nodeBin, dsnFile, work, man.ID, r, *sleep, *lease+*reap+30*time.Second)
		if err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
		failovers = append(failovers, fo)
		fmt.Printf("round=%d failover_ms=%.0f judged_after_kill_ms=%.0f\n", r, fo, jd)
	}
	slices.Sort(failovers)
	bound := float64((*lease + *reap + time.Second).Milliseconds())
	fmt.Printf("mode=real_kece_node_processes pool=mysql executor=sqljudge statement_sleep_ms=%d\n", sleep.Milliseconds())
	fmt.Printf("lease_ttl_ms=%d reap_interval_ms=%d backoff_base_ms=%d runs=%d\n", lease.Milliseconds(), reap.Milliseconds(),
		backoff.Milliseconds(), *runs)
	fmt.Printf("failover_ms=%.0f\n", failovers[len(failovers)-1])
	fmt.Printf("failover_min_ms=%.0f failover_median_ms=%.0f failover_max_ms=%.0f\n", failovers[0], failovers[len(failovers)/2],
		failovers[len(failovers)-1])
	fmt.Printf("bound_ms=%.0f\n", bound)
	fmt.Printf("within_bound=%t\n", failovers[len(failovers)-1] <= bound)
	return nil
}

// failoverRound starts two nodes, lets the first take the job, SIGKILLs it
// once the statement runs, and times until the second node holds the lease
// (failover) and until the job is judged.
func failoverRound(ctx context.Context, st *store.Store, url, bin, dsnFile, work string, manID int64, round int,
	sleep, limit time.Duration) (failoverMs, judgedMs float64, err error) {
	g, err := st.CreateHostGroup(ctx, fmt.Sprintf("failover-%d", round), 2, "bench")
	if err != nil {
		return 0, 0, err
	}
	var ids [2]int64
	var procs [2]*exec.Cmd
	defer func() {
		for _, p := range procs {
			if p != nil && p.ProcessState == nil {
				_ = p.Process.Kill()
				_ = p.Wait()
			}
		}
	}()
	start := func(i int) error {
		n, code, err := st.CreateNode(ctx, store.NodeSpec{Name: fmt.Sprintf("failover-%d-%d", round, i), Pool: string(machineapi.PoolMysql),
			HostGroupID: g.ID, Slots: 1}, "bench")
		if err != nil {
			return err
		}
		if _, err := st.DB().ExecContext(ctx, `UPDATE judge_node SET desired_state = 'ENABLED' WHERE id = ?`, n.ID); err != nil {
			return err
		}
		dir := filepath.Join(work, fmt.Sprintf("node-%d-%d", round, i))
		cmd := exec.CommandContext(ctx, bin, "-heartbeat", "1s")
		cmd.Env = append(os.Environ(), "KECE_POOL=mysql", "KECE_CONTROL_URL="+url, "KECE_CREDENTIAL_FILE="+filepath.Join(dir, "cred.json"),
			"KECE_JOIN_CODE="+code.Code, "KECE_LOCAL_SLOTS=1", "KECE_CACHE_DIR="+filepath.Join(dir, "cache"), "KECE_LISTEN=off",
			"KECE_JUDGE_MYSQL_DSN_FILE="+dsnFile, "KECE_LOG_LEVEL=warn")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		ids[i], procs[i] = n.ID, cmd
		return nil
	}
	var b [5]byte
	_, _ = rand.Read(b[:])
	res, err := st.Enqueue(ctx, store.EnqueueRequest{SubmissionType: "BENCH", SubmissionID: "failover-" + hex.EncodeToString(b[:]),
		Language: "mysql", ManifestID: manID,
		Source: fmt.Sprintf("SELECT a FROM t, (SELECT SLEEP(%.3f) AS z) AS s", sleep.Seconds())})
	if err != nil {
		return 0, 0, err
	}
	if err := start(0); err != nil {
		return 0, 0, err
	}
	if _, err := waitFor(ctx, st, res.JobID, limit, func(j store.Job) bool { return j.State == store.StateRunning && j.NodeID == ids[0] }); err != nil {
		return 0, 0, fmt.Errorf("first node never took the job: %w", err)
	}
	// The second node is up and idle (long-polling) before the first dies.
	if err := start(1); err != nil {
		return 0, 0, err
	}
	if err := waitOnline(ctx, st, ids[1], limit); err != nil {
		return 0, 0, err
	}
	// Let the statement get going on the judge server (mid-job).
	time.Sleep(500 * time.Millisecond)
	killed := time.Now()
	if err := procs[0].Process.Signal(syscall.SIGKILL); err != nil {
		return 0, 0, err
	}
	_ = procs[0].Wait()
	if _, err := waitFor(ctx, st, res.JobID, limit, func(j store.Job) bool { return j.State == store.StateRunning && j.NodeID == ids[1] }); err != nil {
		return 0, 0, fmt.Errorf("second node never took the job: %w", err)
	}
	failoverMs = float64(time.Since(killed).Microseconds()) / 1000
	j, err := waitFor(ctx, st, res.JobID, limit+sleep, func(j store.Job) bool { return j.State.Terminal() })
	if err != nil {
		return 0, 0, err
	}
	if j.State != store.StateCompleted || j.Verdict != "AC" || j.NodeID != ids[1] {
		return 0, 0, fmt.Errorf("job ended %s %s on node %d, want COMPLETED AC on %d", j.State, j.Verdict, j.NodeID, ids[1])
	}
	judgedMs = float64(time.Since(killed).Microseconds()) / 1000
	_ = procs[1].Process.Signal(syscall.SIGTERM)
	_ = procs[1].Wait()
	if procs[1].ProcessState.ExitCode() != 0 {
		return 0, 0, fmt.Errorf("second node exited %d after SIGTERM", procs[1].ProcessState.ExitCode())
	}
	return failoverMs, judgedMs, nil
}

// waitFor polls the job every 5 ms (the measurement's resolution).
func waitFor(ctx context.Context, st *store.Store, jobID int64, limit time.Duration, pred func(store.Job) bool) (store.Job, error) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		j, err := st.GetJob(ctx, jobID)
		if err != nil {
			return j, err
		}
		if pred(j) {
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return store.Job{}, fmt.Errorf("job %d: not within %s", jobID, limit)
}

func waitOnline(ctx context.Context, st *store.Store, nodeID int64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		n, err := st.GetNode(ctx, nodeID)
		if err != nil {
			return err
		}
		if n.Online {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("node %d did not come online within %s", nodeID, limit)
}

// findNodeBinary returns the kece-node to run: the flag, a sibling of this
// binary, or one built from ./cmd/kece-node in the current module.
func findNodeBinary(flagPath string) (string, func(), error) {
	if flagPath != "" {
		return flagPath, func() {}, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "kece-node")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, func() {}, nil
		}
	}
	dir, err := os.MkdirTemp("", "kece-node-bin-")
	if err != nil {
		return "", nil, err
	}
	out := filepath.Join(dir, "kece-node")
	b, err := exec.Command("go", "build", "-o", out, "./cmd/kece-node").CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, errors.Join(fmt.Errorf("no kece-node next to kece-bench and building ./cmd/kece-node failed (pass -node-bin): %w", err),
			errors.New(string(b)))
	}
	return out, func() { os.RemoveAll(dir) }, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
