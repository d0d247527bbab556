package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/contracts"

	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/telemetry"
)

// Footprint targets (issue: observability and capacity).
const (
	controlRSSTargetBytes = 150 << 20
	nodeRSSTargetBytes    = 40 << 20
	claimP95TargetFactor  = 1.5
)

// runFootprint measures memory and claim latency under a large backlog: the
// kece-control process's RSS idle and with `queued` jobs across the pools
// (enqueued through store.Enqueue, the path the business API and EnqueueTx
// use, from many goroutines), claim latency through the machine API with
// that backlog against a queue that holds only the job being claimed, and
// each pool's kece-node RSS when idle.
func runFootprint(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("footprint", flag.ContinueOnError)
	queued := fs.Int("queued", 100_000, "jobs to queue across the pools")
	poolList := fs.String("pools", "cpp,python,java,arkts,mysql", "pools to queue into and to measure an idle node of")
	claims := fs.Int("claims", 300, "claims timed per phase")
	enqueuers := fs.Int("enqueuers", 16, "goroutines enqueueing the backlog")
	idle := fs.Duration("idle", 5*time.Second, "how long processes sit idle before their RSS is read")
	dsn := fs.String("dsn", "", "control MySQL server DSN without database (default $KECE_BENCH_MYSQL_DSN or the private MariaDB)")
	judgeDSN := fs.String("judge-dsn", envOr("KECE_BENCH_JUDGE_MYSQL_DSN", "root@tcp(127.0.0.1:33062)/"), "judge MySQL admin DSN (mysql pool)")
	bin := fs.String("bin", "", "directory with kece-control, kece-node, kece-sandbox-init (default: next to kece-bench, else ./bin)")
	if err := settings.ParseWithEnv(fs, "KECE_BENCH_FOOTPRINT_", args, os.Getenv); err != nil {
		return err
	}
	pools := strings.Split(*poolList, ",")
	if *queued < 1 || *claims < 10 || *enqueuers < 1 {
		return errors.New("-queued, -claims (≥10) and -enqueuers must be positive")
	}
	f, err := startFleet(ctx, fleetConfig{bin: *bin, dsn: *dsn, judgeDSN: *judgeDSN, controlArgs: []string{"--lease-ttl", "60s"}})
	if err != nil {
		return err
	}
	defer f.stop()
	pid := f.control.cmd.Process.Pid
	manifests := map[string]int64{}
	for _, p := range pools {
		if _, ok := benchPrograms[p]; !ok {
			return fmt.Errorf("unknown pool %q", p)
		}
		var id string
		if p == string(machineapi.PoolMysql) {
			id, err = f.publishSQL(ctx)
		} else {
			id, err = f.publishAPlusB(ctx)
		}
		if err != nil {
			return err
		}
		manifests[p], _ = strconv.ParseInt(id, 10, 64)
	}
	touch := func() error { // what an idle replica still serves: a scrape and the public summary
		if _, err := telemetry.Scrape(ctx, f.url+"/metrics"); err != nil {
			return err
		}
		resp, err := http.Get(f.url + "/api/v1/system/judgers/summary")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	if err := touch(); err != nil {
		return err
	}
	sleepCtx(ctx, *idle)
	idleRSS, _, err := rss(pid)
	if err != nil {
		return err
	}

	// Each pool's node, idle: joined, heartbeating, long-polling, no work.
	nodeRSS := map[string]int64{}
	for _, p := range pools {
		if _, err := f.addNode(ctx, p, 2); err != nil {
			return err
		}
	}
	if err := f.waitReady(ctx, 2*time.Minute); err != nil {
		return err
	}
	sleepCtx(ctx, *idle)
	for _, nd := range f.nodes {
		cur, _, err := rss(nd.cmd.Process.Pid)
		if err != nil {
			return err
		}
		nodeRSS[nd.pool] = cur
	}
	for _, nd := range f.nodes {
		stopChild(nd.child)
	}
	f.nodes = nil

	// A probe node of the first code pool whose claims are timed.
	probePool := pools[0]
	probe, err := newProbeNode(ctx, f, probePool)
	if err != nil {
		return err
	}
	prog := benchPrograms[probePool]
	var seq atomic.Int64
	enqueue := func(pool string) error {
		p := benchPrograms[pool]
		_, err := f.st.Enqueue(ctx, store.EnqueueRequest{SubmissionType: "BENCH", SubmissionID: fmt.Sprintf("fp-%d", seq.Add(1)),
			Language: p.lang, Source: p.source, ManifestID: manifests[pool]})
		return err
	}
	// Baseline: the queue holds only the job about to be claimed.
	var emptyMs, nothingMs []float64
	for range *claims {
		if err := enqueue(probePool); err != nil {
			return err
		}
		d, err := probe.claimAndFinish(ctx)
		if err != nil {
			return err
		}
		emptyMs = append(emptyMs, d)
	}
	// And claims that find nothing at all (no wait).
	for range *claims {
		d, got, err := probe.claim(ctx)
		if err != nil {
			return err
		}
		if len(got) > 0 {
			return errors.New("a claim on an empty queue got a job")
		}
		nothingMs = append(nothingMs, d)
	}
	_ = prog

	// The backlog, through the store's own enqueue path, spread over the pools.
	fillStart := time.Now()
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, *enqueuers)
	for range *enqueuers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(*queued) || ctx.Err() != nil {
					return
				}
				if err := enqueue(pools[int(i)%len(pools)]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("enqueue backlog: %w", err)
	}
	fill := time.Since(fillStart)
	depth, err := queuedJobs(ctx, f.db)
	if err != nil {
		return err
	}

	// With the backlog: the replica serves scrapes and summaries over it, and
	// the probe's claims are timed again.
	var scrapeMs, summaryMs []float64
	for range 5 {
		t := time.Now()
		if _, err := telemetry.Scrape(ctx, f.url+"/metrics"); err != nil {
			return err
		}
		scrapeMs = append(scrapeMs, ms(time.Since(t)))
		t = time.Now()
		resp, err := http.Get(f.url + "/api/v1/system/judgers/summary")
		if err != nil {
			return err
		}
		resp.Body.Close()
		summaryMs = append(summaryMs, ms(time.Since(t)))
		sleepCtx(ctx, 5*time.Second+time.Millisecond) // past the metrics cache
	}
	var backlogMs []float64
	for range *claims {
		d, err := probe.claimAndFinish(ctx)
		if err != nil {
			return err
		}
		backlogMs = append(backlogMs, d)
	}
	sleepCtx(ctx, *idle)
	loadedRSS, peakRSS, err := rss(pid)
	if err != nil {
		return err
	}
	s, err := telemetry.Scrape(ctx, f.url+"/metrics")
	if err != nil {
		return err
	}
	var shown float64
	for _, p := range pools {
		shown += s.Value("kece_control_queue_depth", "pool", p)
	}

	slices.Sort(emptyMs)
	slices.Sort(nothingMs)
	slices.Sort(backlogMs)
	slices.Sort(scrapeMs)
	slices.Sort(summaryMs)
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	fmt.Printf("mode=real_kece_control_process pools=%s queued=%d queue_depth_db=%d queue_depth_metrics=%.0f\n", strings.Join(pools, ","), *queued, depth, shown)
	fmt.Printf("enqueue_rate_per_s=%.0f enqueuers=%d\n", float64(*queued)/fill.Seconds(), *enqueuers)
	fmt.Printf("control_rss_idle_mb=%.1f control_rss_backlog_mb=%.1f control_rss_peak_mb=%.1f control_rss_target_mb=%d within=%t\n",
		mb(idleRSS), mb(loadedRSS), mb(peakRSS), controlRSSTargetBytes>>20, peakRSS <= controlRSSTargetBytes)
	fmt.Printf("claim_empty_p50_ms=%.2f claim_empty_p95_ms=%.2f claim_nothing_p50_ms=%.2f claim_nothing_p95_ms=%.2f\n",
		pctf(emptyMs, 50), pctf(emptyMs, 95), pctf(nothingMs, 50), pctf(nothingMs, 95))
	fmt.Printf("claim_backlog_p50_ms=%.2f claim_backlog_p95_ms=%.2f claim_p95_factor=%.2f claim_p95_target_factor=%.1f within=%t\n",
		pctf(backlogMs, 50), pctf(backlogMs, 95), pctf(backlogMs, 95)/pctf(emptyMs, 95), claimP95TargetFactor,
		pctf(backlogMs, 95) <= claimP95TargetFactor*pctf(emptyMs, 95))
	fmt.Printf("metrics_scrape_backlog_p50_ms=%.1f metrics_scrape_backlog_max_ms=%.1f public_summary_backlog_p50_ms=%.1f\n",
		pctf(scrapeMs, 50), scrapeMs[len(scrapeMs)-1], pctf(summaryMs, 50))
	var worst int64
	for _, p := range pools {
		fmt.Printf("node_rss_idle_mb{pool=%s}=%.1f\n", p, mb(nodeRSS[p]))
		worst = max(worst, nodeRSS[p])
	}
	fmt.Printf("node_rss_idle_max_mb=%.1f node_rss_target_mb=%d within=%t\n", mb(worst), nodeRSSTargetBytes>>20, worst <= nodeRSSTargetBytes)
	return nil
}

// probeNode is a node the bench drives itself through the machine API, to
// time claims: each claimed job is answered at once with an AC verdict.
type probeNode struct {
	c    *machineapi.ClientWithResponses
	pool string
	// beat is when the probe last heartbeated: like any node it must keep
	// doing so, or the reaper takes its leases (heartbeat TTL).
	beat time.Time
}

// heartbeat keeps the probe alive in the control plane's eyes; it is sent
// between timed claims, never inside one.
func (p *probeNode) heartbeat(ctx context.Context) error {
	if time.Since(p.beat) < 5*time.Second {
		return nil
	}
	r, err := p.c.SendHeartbeatWithResponse(ctx, machineapi.HeartbeatRequest{RuntimeVersion: "probe", LocalSlots: 1,
		Dependencies: []machineapi.Dependency{}})
	if err != nil {
		return err
	}
	if r.JSON200 == nil {
		return fmt.Errorf("heartbeat: %d %s", r.StatusCode(), r.Body)
	}
	p.beat = time.Now()
	return nil
}

func newProbeNode(ctx context.Context, f *fleet, pool string) (*probeNode, error) {
	g, err := f.st.CreateHostGroup(ctx, "probe-host", 1, "bench")
	if err != nil {
		return nil, err
	}
	n, code, err := f.st.CreateNode(ctx, store.NodeSpec{Name: "probe", Pool: pool, HostGroupID: g.ID, Slots: 1}, "bench")
	if err != nil {
		return nil, err
	}
	if err := enableNode(ctx, f.db, n.ID); err != nil {
		return nil, err
	}
	anon, err := machineapi.NewClientWithResponses(f.url)
	if err != nil {
		return nil, err
	}
	j, err := anon.JoinNodeWithResponse(ctx, machineapi.JoinRequest{JoinCode: code.Code})
	if err != nil {
		return nil, err
	}
	if j.JSON201 == nil {
		return nil, fmt.Errorf("join: %d %s", j.StatusCode(), j.Body)
	}
	withToken := func(tok string) (*machineapi.ClientWithResponses, error) {
		return machineapi.NewClientWithResponses(f.url, machineapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+tok)
			return nil
		}))
	}
	cc, err := withToken(j.JSON201.Credential)
	if err != nil {
		return nil, err
	}
	s, err := cc.OpenSessionWithResponse(ctx, machineapi.SessionRequest{BootId: "footprint-probe", ProtocolVersion: contracts.ProtocolVersion})
	if err != nil {
		return nil, err
	}
	if s.JSON200 == nil {
		return nil, fmt.Errorf("session: %d %s", s.StatusCode(), s.Body)
	}
	c, err := withToken(s.JSON200.SessionToken)
	if err != nil {
		return nil, err
	}
	p := &probeNode{c: c, pool: pool}
	return p, p.heartbeat(ctx)
}

// claim times one claim that does not wait.
func (p *probeNode) claim(ctx context.Context) (float64, []machineapi.ClaimedJob, error) {
	if err := p.heartbeat(ctx); err != nil {
		return 0, nil, err
	}
	t := time.Now()
	r, err := p.c.ClaimJobsWithResponse(ctx, machineapi.ClaimRequest{FreeSlots: 1, WaitMs: 0})
	d := ms(time.Since(t))
	if err != nil {
		return 0, nil, err
	}
	if r.JSON200 == nil {
		return 0, nil, fmt.Errorf("claim: %d %s", r.StatusCode(), r.Body)
	}
	return d, r.JSON200.Jobs, nil
}

// claimAndFinish times a claim that must lease one job, then answers it.
func (p *probeNode) claimAndFinish(ctx context.Context) (float64, error) {
	d, jobs, err := p.claim(ctx)
	if err != nil {
		return 0, err
	}
	if len(jobs) != 1 {
		return 0, fmt.Errorf("claim leased %d jobs, want 1", len(jobs))
	}
	j := jobs[0]
	// Cases is never null on the wire (a manifest may list none).
	v := &machineapi.Verdict{Status: machineapi.VerdictStatusAC, Cases: []machineapi.CaseResult{}}
	for _, c := range j.Manifest.Cases {
		v.Cases = append(v.Cases, machineapi.CaseResult{CaseId: c.CaseId, Status: machineapi.VerdictStatusAC, Score: float64(c.Weight)})
		v.Score += float64(c.Weight)
		v.MaxScore += c.Weight
	}
	r, err := p.c.SubmitResultWithResponse(ctx, j.JobId, machineapi.ResultRequest{LeaseEpoch: j.LeaseEpoch,
		Outcome: machineapi.OutcomeVerdict, Verdict: v})
	if err != nil {
		return 0, err
	}
	if r.StatusCode() != http.StatusOK {
		return 0, fmt.Errorf("result: %d %s", r.StatusCode(), r.Body)
	}
	return d, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
