package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"github.com/kece-oj/kece/cmd/internal/settings"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/longpoll"
	controlreplica "github.com/kece-oj/kece/control/replica"
	"github.com/kece-oj/kece/control/store"
)

// Pickup targets (issues 3 and 14): p95 from enqueue to claim response.
const (
	pickupSameTargetMs  = 10
	pickupCrossTargetMs = 25
)

// runPickup measures how fast a parked claim long-poll picks up new work: a
// node waits on replica A; a business client enqueues through the HTTP API
// on A (same replica: in-process wake-up) or on B (cross replica: A's pool
// signal poll). Latency runs from the enqueue response to the claim
// response. Baselines in the same run: the claim round trip when work is
// already queued (the floor), and the signal poll interval (the expected
// cross-replica cost, about half of it on average).
func runPickup(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("pickup", flag.ContinueOnError)
	samples := fs.Int("samples", 100, "wake-ups measured per mode")
	park := fs.Duration("park", 20*time.Millisecond, "least pause before each enqueue so the claim is parked (plus a random part of -poll)")
	poll := fs.Duration("poll", longpoll.SignalPollIntervalDefault, "cross-replica signal poll interval")
	dsn := fs.String("dsn", "", "MySQL server DSN without database (default $KECE_BENCH_MYSQL_DSN or the private MariaDB)")
	if err := settings.ParseWithEnv(fs, "KECE_BENCH_PICKUP_", args, os.Getenv); err != nil {
		return err
	}
	if *samples < 1 {
		return errors.New("samples must be positive")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	env, err := startPickup(ctx, *dsn, *poll)
	defer env.close()
	if err != nil {
		return err
	}
	p, bizA, bizB, db := env.p, env.bizA, env.bizB, env.db
	floor, err := p.readyClaims(ctx, bizA, *samples)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	same, err := p.wakeups(ctx, bizA, "same", *samples, *park, *poll)
	if err != nil {
		return fmt.Errorf("same replica: %w", err)
	}
	cross, err := p.wakeups(ctx, bizB, "cross", *samples, *park, *poll)
	if err != nil {
		return fmt.Errorf("cross replica: %w", err)
	}
	// What the fast cross-replica poll costs the database: the signal
	// query's latency with the backlog of this run, and the most queries a
	// replica sends while a claim waits (one per interval).
	sig, err := signalCost(ctx, p.store, 200)
	if err != nil {
		return fmt.Errorf("signal query: %w", err)
	}
	printPickup(db, *samples, *park, *poll, sig, floor, same, cross)
	return nil
}

// pickupEnv is the pickup run's two replicas on one fresh database, its
// node and business clients; close undoes what was started, last first.
type pickupEnv struct {
	p          *pickup
	bizA, bizB *businessapi.ClientWithResponses
	db         *sql.DB
	closers    []func()
}

func (e *pickupEnv) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

// startPickup starts replicas A and B on one database, a node with a
// session on A and a business client of each replica.
func startPickup(ctx context.Context, dsn string, poll time.Duration) (*pickupEnv, error) {
	env := &pickupEnv{}
	db, dbDSN, drop, err := freshDatabase(ctx, dsn, 16)
	if err != nil {
		return env, err
	}
	env.closers = append(env.closers, drop)
	dbB, err := sql.Open("mysql", dbDSN)
	if err != nil {
		return env, err
	}
	env.closers = append(env.closers, func() { dbB.Close() })
	dir, err := os.MkdirTemp("", "kece-bench-pickup-")
	if err != nil {
		return env, err
	}
	env.closers = append(env.closers, func() { os.RemoveAll(dir) })

	arts, err := artifact.OpenStore(ctx, artifact.StoreConfig{Root: dir})
	if err != nil {
		return env, err
	}
	// The bench drives its node by hand and sends no heartbeats: a heartbeat
	// TTL of an hour keeps the reaper from taking its leases as a silent
	// node's (what is measured here is pickup, not failure detection).
	stA, err := store.New(db, store.Config{HeartbeatTTL: time.Hour})
	if err != nil {
		return env, err
	}
	cfg := controlreplica.Config{Store: store.Config{HeartbeatTTL: time.Hour}, SignalPollInterval: poll}
	urlA, stopA, err := serveReplica(ctx, cfg, db, arts)
	if err != nil {
		return env, err
	}
	env.closers = append(env.closers, stopA)
	urlB, stopB, err := serveReplica(ctx, cfg, dbB, arts)
	if err != nil {
		return env, err
	}
	env.closers = append(env.closers, stopB)

	manID, sessions, err := setupFleet(ctx, db, stA, 1, 4, 1)
	if err != nil {
		return env, err
	}
	token, err := stA.IssueToken(ctx, benchToken("bench-pickup"))
	if err != nil {
		return env, err
	}
	bearer := func(tok string) func(context.Context, *http.Request) error {
		return func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+tok)
			return nil
		}
	}
	node, err := machineapi.NewClientWithResponses(urlA, machineapi.WithRequestEditorFn(bearer(sessions[0].Token)))
	if err != nil {
		return env, err
	}
	bizA, err := businessapi.NewClientWithResponses(urlA, businessapi.WithRequestEditorFn(bearer(token)))
	if err != nil {
		return env, err
	}
	bizB, err := businessapi.NewClientWithResponses(urlB, businessapi.WithRequestEditorFn(bearer(token)))
	if err != nil {
		return env, err
	}
	env.p = &pickup{node: node, store: stA, manID: strconv.FormatInt(manID, 10)}
	env.bizA, env.bizB, env.db = bizA, bizB, db
	return env, nil
}

// printPickup writes the run's figures with their baselines and targets.
func printPickup(db *sql.DB, samples int, park, poll time.Duration, sig, floor []time.Duration, same, cross wakeResult) {
	ctx := context.Background()
	var durable string
	_ = db.QueryRowContext(ctx, `SELECT @@innodb_flush_log_at_trx_commit`).Scan(&durable)
	fmt.Printf("innodb_flush_log_at_trx_commit=%s\n", durable)
	if la, err := os.ReadFile("/proc/loadavg"); err == nil && len(strings.Fields(string(la))) > 0 {
		// The pickup floor is one claim transaction; a busy machine moves it.
		fmt.Printf("loadavg_1m=%s cpus=%d\n", strings.Fields(string(la))[0], runtime.NumCPU())
	}
	fmt.Printf("samples=%d park_ms=%d\n", samples, park.Milliseconds())
	fmt.Printf("baseline_signal_poll_ms=%d\n", poll.Milliseconds())
	fmt.Printf("signal_query_p50_ms=%.3f\n", pickupMs(pickupPct(sig, 50)))
	fmt.Printf("signal_query_p95_ms=%.3f\n", pickupMs(pickupPct(sig, 95)))
	fmt.Printf("signal_queries_per_s_per_waiting_replica=%.0f\n", float64(time.Second)/float64(poll))
	fmt.Printf("baseline_ready_claim_p50_ms=%.2f\n", pickupMs(pickupPct(floor, 50)))
	fmt.Printf("baseline_ready_claim_p95_ms=%.2f\n", pickupMs(pickupPct(floor, 95)))
	for _, m := range []struct {
		name   string
		r      wakeResult
		target float64
	}{{"same_replica", same, pickupSameTargetMs}, {"cross_replica", cross, pickupCrossTargetMs}} {
		p95 := pickupMs(pickupPct(m.r.latency, 95))
		fmt.Printf("%s_pickup_p50_ms=%.2f\n", m.name, pickupMs(pickupPct(m.r.latency, 50)))
		fmt.Printf("%s_pickup_p95_ms=%.2f\n", m.name, p95)
		fmt.Printf("%s_pickup_max_ms=%.2f\n", m.name, pickupMs(slices.Max(m.r.latency)))
		fmt.Printf("%s_enqueue_p50_ms=%.2f\n", m.name, pickupMs(pickupPct(m.r.enqueue, 50)))
		fmt.Printf("%s_claimed_before_enqueue_returned=%d\n", m.name, m.r.early)
		fmt.Printf("%s_target_p95_ms=%.0f\n", m.name, m.target)
		fmt.Printf("%s_target_met=%t\n", m.name, p95 <= m.target)
	}
}

// serveReplica runs one control replica on a loopback port.
func serveReplica(ctx context.Context, cfg controlreplica.Config, db *sql.DB, arts *artifact.Store) (string, func(), error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rep, err := controlreplica.New(cfg, db, arts, log)
	if err != nil {
		return "", nil, err
	}
	srv, err := httpapi.New(httpapi.Config{}, rep.HTTPDeps(), log)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	hs := httpapi.NewHTTPServer(srv.Handler())
	runDone, serveDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(runDone); _ = rep.Run(ctx) }()
	go func() { defer close(serveDone); _ = hs.Serve(ln) }()
	stop := func() {
		cancel()
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = hs.Shutdown(sctx)
		<-serveDone
		<-runDone
	}
	return "http://" + ln.Addr().String(), stop, nil
}

type pickup struct {
	node  *machineapi.ClientWithResponses
	store *store.Store
	manID string
	seq   int
}

type wakeResult struct {
	latency []time.Duration // enqueue response → claim response (0 if the claim answered first)
	enqueue []time.Duration // enqueue round trip
	early   int             // claims answered before the enqueue response arrived
}

func (p *pickup) enqueue(ctx context.Context, biz *businessapi.ClientWithResponses) (string, error) {
	p.seq++
	r, err := biz.EnqueueSubmissionWithResponse(ctx, nil, businessapi.SubmissionCreate{SubmissionType: "BENCH",
		SubmissionId: fmt.Sprintf("p-%d", p.seq), Language: "cpp17", Source: "int main(){}", ManifestId: p.manID})
	if err != nil {
		return "", err
	}
	if r.JSON202 == nil {
		return "", fmt.Errorf("enqueue: %d %s", r.StatusCode(), r.Body)
	}
	return r.JSON202.JobId, nil
}

// release cancels the claimed job so the node's slot is free again.
func (p *pickup) release(ctx context.Context, seq int) error {
	_, err := p.store.Cancel(ctx, "BENCH", fmt.Sprintf("p-%d", seq), "bench", "pickup sample done")
	return err
}

func (p *pickup) claim(ctx context.Context, waitMs int64) ([]machineapi.ClaimedJob, error) {
	r, err := p.node.ClaimJobsWithResponse(ctx, machineapi.ClaimRequest{FreeSlots: 1, WaitMs: waitMs})
	if err != nil {
		return nil, err
	}
	if r.JSON200 == nil {
		return nil, fmt.Errorf("claim: %d %s", r.StatusCode(), r.Body)
	}
	return r.JSON200.Jobs, nil
}

// readyClaims is the floor: the claim round trip when a job is already queued.
func (p *pickup) readyClaims(ctx context.Context, biz *businessapi.ClientWithResponses, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for range n {
		id, err := p.enqueue(ctx, biz)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		jobs, err := p.claim(ctx, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
		if len(jobs) != 1 || jobs[0].JobId != id {
			return nil, fmt.Errorf("ready claim returned %d jobs", len(jobs))
		}
		if err := p.release(ctx, p.seq); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// wakeups parks a claim, then enqueues. The pause before each enqueue is
// park plus a random part of the poll interval, so enqueues fall at every
// phase of the signal poller's ticker (a fixed pause would lock onto one).
func (p *pickup) wakeups(ctx context.Context, biz *businessapi.ClientWithResponses, mode string, n int, park, poll time.Duration) (wakeResult, error) {
	var res wakeResult
	type claimed struct {
		jobs []machineapi.ClaimedJob
		at   time.Time
		err  error
	}
	for range n {
		ch := make(chan claimed, 1)
		go func() {
			jobs, err := p.claim(ctx, 10_000)
			ch <- claimed{jobs, time.Now(), err}
		}()
		t := time.NewTimer(park + rand.N(poll))
		select {
		case <-ctx.Done():
			t.Stop()
			return res, ctx.Err()
		case <-t.C:
		}
		start := time.Now()
		id, err := p.enqueue(ctx, biz)
		if err != nil {
			return res, err
		}
		returned := time.Now()
		c := <-ch
		if c.err != nil {
			return res, c.err
		}
		if len(c.jobs) != 1 || c.jobs[0].JobId != id {
			return res, fmt.Errorf("%s: the parked claim returned %d jobs, not the new one", mode, len(c.jobs))
		}
		d := c.at.Sub(returned)
		if d < 0 {
			res.early++
			d = 0
		}
		res.latency = append(res.latency, d)
		res.enqueue = append(res.enqueue, returned.Sub(start))
		if err := p.release(ctx, p.seq); err != nil {
			return res, err
		}
	}
	return res, nil
}

// signalCost times n reads of the pool signals (what each replica's poller
// runs once per interval while a claim waits).
func signalCost(ctx context.Context, st *store.Store, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if _, err := st.PoolSignals(ctx); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

func pickupPct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p+99)/100 - 1
	return s[max(i, 0)]
}

func pickupMs(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
