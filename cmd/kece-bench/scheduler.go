package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/longpoll"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
)

// runScheduler measures full durable job lifecycles (enqueue → claim → renew
// once → complete → event ack) by N simulated nodes, against the machine's
// durable single-row commit rate measured first with the same connections.
func runScheduler(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("scheduler", flag.ContinueOnError)
	nodes := fs.Int("nodes", 8, "simulated nodes (one connection each)")
	slots := fs.Int("slots", 4, "slots per node (claim batch)")
	enqueuers := fs.Int("enqueuers", 4, "business enqueue goroutines")
	groups := fs.Int("groups", 4, "host groups the nodes are spread over (a host group lock serializes its nodes' claims)")
	dur := fs.Duration("duration", 8*time.Second, "measurement time of each phase")
	enqueueBatch := fs.Int("enqueue-batch", 1, "submissions per enqueue call (1: Enqueue, one per transaction like River's InsertTx; >1: EnqueueMany, one transaction per call)")
	batchParallel := fs.Int("batch-parallel", store.BatchParallelDefault, "store: batches of results and renewals (the lease writer) that may commit at once")
	batchLinger := fs.Duration("batch-linger", store.BatchLingerDefault, "store: how long a claim, renewal or result that would start a batch on a busy batcher waits for the rest of its burst (negative: never)")
	enqueueParallel := fs.Int("enqueue-parallel", store.EnqueueParallelDefault, "store: batches of new submissions that may commit at once")
	completeBatchMax := fs.Int("complete-batch-max", store.CompleteBatchMaxDefault, "store: results and renewals (and, apart, new submissions) that may share one commit (1: each alone)")
	claimBatchCalls := fs.Int("claim-batch-calls", store.ClaimBatchCallsDefault, "store: nodes' claims of a pool that may share one transaction (1: each alone)")
	multiStatements := fs.Bool("multi-statements", true, "open the store's pools with multiStatements, so a script is one round trip (false: its statements go one by one)")
	dsn := fs.String("dsn", "", "MySQL server DSN without database (default $KECE_BENCH_MYSQL_DSN or the private MariaDB)")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the measured window to this file")
	replicas := fs.Int("replicas", 1, "control replicas: stores with their own connection pool, batchers, caches and long-poll hub (polling the pool signal as kece-control does) on one database; nodes and enqueuers are spread over them")
	protocol := fs.String("protocol", "cycle", "how a node posts results: cycle (with its next claim, one call: CompleteClaim) or separate (each result its own call beside the claim loop)")
	startReport := fs.String("start-report", "node", "when a leased job reports its start with a renew: node (as kece-node: only a job still judging after the phase-report delay, 100 ms; the bench's jobs take no time, so none does) or always (one renew for all of a claim's jobs before any is judged)")
	serverPID := fs.Int("server-pid", 0, "pid of a local database server: its CPU over the measured window is reported (scripts/bench-scheduler.sh passes it)")
	if err := settings.ParseWithEnv(fs, "KECE_BENCH_SCHEDULER_", args, os.Getenv); err != nil {
		return err
	}
	switch {
	case *replicas < 1 || *replicas > *nodes:
		return fmt.Errorf("-replicas must be 1..nodes")
	case *groups < 1 || *groups > *nodes:
		return fmt.Errorf("-groups must be 1..nodes")
	case *enqueueBatch < 1 || *enqueueBatch > store.EnqueueManyMax:
		return fmt.Errorf("-enqueue-batch must be 1..%d", store.EnqueueManyMax)
	case *startReport != "node" && *startReport != "always":
		return fmt.Errorf("-start-report must be node or always, not %q", *startReport)
	case *protocol != "cycle" && *protocol != "separate":
		return fmt.Errorf("-protocol must be cycle or separate, not %q", *protocol)
	}
	conns := *nodes + *enqueuers + 1
	// Both phases share one pool of conns connections.
	db, dbDSN, drop, err := freshDatabase(ctx, *dsn, conns)
	if err != nil {
		return err
	}
	defer drop()

	var durable string
	_ = db.QueryRowContext(ctx, `SELECT @@innodb_flush_log_at_trx_commit`).Scan(&durable)
	rate, err := commitRate(ctx, db, conns, *dur)
	if err != nil {
		return err
	}
	runCtx, stopReplicas := context.WithCancel(ctx)
	defer stopReplicas()
	cfg := store.Config{LeaseTTL: time.Minute, BatchParallel: *batchParallel, EnqueueParallel: *enqueueParallel, BatchLinger: *batchLinger,
		CompleteBatchMax: *completeBatchMax, ClaimBatchCalls: *claimBatchCalls}
	repDB, repDSN, closeRepDB, err := storePool(db, dbDSN, conns, *multiStatements)
	if err != nil {
		return err
	}
	defer closeRepDB()
	reps, closeReps, err := startReplicas(runCtx, repDB, repDSN, conns, *replicas, cfg)
	defer closeReps()
	if err != nil {
		return err
	}
	manID, sessions, err := setupFleet(ctx, db, reps[0].st, *nodes, *slots, *groups)
	if err != nil {
		return err
	}
	res, err := lifecycles(ctx, reps, db, manID, sessions, *slots, *enqueuers, *enqueueBatch, *startReport == "always", *protocol == "cycle", *dur, cpuWatch{profile: *cpuProfile, serverPID: *serverPID})
	if err != nil {
		return err
	}
	var retried int64
	for _, r := range reps {
		retried += r.st.RetriedTransactions()
	}
	fmt.Printf("innodb_flush_log_at_trx_commit=%s\n", durable)
	fmt.Printf("replicas=%d\n", *replicas)
	fmt.Printf("protocol=%s start_report=%s\n", *protocol, *startReport)
	fmt.Printf("connections=%d nodes=%d host_groups=%d slots=%d enqueuers=%d enqueue_batch=%d duration_s=%.0f batch_parallel=%d enqueue_parallel=%d batch_linger_ms=%g\n", conns, *nodes, *groups, *slots, *enqueuers, *enqueueBatch, dur.Seconds(), *batchParallel, *enqueueParallel, float64(batchLinger.Microseconds())/1000)
	fmt.Printf("complete_batch_max=%d claim_batch_calls=%d multi_statements=%t\n", *completeBatchMax, *claimBatchCalls, *multiStatements)
	res.print(rate, retried, *serverPID > 0)
	return nil
}

// startReplicas opens n control replicas on one database: the first on db,
// the others on pools of their own. Nodes wait for work the way the claim
// handler does: on their replica's long-poll hub, told after each commit on
// that replica that made work ready, and by the poll of the pool signal for
// work other replicas committed.
func startReplicas(ctx context.Context, db *sql.DB, dsn string, conns, n int, cfg store.Config) (reps []replica, closeAll func(), err error) {
	var pools []*sql.DB
	closeAll = func() {
		for _, p := range pools {
			p.Close()
		}
	}
	for i := range n {
		rdb := db
		if i > 0 {
			if rdb, err = countedPool(dsn, conns); err != nil {
				return nil, closeAll, err
			}
			pools = append(pools, rdb)
		}
		st, err := store.New(rdb, cfg)
		if err != nil {
			return nil, closeAll, err
		}
		hub := longpoll.New()
		st = st.WithNotifier(hub)
		// A failed signal read fails the run's next store call too; the
		// bench reports that one.
		go hub.Run(ctx, st, longpoll.SignalPollIntervalDefault, func(error) {})
		reps = append(reps, replica{st: st, hub: hub})
	}
	return reps, closeAll, nil
}

// print writes the run's figures against the machine's durable commit rate
// (a lifecycle needs three commits, so rate/3 bounds it).
func (res lifecycleResult) print(rate float64, retried int64, serverCPU bool) {
	bound := rate / 3
	fmt.Printf("commit_rate_per_s=%.0f\n", rate)
	fmt.Printf("commit_bound_lifecycles_per_s=%.0f\n", bound)
	fmt.Printf("lifecycles_per_s=%.0f\n", res.perSec)
	fmt.Printf("ratio=%.2f\n", res.perSec/bound)
	fmt.Printf("claim_p50_ms=%.2f\n", res.claimP50)
	fmt.Printf("claim_p99_ms=%.2f\n", res.claimP99)
	fmt.Printf("enqueue_avg_ms=%.2f\n", res.enqueueAvgMs)
	fmt.Printf("complete_avg_ms=%.2f\n", res.completeAvgMs)
	fmt.Printf("empty_claims=%d\n", res.emptyClaims)
	fmt.Printf("jobs_per_claim=%.2f\n", res.claimBatch)
	fmt.Printf("events_per_event_claim=%.2f\n", res.eventBatch)
	fmt.Printf("deadlocks_retried=%d\n", retried)
	// Where the time goes: the baseline is one statement per commit.
	fmt.Printf("baseline_statements_per_commit=1\n")
	fmt.Printf("statements_per_lifecycle=%.1f\n", res.statementsPerLifecycle)
	fmt.Printf("round_trips_per_lifecycle=%.1f\n", res.roundTripsPerLifecycle)
	// CPU per lifecycle, this process (store, simulated nodes, enqueuers)
	// and the server: on a CPU-bound machine, what sets the rate.
	fmt.Printf("bench_cpu_ms_per_lifecycle=%.2f\n", res.benchCPUMs)
	if serverCPU {
		fmt.Printf("server_cpu_ms_per_lifecycle=%.2f\n", res.serverCPUMs)
	}
}

// serverStatements is how many statements (BEGIN and COMMIT included) this
// process has sent; the server's global counter would also count other
// clients of a shared server.
func serverStatements(context.Context, *sql.DB) int64 { return statementsSent.Load() }

// commitRate is the baseline: conns goroutines each committing single-row
// autocommit inserts for d.
func commitRate(ctx context.Context, db *sql.DB, conns int, d time.Duration) (float64, error) {
	if _, err := db.ExecContext(ctx, `CREATE TABLE bench_commit (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB`); err != nil {
		return 0, err
	}
	var n atomic.Int64
	var firstErr error
	var once sync.Once
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if _, err := db.ExecContext(ctx, `INSERT INTO bench_commit (v) VALUES (?)`, i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(n.Load()) / d.Seconds(), firstErr
}

func setupFleet(ctx context.Context, db *sql.DB, st *store.Store, nodes, slots, groups int) (int64, []store.Session, error) {
	in, out := "1 2\n", "3\n"
	var cases []manifest.Case
	for _, c := range []string{in, out} {
		sum := sha256.Sum256([]byte(c))
		if err := st.Manifests().RegisterArtifact(ctx, hex.EncodeToString(sum[:]), int64(len(c))); err != nil {
			return 0, nil, err
		}
	}
	si, so := sha256.Sum256([]byte(in)), sha256.Sum256([]byte(out))
	cases = append(cases, manifest.Case{CaseID: "1", InputSha256: hex.EncodeToString(si[:]), InputSize: int64(len(in)),
		OutputSha256: hex.EncodeToString(so[:]), OutputSize: int64(len(out)), Weight: 100})
	pm, err := st.Manifests().PublishManifest(ctx, manifest.Manifest{Kind: manifest.KindCode, Limits: manifest.Limits{TimeMs: 1000, MemoryMb: 256, OutputKb: 1024}, Checker: manifest.Checker{Type: "tolerant"}, Cases: cases})
	if err != nil {
		return 0, nil, err
	}
	var gs []store.HostGroup
	for i := range groups {
		g, err := st.Nodes().CreateHostGroup(ctx, fmt.Sprintf("bench-host-%d", i), nodes*slots, "bench")
		if err != nil {
			return 0, nil, err
		}
		gs = append(gs, g)
	}
	var sessions []store.Session
	for i := range nodes {
		n, code, err := st.Nodes().CreateNode(ctx, store.NodeSpec{Name: fmt.Sprintf("bench-%d", i), Pool: string(machineapi.PoolCpp), HostGroupID: gs[i%groups].ID, Slots: slots}, "bench")
		if err != nil {
			return 0, nil, err
		}
		j, err := st.Credentials().Join(ctx, code.Code)
		if err != nil {
			return 0, nil, err
		}
		s, err := st.Credentials().OpenSession(ctx, j.Credential, fmt.Sprintf("boot-%d", i))
		if err != nil {
			return 0, nil, err
		}
		// The bench skips the self-check flow (it is tested elsewhere) and
		// enables the nodes directly.
		if err := enableNode(ctx, db, n.ID); err != nil {
			return 0, nil, err
		}
		sessions = append(sessions, s)
	}
	return pm.ID, sessions, nil
}

type lifecycleResult struct {
	perSec             float64
	claimP50, claimP99 float64
	enqueueAvgMs       float64
	completeAvgMs      float64
	emptyClaims        int64
	// statementsPerLifecycle counts every statement the server received
	// (BEGIN and COMMIT included) per acknowledged lifecycle.
	statementsPerLifecycle float64
	// roundTripsPerLifecycle counts requests (a store script is one).
	roundTripsPerLifecycle float64
	// CPU milliseconds per lifecycle over the window: this process, and the
	// server when its pid is known.
	benchCPUMs, serverCPUMs float64
	// Mean jobs per claim that took work, events per event claim.
	claimBatch, eventBatch float64
}

// replica is one control replica of the bench: its store and long-poll hub.
type replica struct {
	st  *store.Store
	hub *longpoll.Hub
}

// lifecycles runs the workload over reps for d and measures it: enqueuers
// keep a backlog, every session's node claims, renews and posts results as
// kece-node does, and one consumer claims and acknowledges the settlement
// events; a lifecycle counts once its event is acknowledged.
func lifecycles(ctx context.Context, reps []replica, db *sql.DB, manID int64, sessions []store.Session, slots, enqueuers, enqueueBatch int, startReport, cycle bool, d time.Duration, cw cpuWatch) (lifecycleResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &lifecycleRun{ctx: ctx, cancel: cancel, manID: manID, slots: slots, enqueueBatch: enqueueBatch,
		startReport: startReport, cycle: cycle, backlog: int64(len(sessions) * slots * 4)}
	for e := range enqueuers {
		st := reps[e%len(reps)].st
		r.wg.Go(func() { r.enqueue(st) })
	}
	for i, s := range sessions {
		rep := reps[i%len(reps)]
		r.wg.Go(func() { r.node(rep, s.NodeSession) })
	}
	r.wg.Go(func() { r.consume(reps[0].st) })
	return r.measure(db, d, cw)
}

// lifecycleRun is one run of the workload: its goroutines and counters.
type lifecycleRun struct {
	ctx                 context.Context
	cancel              context.CancelFunc
	manID               int64
	slots, enqueueBatch int
	startReport, cycle  bool
	// backlog is how many queued jobs the enqueuers keep at most.
	backlog int64

	wg       sync.WaitGroup
	errMu    sync.Mutex
	firstErr error
	latMu    sync.Mutex
	claimLat []float64

	seq, acked, queued atomic.Int64
	enqNs, enqN        atomic.Int64
	compNs, compN      atomic.Int64
	idleN              atomic.Int64
	claimN             atomic.Int64 // claims that took work
	claimedN           atomic.Int64 // jobs they took
	evBatchN           atomic.Int64 // event claims that took events
}

// benchResult is every job's verdict.
var benchResult = store.Result{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{Status: "AC", Score: 100, MaxScore: 100,
	Cases: []store.CaseResult{{CaseID: "1", Status: "AC", Score: 100, TimeMs: 1}}}}

// fail records the run's first error and stops it.
func (r *lifecycleRun) fail(err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	r.errMu.Lock()
	if r.firstErr == nil {
		r.firstErr = err
	}
	r.errMu.Unlock()
	r.cancel()
}

// enqueue keeps the backlog filled, one request (of enqueueBatch jobs) at a time.
func (r *lifecycleRun) enqueue(st *store.Store) {
	for r.ctx.Err() == nil {
		if r.queued.Load() > r.backlog {
			time.Sleep(200 * time.Microsecond)
			continue
		}
		reqs := make([]store.EnqueueRequest, r.enqueueBatch)
		for i := range reqs {
			reqs[i] = store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: fmt.Sprint(r.seq.Add(1)),
				Language: "cpp17", Source: "int main(){}", ManifestID: r.manID}
		}
		t0 := time.Now()
		var err error
		if r.enqueueBatch == 1 {
			_, err = st.Jobs().Enqueue(r.ctx, reqs[0])
		} else {
			_, err = st.Jobs().EnqueueMany(r.ctx, reqs)
		}
		r.enqNs.Add(int64(time.Since(t0)))
		r.enqN.Add(1)
		if err != nil {
			r.fail(err)
			return
		}
		r.queued.Add(int64(r.enqueueBatch))
	}
}

// node runs one node's slots concurrently, like a real node: one claim
// loop asking for the free slots, and one goroutine per leased job that
// posts its result (runJob).
func (r *lifecycleRun) node(rep replica, sess store.NodeSession) {
	ctx, st := r.ctx, rep.st
	var lat []float64
	defer func() { r.latMu.Lock(); r.claimLat = append(r.claimLat, lat...); r.latMu.Unlock() }()
	free := make(chan struct{}, r.slots)
	for range r.slots {
		free <- struct{}{}
	}
	var jobs sync.WaitGroup
	defer jobs.Wait()
	for ctx.Err() == nil {
		// Wait for at least one free slot, then take all free ones.
		select {
		case <-free:
		case <-ctx.Done():
			return
		}
		n := 1
	drain:
		for n < r.slots {
			select {
			case <-free:
				n++
			default:
				break drain
			}
		}
		t0 := time.Now()
		// Watch before claiming, so a wake-up between the claim and
		// the wait is not missed (as the claim long-poll does).
		wake := rep.hub.Watch(string(machineapi.PoolCpp))
		got, err := st.Leases().Claim(ctx, sess, n)
		if err != nil {
			rep.hub.Done(wake)
			r.fail(err)
			return
		}
		lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
		for range n - len(got) {
			free <- struct{}{}
		}
		if len(got) == 0 {
			r.idleN.Add(1)
			// The long-poll, as the claim handler waits: until the
			// hub wakes it (new work committed here, or another
			// replica's seen by the hub's signal poll), else a
			// periodic retry (~2 s there). Re-claiming at every
			// signal-poll tick instead would cost each idle node a
			// read every 10 ms, which no real node does.
			select {
			case <-wake:
			case <-time.After(2 * time.Second):
			case <-ctx.Done():
			}
			rep.hub.Done(wake)
			continue
		}
		rep.hub.Done(wake)
		r.claimed(len(got))
		// kece-node reports a job's start in an early renew only
		// when the job still judges after its phase-report delay;
		// a job that ends sooner says so with its result. With
		// -start-report always, a node renews all of a claim's
		// leases in one call before judging any.
		if r.startReport {
			items := make([]store.RenewItem, len(got))
			for i, j := range got {
				items[i] = store.RenewItem{JobID: j.JobID, LeaseEpoch: j.LeaseEpoch, ProgressSeq: 1, Phase: "JUDGING", CasesDone: 1, CasesTotal: 1}
			}
			if _, err := st.Leases().Renew(ctx, sess, items); err != nil {
				r.fail(err)
				return
			}
		}
		for _, j := range got {
			jobs.Go(func() {
				defer func() { free <- struct{}{} }()
				r.runJob(st, sess, j)
			})
		}
	}
}

func (r *lifecycleRun) claimed(n int) {
	r.claimN.Add(1)
	r.claimedN.Add(int64(n))
	r.queued.Add(-int64(n))
}

// runJob posts a leased job's result; with -protocol cycle the result
// carries a claim for its own slot (CompleteClaim), as kece-node does, and
// the job it gets runs in the same slot.
func (r *lifecycleRun) runJob(st *store.Store, sess store.NodeSession, j store.ClaimedJob) {
	for {
		t0 := time.Now()
		got, err := r.post(st, sess, j)
		if err != nil {
			r.fail(err)
			return
		}
		r.compNs.Add(int64(time.Since(t0)))
		r.compN.Add(1)
		if len(got) == 0 {
			return
		}
		r.claimed(len(got))
		j = got[0]
	}
}

func (r *lifecycleRun) post(st *store.Store, sess store.NodeSession, j store.ClaimedJob) ([]store.ClaimedJob, error) {
	if !r.cycle {
		_, err := st.Leases().Complete(r.ctx, sess, j.JobID, j.LeaseEpoch, benchResult)
		return nil, err
	}
	outs, next, err := st.Leases().CompleteClaim(r.ctx, sess, []store.CycleResult{{JobID: j.JobID, LeaseEpoch: j.LeaseEpoch, Result: benchResult}}, 1, "")
	if err != nil {
		return nil, err
	}
	return next, outs[0].Err
}

// consume claims and acknowledges settlement events, as a business
// consumer does; each acknowledged event is a finished lifecycle.
func (r *lifecycleRun) consume(st *store.Store) {
	for r.ctx.Err() == nil {
		evs, err := st.Events().ClaimEvents(r.ctx, store.EventScope{}, "bench", 100, time.Minute)
		if err != nil {
			r.fail(err)
			return
		}
		if len(evs) == 0 {
			// A consumer polling an empty outbox pauses briefly (River's
			// fetch cooldown in the comparison run is 5 ms).
			time.Sleep(5 * time.Millisecond)
			continue
		}
		r.evBatchN.Add(1)
		ids := make([]int64, len(evs))
		for i, e := range evs {
			ids[i] = e.ID
		}
		n, err := st.Events().AckEvents(r.ctx, store.EventScope{}, "bench", ids)
		if err != nil {
			r.fail(err)
			return
		}
		r.acked.Add(int64(n))
	}
}

// measure warms up, then counts acknowledged lifecycles over d, stops the
// run and computes its figures.
func (r *lifecycleRun) measure(db *sql.DB, d time.Duration, cw cpuWatch) (lifecycleResult, error) {
	ctx := r.ctx
	time.Sleep(time.Second)
	start := r.acked.Load()
	q0, rt0 := serverStatements(ctx, db), roundTrips.Load()
	stopCPU, err := cw.start()
	if err != nil {
		r.cancel()
		r.wg.Wait()
		return lifecycleResult{}, err
	}
	t0 := time.Now()
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	n := r.acked.Load() - start
	el := time.Since(t0)
	q1, rt1 := serverStatements(ctx, db), roundTrips.Load()
	benchCPU, serverCPU := stopCPU()
	r.cancel()
	r.wg.Wait()
	if r.firstErr != nil {
		return lifecycleResult{}, r.firstErr
	}
	claimLat := r.claimLat
	slices.Sort(claimLat)
	pct := func(p float64) float64 {
		if len(claimLat) == 0 {
			return 0
		}
		return claimLat[min(len(claimLat)-1, int(p*float64(len(claimLat))))]
	}
	avg := func(ns, n int64) float64 { return float64(ns) / float64(max(n, 1)) / 1e6 }
	per := func(v float64) float64 { return v / float64(max(n, 1)) }
	return lifecycleResult{perSec: float64(n) / el.Seconds(), claimP50: pct(0.50), claimP99: pct(0.99),
		enqueueAvgMs: avg(r.enqNs.Load(), r.enqN.Load()), completeAvgMs: avg(r.compNs.Load(), r.compN.Load()),
		emptyClaims: r.idleN.Load(), statementsPerLifecycle: per(float64(q1 - q0)),
		roundTripsPerLifecycle: per(float64(rt1 - rt0)),
		claimBatch:             float64(r.claimedN.Load()) / float64(max(r.claimN.Load(), 1)), eventBatch: float64(r.acked.Load()) / float64(max(r.evBatchN.Load(), 1)),
		benchCPUMs: per(benchCPU.Seconds() * 1000), serverCPUMs: per(serverCPU.Seconds() * 1000)}, nil
}
