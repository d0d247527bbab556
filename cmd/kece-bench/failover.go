package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"github.com/kece-oj/kece/cmd/internal/settings"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/maintenance"
	"github.com/kece-oj/kece/control/manifest"
	controlreplica "github.com/kece-oj/kece/control/replica"
	"github.com/kece-oj/kece/control/store"
)

// runFailover measures how long a job waits after its node dies, in the two
// cases the control plane detects early (issue 14, item 4), against a real
// control plane (in process, fresh database) and real kece-node processes of
// the mysql pool judging with the real SQL executor (a statement that sleeps,
// so the job is mid-execution when the node is killed):
//
//   - silent: the node is SIGKILLed and stays dead; another node is idle.
//     Its leases are reaped after missed heartbeats. Bound: heartbeat TTL +
//     reap interval + 1 s.
//   - restart: the node is SIGKILLed and started again at once (same
//     credential, new boot). Opening the new session requeues the old
//     session's leases. Bound: 2 s + the process's start (exec → session).
//
// The baseline, measured in the same run on a second control plane whose
// heartbeat TTL is the lease TTL (no early detection), is the silent case
// before the change: lease TTL + reap interval + 1 s.
func runFailover(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	lease := fs.Duration("lease", 10*time.Second, "lease TTL of the control plane")
	hbTTL := fs.Duration("heartbeat-ttl", 3*time.Second, "heartbeat TTL: silence after which a node's leases are reaped")
	hb := fs.Duration("heartbeat", time.Second, "heartbeat interval of the nodes (and the control plane's)")
	reap := fs.Duration("reap", time.Second, "reaper interval of the control plane")
	backoff := fs.Duration("backoff", store.BackoffBaseDefault, "retry backoff base after a lost lease (store BackoffBase)")
	runs := fs.Int("runs", 3, "rounds per case (fresh nodes each)")
	baseline := fs.Bool("baseline", true, "also measure the lease-expiry baseline (one round, about lease TTL long)")
	sleep := fs.Duration("statement", 5*time.Second, "how long the judged SQL statement sleeps")
	dsn := fs.String("dsn", "", "control MySQL server DSN without database (default $KECE_BENCH_MYSQL_DSN or the private MariaDB)")
	judgeDSN := fs.String("judge-dsn", envOr("KECE_BENCH_JUDGE_MYSQL_DSN", "root@tcp(127.0.0.1:33062)/"), "judge MySQL admin DSN")
	bin := fs.String("node-bin", "", "kece-node binary (default: next to kece-bench, else built from ./cmd/kece-node)")
	if err := settings.ParseWithEnv(fs, "KECE_BENCH_FAILOVER_", args, os.Getenv); err != nil {
		return err
	}
	if *runs < 1 || *sleep < time.Second || 2**hb > *hbTTL {
		return errors.New("-runs must be ≥ 1, -statement ≥ 1s, and -heartbeat at most half of -heartbeat-ttl")
	}
	nodeBin, cleanupBin, err := findNodeBinary(*bin)
	if err != nil {
		return err
	}
	defer cleanupBin()
	work, err := os.MkdirTemp("", "kece-failover-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	dsnFile := filepath.Join(work, "judge.dsn")
	if err := os.WriteFile(dsnFile, []byte(*judgeDSN), 0o600); err != nil {
		return err
	}
	fc := failoverControl{dsn: *dsn, lease: *lease, heartbeatTTL: *hbTTL, heartbeat: *hb, reap: *reap, backoff: *backoff,
		statement: *sleep, work: work, nodeBin: nodeBin, judgeDSNFile: dsnFile}
	cp, err := fc.start(ctx, "main")
	if err != nil {
		return err
	}
	defer cp.stop()

	limit := *lease + *reap + *sleep + 30*time.Second
	var silent, restart, starts, restartBounds []float64
	restartOK := true
	for r := 1; r <= *runs; r++ {
		fo, err := cp.silentRound(ctx, fmt.Sprintf("silent-%d", r), limit)
		if err != nil {
			return fmt.Errorf("silent round %d: %w", r, err)
		}
		silent = append(silent, fo)
		fmt.Printf("case=silent round=%d failover_ms=%.0f\n", r, fo)
	}
	for r := 1; r <= *runs; r++ {
		fo, start, err := cp.restartRound(ctx, fmt.Sprintf("restart-%d", r), limit)
		if err != nil {
			return fmt.Errorf("restart round %d: %w", r, err)
		}
		restart, starts = append(restart, fo), append(starts, start)
		bound := 2000 + start
		restartBounds = append(restartBounds, bound)
		restartOK = restartOK && fo <= bound
		fmt.Printf("case=restart round=%d failover_ms=%.0f process_start_ms=%.0f bound_ms=%.0f\n", r, fo, start, bound)
	}
	var base float64
	if *baseline {
		bc := fc
		bc.heartbeatTTL = *lease // silence is only noticed when the lease runs out: before issue 14
		bcp, err := bc.start(ctx, "baseline")
		if err != nil {
			return err
		}
		base, err = bcp.silentRound(ctx, "baseline", limit)
		bcp.stop()
		if err != nil {
			return fmt.Errorf("baseline round: %w", err)
		}
		fmt.Printf("case=baseline_lease_expiry round=1 failover_ms=%.0f\n", base)
	}

	slices.Sort(silent)
	slices.Sort(restart)
	slices.Sort(starts)
	ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) }
	silentBound := ms(*hbTTL + *reap + time.Second)
	fmt.Printf("mode=real_kece_node_processes pool=mysql executor=sqljudge statement_sleep_ms=%d runs=%d\n", sleep.Milliseconds(), *runs)
	fmt.Printf("lease_ttl_ms=%d heartbeat_ttl_ms=%d heartbeat_interval_ms=%d reap_interval_ms=%d backoff_base_ms=%d\n",
		lease.Milliseconds(), hbTTL.Milliseconds(), hb.Milliseconds(), reap.Milliseconds(), backoff.Milliseconds())
	fmt.Printf("silent_failover_ms=%.0f silent_failover_min_ms=%.0f silent_failover_median_ms=%.0f\n",
		silent[len(silent)-1], silent[0], silent[len(silent)/2])
	fmt.Printf("silent_bound_ms=%.0f silent_within_bound=%t\n", silentBound, silent[len(silent)-1] <= silentBound)
	fmt.Printf("restart_failover_ms=%.0f restart_failover_min_ms=%.0f restart_failover_median_ms=%.0f restart_process_start_max_ms=%.0f\n",
		restart[len(restart)-1], restart[0], restart[len(restart)/2], starts[len(starts)-1])
	fmt.Printf("restart_bound_ms=%.0f restart_bound_rule=2000+process_start_ms_per_round restart_within_bound=%t\n",
		slices.Max(restartBounds), restartOK)
	if *baseline {
		fmt.Printf("baseline_lease_expiry_failover_ms=%.0f baseline_bound_ms=%.0f\n", base, ms(*lease+*reap+time.Second))
	}
	return nil
}

// failoverControl is how a failover control plane is set up.
type failoverControl struct {
	dsn                                  string
	lease, heartbeatTTL, heartbeat, reap time.Duration
	backoff, statement                   time.Duration
	work, nodeBin, judgeDSNFile          string
}

// failoverPlane is a running control plane with the SQL problem published.
type failoverPlane struct {
	failoverControl
	st    *store.Store
	url   string
	manID int64
	stop  func()
}

// start runs an in-process control plane on a fresh database.
func (fc failoverControl) start(ctx context.Context, name string) (*failoverPlane, error) {
	db, _, drop, err := freshDatabase(ctx, fc.dsn, 16)
	if err != nil {
		return nil, err
	}
	var stops []func()
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	stops = append(stops, drop)
	arts, err := artifact.OpenStore(ctx, artifact.StoreConfig{Root: filepath.Join(fc.work, name, "artifacts")})
	if err != nil {
		stop()
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rep, err := controlreplica.New(controlreplica.Config{Store: store.Config{LeaseTTL: fc.lease, HeartbeatTTL: fc.heartbeatTTL, BackoffBase: fc.backoff,
		BackoffMax: max(fc.backoff, time.Second)}, Maintenance: maintenance.Config{ReapInterval: fc.reap}}, db, arts, log)
	if err != nil {
		stop()
		return nil, err
	}
	srv, err := httpapi.New(httpapi.Config{RenewInterval: max(fc.lease/4, 100*time.Millisecond), HeartbeatInterval: fc.heartbeat},
		rep.HTTPDeps(), log)
	if err != nil {
		stop()
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	stops = append(stops, cancel)
	go func() { _ = rep.Run(cctx) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		stop()
		return nil, err
	}
	hs := httpapi.NewHTTPServer(srv.Handler())
	go func() { _ = hs.Serve(ln) }()
	stops = append(stops, func() { _ = hs.Close() })
	st := rep.Store()
	man, err := st.PublishManifest(ctx, manifest.Manifest{Kind: manifest.KindSQL, Checker: manifest.Checker{Type: "exact"},
		SQL: &manifest.SQL{ProblemKind: "SELECT", SchemaSQL: "CREATE TABLE t (a INT NOT NULL)", SeedSQL: "INSERT INTO t VALUES (1), (2)",
			ReferenceSQL: "SELECT a FROM t", StatementTimeoutMs: min(fc.statement.Milliseconds()+10_000, manifest.MaxStatementMs),
			MaxRows: 100, MaxBytes: 1 << 20}})
	if err != nil {
		stop()
		return nil, err
	}
	return &failoverPlane{failoverControl: fc, st: st, url: "http://" + ln.Addr().String(), manID: man.ID, stop: stop}, nil
}

// failoverNode is one kece-node process of a failover round.
type failoverNode struct {
	id  int64
	dir string
	cmd *exec.Cmd
}

// newNode creates an enabled node and starts its process with the join code.
func (p *failoverPlane) newNode(ctx context.Context, groupID int64, name string) (*failoverNode, error) {
	n, code, err := p.st.CreateNode(ctx, store.NodeSpec{Name: name, Pool: string(machineapi.PoolMysql), HostGroupID: groupID, Slots: 1}, "bench")
	if err != nil {
		return nil, err
	}
	if err := enableNode(ctx, p.st.DB(), n.ID); err != nil {
		return nil, err
	}
	bn := &failoverNode{id: n.ID, dir: filepath.Join(p.work, name)}
	return bn, p.startProcess(ctx, bn, code.Code)
}

// startProcess starts the node's process (joinCode empty: the credential
// file from an earlier start is used, a restart).
func (p *failoverPlane) startProcess(ctx context.Context, bn *failoverNode, joinCode string) error {
	cmd := exec.CommandContext(ctx, p.nodeBin, "--heartbeat-interval", p.heartbeat.String())
	cmd.Env = append(os.Environ(), "KECE_POOL=mysql", "KECE_CONTROL_URL="+p.url, "KECE_CREDENTIAL_FILE="+filepath.Join(bn.dir, "cred.json"),
		"KECE_JOIN_CODE="+joinCode, "KECE_LOCAL_SLOTS=1", "KECE_CACHE_DIR="+filepath.Join(bn.dir, "cache"), "KECE_LISTEN=off",
		"KECE_JUDGE_MYSQL_DSN_FILE="+p.judgeDSNFile, "KECE_LOG_LEVEL=warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	bn.cmd = cmd
	return nil
}

func (bn *failoverNode) kill() {
	if bn.cmd != nil && bn.cmd.ProcessState == nil {
		_ = bn.cmd.Process.Signal(syscall.SIGKILL)
		_ = bn.cmd.Wait()
	}
}

// term stops the process gracefully and checks it exits 0.
func (bn *failoverNode) term() error {
	_ = bn.cmd.Process.Signal(syscall.SIGTERM)
	_ = bn.cmd.Wait()
	if code := bn.cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("node %d exited %d after SIGTERM", bn.id, code)
	}
	return nil
}

// enqueueRunning enqueues the sleeping statement and waits until node runs it.
func (p *failoverPlane) enqueueRunning(ctx context.Context, on *failoverNode, limit time.Duration) (store.Job, error) {
	var b [5]byte
	_, _ = rand.Read(b[:])
	res, err := p.st.Enqueue(ctx, store.EnqueueRequest{SubmissionType: "BENCH", SubmissionID: "failover-" + hex.EncodeToString(b[:]),
		Language: "mysql", ManifestID: p.manID,
		Source: fmt.Sprintf("SELECT a FROM t, (SELECT SLEEP(%.3f) AS z) AS s", p.statement.Seconds())})
	if err != nil {
		return store.Job{}, err
	}
	j, err := waitFor(ctx, p.st, res.JobID, limit, func(j store.Job) bool {
		return j.State == store.StateRunning && j.NodeID == on.id && j.Phase != ""
	})
	if err != nil {
		return j, fmt.Errorf("the node never started the job: %w", err)
	}
	// Let the statement get going on the judge server (mid-job).
	sleepCtx(ctx, 500*time.Millisecond)
	return j, nil
}

// finish waits for the job to end AC on the given node.
func (p *failoverPlane) finish(ctx context.Context, jobID int64, on *failoverNode, limit time.Duration) error {
	j, err := waitFor(ctx, p.st, jobID, limit, func(j store.Job) bool { return j.State.Terminal() })
	if err != nil {
		return err
	}
	if j.State != store.StateCompleted || j.Verdict != "AC" || j.NodeID != on.id {
		return fmt.Errorf("job ended %s %s on node %d, want COMPLETED AC on %d", j.State, j.Verdict, j.NodeID, on.id)
	}
	return nil
}

// silentRound: a node runs the job and is SIGKILLed for good while another
// node idles; the time until the other node holds the job.
func (p *failoverPlane) silentRound(ctx context.Context, name string, limit time.Duration) (float64, error) {
	g, err := p.st.CreateHostGroup(ctx, name, 2, "bench")
	if err != nil {
		return 0, err
	}
	a, err := p.newNode(ctx, g.ID, name+"-a")
	if err != nil {
		return 0, err
	}
	defer a.kill()
	if err := waitOnline(ctx, p.st, a.id, limit); err != nil {
		return 0, err
	}
	job, err := p.enqueueRunning(ctx, a, limit)
	if err != nil {
		return 0, err
	}
	b, err := p.newNode(ctx, g.ID, name+"-b")
	if err != nil {
		return 0, err
	}
	defer b.kill()
	if err := waitOnline(ctx, p.st, b.id, limit); err != nil {
		return 0, err
	}
	killed := time.Now()
	a.kill()
	if _, err := waitFor(ctx, p.st, job.ID, limit, func(j store.Job) bool { return j.State == store.StateRunning && j.NodeID == b.id }); err != nil {
		return 0, fmt.Errorf("the idle node never took the job: %w", err)
	}
	fo := float64(time.Since(killed).Microseconds()) / 1000
	if err := p.finish(ctx, job.ID, b, limit+p.statement); err != nil {
		return 0, err
	}
	return fo, b.term()
}

// restartRound: the node running the job is SIGKILLed and started again at
// once; the time until the job is leased again (the restarted process is
// the only node), and the process's own start (exec → new session).
func (p *failoverPlane) restartRound(ctx context.Context, name string, limit time.Duration) (failoverMs, startMs float64, err error) {
	g, err := p.st.CreateHostGroup(ctx, name, 1, "bench")
	if err != nil {
		return 0, 0, err
	}
	a, err := p.newNode(ctx, g.ID, name+"-a")
	if err != nil {
		return 0, 0, err
	}
	defer a.kill()
	if err := waitOnline(ctx, p.st, a.id, limit); err != nil {
		return 0, 0, err
	}
	job, err := p.enqueueRunning(ctx, a, limit)
	if err != nil {
		return 0, 0, err
	}
	before, err := p.st.GetNode(ctx, a.id)
	if err != nil {
		return 0, 0, err
	}
	killed := time.Now()
	a.kill()
	execAt := time.Now()
	if err := p.startProcess(ctx, a, ""); err != nil {
		return 0, 0, err
	}
	var sessionAt time.Time
	if _, err := waitFor(ctx, p.st, job.ID, limit, func(j store.Job) bool {
		if sessionAt.IsZero() {
			if n, err := p.st.GetNode(ctx, a.id); err == nil && n.SessionEpoch > before.SessionEpoch {
				sessionAt = time.Now()
			}
		}
		return j.State == store.StateRunning && j.LeaseEpoch > job.LeaseEpoch
	}); err != nil {
		return 0, 0, fmt.Errorf("the job was never leased again: %w", err)
	}
	failoverMs = float64(time.Since(killed).Microseconds()) / 1000
	if sessionAt.IsZero() {
		sessionAt = time.Now()
	}
	startMs = float64(sessionAt.Sub(execAt).Microseconds()) / 1000
	if err := p.finish(ctx, job.ID, a, limit+p.statement); err != nil {
		return 0, 0, err
	}
	return failoverMs, startMs, a.term()
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
