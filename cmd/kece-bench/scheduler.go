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
	dsn := fs.String("dsn", "", "MySQL server DSN without database (default $KECE_BENCH_MYSQL_DSN or the private MariaDB)")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the measured window to this file")
	replicas := fs.Int("replicas", 1, "control replicas: stores with their own connection pool, batchers, caches and long-poll hub (polling the pool signal as kece-control does) on one database; nodes and enqueuers are spread over them")
	protocol := fs.String("protocol", "cycle", "how a node posts results: cycle (with its next claim, one call: CompleteClaim) or separate (each result its own call beside the claim loop)")
	startReport := fs.String("start-report", "node", "when a leased job reports its start with a renew: node (as kece-node: only a job still judging after the phase-report delay, 100 ms; the bench's jobs take no time, so none does) or always (one renew for all of a claim's jobs before any is judged)")
	serverPID := fs.Int("server-pid", 0, "pid of a local database server: its CPU over the measured window is reported (scripts/bench-scheduler.sh passes it)")
	if err := settings.ParseWithEnv(fs, "KECE_BENCH_SCHEDULER_", args, os.Getenv); err != nil {
		return err
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
	bound := rate / 3

	if *replicas < 1 || *replicas > *nodes {
		return fmt.Errorf("-replicas must be 1..nodes")
	}
	runCtx, stopReplicas := context.WithCancel(ctx)
	defer stopReplicas()
	var reps []replica
	for i := range *replicas {
		rdb := db
		if i > 0 {
			if rdb, err = countedPool(dbDSN, conns); err != nil {
				return err
			}
			defer rdb.Close()
		}
		st, err := store.New(rdb, store.Config{LeaseTTL: time.Minute, BatchParallel: *batchParallel, EnqueueParallel: *enqueueParallel, BatchLinger: *batchLinger})
		if err != nil {
			return err
		}
		// Nodes wait for work the way the claim handler does: on their
		// replica's long-poll hub, told after each commit on that replica
		// that made work ready, and by the poll of the pool signal for work
		// other replicas committed.
		hub := longpoll.New()
		st = st.WithNotifier(hub)
		// A failed signal read fails the run's next store call too; the
		// bench reports that one.
		go hub.Run(runCtx, st, longpoll.SignalPollIntervalDefault, func(error) {})
		reps = append(reps, replica{st: st, hub: hub})
	}
	st := reps[0].st
	if *groups < 1 || *groups > *nodes {
		return fmt.Errorf("-groups must be 1..nodes")
	}
	manID, sessions, err := setupFleet(ctx, db, st, *nodes, *slots, *groups)
	if err != nil {
		return err
	}
	if *enqueueBatch < 1 || *enqueueBatch > store.EnqueueManyMax {
		return fmt.Errorf("-enqueue-batch must be 1..%d", store.EnqueueManyMax)
	}
	if *startReport != "node" && *startReport != "always" {
		return fmt.Errorf("-start-report must be node or always, not %q", *startReport)
	}
	if *protocol != "cycle" && *protocol != "separate" {
		return fmt.Errorf("-protocol must be cycle or separate, not %q", *protocol)
	}
	res, err := lifecycles(ctx, reps, db, manID, sessions, *slots, *enqueuers, *enqueueBatch, *startReport == "always", *protocol == "cycle", *dur, cpuWatch{profile: *cpuProfile, serverPID: *serverPID})
	if err != nil {
		return err
	}
	fmt.Printf("innodb_flush_log_at_trx_commit=%s\n", durable)
	fmt.Printf("replicas=%d\n", *replicas)
	fmt.Printf("protocol=%s start_report=%s\n", *protocol, *startReport)
	fmt.Printf("connections=%d nodes=%d host_groups=%d slots=%d enqueuers=%d enqueue_batch=%d duration_s=%.0f batch_parallel=%d enqueue_parallel=%d batch_linger_ms=%g\n", conns, *nodes, *groups, *slots, *enqueuers, *enqueueBatch, dur.Seconds(), *batchParallel, *enqueueParallel, float64(batchLinger.Microseconds())/1000)
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
	var retried int64
	for _, r := range reps {
		retried += r.st.RetriedTransactions()
	}
	fmt.Printf("deadlocks_retried=%d\n", retried)
	// Where the time goes: the baseline is one statement per commit.
	fmt.Printf("baseline_statements_per_commit=1\n")
	fmt.Printf("statements_per_lifecycle=%.1f\n", res.statementsPerLifecycle)
	fmt.Printf("round_trips_per_lifecycle=%.1f\n", res.roundTripsPerLifecycle)
	// CPU per lifecycle, this process (store, simulated nodes, enqueuers)
	// and the server: on a CPU-bound machine, what sets the rate.
	fmt.Printf("bench_cpu_ms_per_lifecycle=%.2f\n", res.benchCPUMs)
	if *serverPID > 0 {
		fmt.Printf("server_cpu_ms_per_lifecycle=%.2f\n", res.serverCPUMs)
	}
	return nil
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
		if err := st.RegisterArtifact(ctx, hex.EncodeToString(sum[:]), int64(len(c))); err != nil {
			return 0, nil, err
		}
	}
	si, so := sha256.Sum256([]byte(in)), sha256.Sum256([]byte(out))
	cases = append(cases, manifest.Case{CaseID: "1", InputSha256: hex.EncodeToString(si[:]), InputSize: int64(len(in)),
		OutputSha256: hex.EncodeToString(so[:]), OutputSize: int64(len(out)), Weight: 100})
	pm, err := st.PublishManifest(ctx, manifest.Manifest{Kind: manifest.KindCode, Limits: manifest.Limits{TimeMs: 1000, MemoryMb: 256, OutputKb: 1024}, Checker: manifest.Checker{Type: "tolerant"}, Cases: cases})
	if err != nil {
		return 0, nil, err
	}
	var gs []store.HostGroup
	for i := range groups {
		g, err := st.CreateHostGroup(ctx, fmt.Sprintf("bench-host-%d", i), nodes*slots, "bench")
		if err != nil {
			return 0, nil, err
		}
		gs = append(gs, g)
	}
	var sessions []store.Session
	for i := range nodes {
		n, code, err := st.CreateNode(ctx, store.NodeSpec{Name: fmt.Sprintf("bench-%d", i), Pool: string(machineapi.PoolCpp), HostGroupID: gs[i%groups].ID, Slots: slots}, "bench")
		if err != nil {
			return 0, nil, err
		}
		j, err := st.Join(ctx, code.Code)
		if err != nil {
			return 0, nil, err
		}
		s, err := st.OpenSession(ctx, j.Credential, fmt.Sprintf("boot-%d", i))
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

func lifecycles(ctx context.Context, reps []replica, db *sql.DB, manID int64, sessions []store.Session, slots, enqueuers, enqueueBatch int, startReport, cycle bool, d time.Duration, cw cpuWatch) (lifecycleResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
		seq      atomic.Int64
		acked    atomic.Int64
		queued   atomic.Int64
		latMu    sync.Mutex
		claimLat []float64
		enqNs    atomic.Int64
		enqN     atomic.Int64
		compNs   atomic.Int64
		compN    atomic.Int64
		idleN    atomic.Int64
		claimN   atomic.Int64 // claims that took work
		claimedN atomic.Int64 // jobs they took
		evBatchN atomic.Int64 // event claims that took events
	)
	fail := func(err error) {
		if err == nil || errors.Is(err, context.Canceled) {
			return
		}
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
		cancel()
	}
	backlog := int64(len(sessions) * slots * 4)
	for e := range enqueuers {
		st := reps[e%len(reps)].st
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if queued.Load() > backlog {
					time.Sleep(200 * time.Microsecond)
					continue
				}
				reqs := make([]store.EnqueueRequest, enqueueBatch)
				for i := range reqs {
					reqs[i] = store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: fmt.Sprint(seq.Add(1)),
						Language: "cpp17", Source: "int main(){}", ManifestID: manID}
				}
				t0 := time.Now()
				var err error
				if enqueueBatch == 1 {
					_, err = st.Enqueue(ctx, reqs[0])
				} else {
					_, err = st.EnqueueMany(ctx, reqs)
				}
				enqNs.Add(int64(time.Since(t0)))
				enqN.Add(1)
				if err != nil {
					fail(err)
					return
				}
				queued.Add(int64(enqueueBatch))
			}
		}()
	}
	res := store.Result{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{Status: "AC", Score: 100, MaxScore: 100,
		Cases: []store.CaseResult{{CaseID: "1", Status: "AC", Score: 100, TimeMs: 1}}}}
	// Each node runs its slots concurrently, like a real node: one claim
	// loop asking for the free slots, and one goroutine per leased job that
	// renews once and posts its result.
	// With -protocol cycle a job posts its result with a claim for its own
	// slot in one call (CompleteClaim), as kece-node does, and runs what it
	// gets in the same slot; the claim loop claims the slots left free.
	post := func(st *store.Store, sess store.NodeSession, j store.ClaimedJob) ([]store.ClaimedJob, error) {
		if !cycle {
			_, err := st.Complete(ctx, sess, j.JobID, j.LeaseEpoch, res)
			return nil, err
		}
		outs, next, err := st.CompleteClaim(ctx, sess, []store.CycleResult{{JobID: j.JobID, LeaseEpoch: j.LeaseEpoch, Result: res}}, 1, "")
		if err != nil {
			return nil, err
		}
		return next, outs[0].Err
	}
	for i, s := range sessions {
		st, hub := reps[i%len(reps)].st, reps[i%len(reps)].hub
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []float64
			defer func() { latMu.Lock(); claimLat = append(claimLat, lat...); latMu.Unlock() }()
			free := make(chan struct{}, slots)
			for range slots {
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
				for n < slots {
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
				wake := hub.Watch(string(machineapi.PoolCpp))
				got, err := st.Claim(ctx, s.NodeSession, n)
				if err != nil {
					hub.Done(wake)
					fail(err)
					return
				}
				lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
				for range n - len(got) {
					free <- struct{}{}
				}
				if len(got) == 0 {
					idleN.Add(1)
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
					hub.Done(wake)
					continue
				}
				hub.Done(wake)
				claimN.Add(1)
				claimedN.Add(int64(len(got)))
				queued.Add(-int64(len(got)))
				// kece-node reports a job's start in an early renew only
				// when the job still judges after its phase-report delay;
				// a job that ends sooner says so with its result. With
				// -start-report always, a node renews all of a claim's
				// leases in one call before judging any.
				if startReport {
					items := make([]store.RenewItem, len(got))
					for i, j := range got {
						items[i] = store.RenewItem{JobID: j.JobID, LeaseEpoch: j.LeaseEpoch, ProgressSeq: 1, Phase: "JUDGING", CasesDone: 1, CasesTotal: 1}
					}
					if _, err := st.Renew(ctx, s.NodeSession, items); err != nil {
						fail(err)
						return
					}
				}
				for _, j := range got {
					jobs.Add(1)
					go func() {
						defer jobs.Done()
						defer func() { free <- struct{}{} }()
						for {
							t0 := time.Now()
							got, err := post(st, s.NodeSession, j)
							if err != nil {
								fail(err)
								return
							}
							compNs.Add(int64(time.Since(t0)))
							compN.Add(1)
							if len(got) == 0 {
								return
							}
							claimN.Add(1)
							claimedN.Add(int64(len(got)))
							queued.Add(-int64(len(got)))
							j = got[0]
						}
					}()
				}
			}
		}()
	}
	st := reps[0].st
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			evs, err := st.ClaimEvents(ctx, store.EventScope{}, "bench", 100, time.Minute)
			if err != nil {
				fail(err)
				return
			}
			if len(evs) == 0 {
				// A consumer polling an empty outbox pauses briefly (River's
				// fetch cooldown in the comparison run is 5 ms).
				time.Sleep(5 * time.Millisecond)
				continue
			}
			evBatchN.Add(1)
			ids := make([]int64, len(evs))
			for i, e := range evs {
				ids[i] = e.ID
			}
			n, err := st.AckEvents(ctx, store.EventScope{}, "bench", ids)
			if err != nil {
				fail(err)
				return
			}
			acked.Add(int64(n))
		}
	}()
	// Warm up, then count acknowledged lifecycles over d.
	time.Sleep(time.Second)
	start := acked.Load()
	q0, rt0 := serverStatements(ctx, db), roundTrips.Load()
	stopCPU, err := cw.start()
	if err != nil {
		return lifecycleResult{}, err
	}
	t0 := time.Now()
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	n := acked.Load() - start
	el := time.Since(t0)
	q1, rt1 := serverStatements(ctx, db), roundTrips.Load()
	benchCPU, serverCPU := stopCPU()
	cancel()
	wg.Wait()
	if firstErr != nil {
		return lifecycleResult{}, firstErr
	}
	slices.Sort(claimLat)
	pct := func(p float64) float64 {
		if len(claimLat) == 0 {
			return 0
		}
		return claimLat[min(len(claimLat)-1, int(p*float64(len(claimLat))))]
	}
	avg := func(ns, n int64) float64 { return float64(ns) / float64(max(n, 1)) / 1e6 }
	return lifecycleResult{perSec: float64(n) / el.Seconds(), claimP50: pct(0.50), claimP99: pct(0.99),
		enqueueAvgMs: avg(enqNs.Load(), enqN.Load()), completeAvgMs: avg(compNs.Load(), compN.Load()),
		emptyClaims: idleN.Load(), statementsPerLifecycle: float64(q1-q0) / float64(max(n, 1)),
		roundTripsPerLifecycle: float64(rt1-rt0) / float64(max(n, 1)),
		claimBatch:             float64(claimedN.Load()) / float64(max(claimN.Load(), 1)), eventBatch: float64(acked.Load()) / float64(max(evBatchN.Load(), 1)),
		benchCPUMs: benchCPU.Seconds() * 1000 / float64(max(n, 1)), serverCPUMs: serverCPU.Seconds() * 1000 / float64(max(n, 1))}, nil
}
