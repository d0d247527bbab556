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
	cfg, err := parseFootprint(args)
	if err != nil {
		return err
	}
	f, err := startFleet(ctx, fleetConfig{bin: cfg.bin, dsn: cfg.dsn, judgeDSN: cfg.judgeDSN, controlArgs: []string{"--lease-ttl", "60s"}})
	if err != nil {
		return err
	}
	defer f.stop()
	r := footprintReport{cfg: cfg}
	fp := &footprint{f: f, cfg: cfg, manifests: map[string]int64{}}
	if err := fp.publish(ctx); err != nil {
		return err
	}
	if r.idleRSS, err = fp.idleControlRSS(ctx); err != nil {
		return err
	}
	if r.nodeRSS, err = fp.idleNodeRSS(ctx); err != nil {
		return err
	}
	// A probe node of the first code pool whose claims are timed.
	if fp.probe, err = newProbeNode(ctx, f, cfg.pools[0]); err != nil {
		return err
	}
	if r.emptyMs, r.nothingMs, err = fp.baselineClaims(ctx); err != nil {
		return err
	}
	fillStart := time.Now()
	if err := fp.fillBacklog(ctx); err != nil {
		return fmt.Errorf("enqueue backlog: %w", err)
	}
	r.fill = time.Since(fillStart)
	if r.depth, err = queuedJobs(ctx, f.db); err != nil {
		return err
	}
	if err := fp.underBacklog(ctx, &r); err != nil {
		return err
	}
	r.print()
	return nil
}

// footprintConfig is what `kece-bench footprint` was asked for.
type footprintConfig struct {
	queued, claims, enqueuers int
	pools                     []string
	idle                      time.Duration
	dsn, judgeDSN, bin        string
}

func parseFootprint(args []string) (footprintConfig, error) {
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
		return footprintConfig{}, err
	}
	cfg := footprintConfig{queued: *queued, claims: *claims, enqueuers: *enqueuers, pools: strings.Split(*poolList, ","),
		idle: *idle, dsn: *dsn, judgeDSN: *judgeDSN, bin: *bin}
	if cfg.queued < 1 || cfg.claims < 10 || cfg.enqueuers < 1 {
		return cfg, errors.New("-queued, -claims (≥10) and -enqueuers must be positive")
	}
	for _, p := range cfg.pools {
		if _, ok := benchPrograms[p]; !ok {
			return cfg, fmt.Errorf("unknown pool %q", p)
		}
	}
	return cfg, nil
}

// footprint is one run's fleet, problems and probe node.
type footprint struct {
	f         *fleet
	cfg       footprintConfig
	manifests map[string]int64
	probe     *probeNode
	seq       atomic.Int64
}

func (fp *footprint) publish(ctx context.Context) error {
	for _, p := range fp.cfg.pools {
		var id string
		var err error
		if p == string(machineapi.PoolMysql) {
			id, err = fp.f.publishSQL(ctx)
		} else {
			id, err = fp.f.publishAPlusB(ctx)
		}
		if err != nil {
			return err
		}
		fp.manifests[p], _ = strconv.ParseInt(id, 10, 64)
	}
	return nil
}

// touch is what an idle replica still serves: a scrape and the public summary.
func (fp *footprint) touch(ctx context.Context) error {
	if _, err := telemetry.Scrape(ctx, fp.f.url+"/metrics"); err != nil {
		return err
	}
	resp, err := http.Get(fp.f.url + "/api/v1/system/judgers/summary")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

func (fp *footprint) idleControlRSS(ctx context.Context) (int64, error) {
	if err := fp.touch(ctx); err != nil {
		return 0, err
	}
	sleepCtx(ctx, fp.cfg.idle)
	cur, _, err := rss(fp.f.control.cmd.Process.Pid)
	return cur, err
}

// idleNodeRSS starts each pool's node, lets it sit idle (joined,
// heartbeating, long-polling, no work), reads its RSS and stops it.
func (fp *footprint) idleNodeRSS(ctx context.Context) (map[string]int64, error) {
	f := fp.f
	for _, p := range fp.cfg.pools {
		if _, err := f.addNode(ctx, p, 2); err != nil {
			return nil, err
		}
	}
	if err := f.waitReady(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	sleepCtx(ctx, fp.cfg.idle)
	nodeRSS := map[string]int64{}
	for _, nd := range f.nodes {
		cur, _, err := rss(nd.cmd.Process.Pid)
		if err != nil {
			return nil, err
		}
		nodeRSS[nd.pool] = cur
	}
	for _, nd := range f.nodes {
		stopChild(nd.child)
	}
	f.nodes = nil
	return nodeRSS, nil
}

// enqueue queues one submission through store.Enqueue, the path the
// business API and EnqueueTx use.
func (fp *footprint) enqueue(ctx context.Context, pool string) error {
	p := benchPrograms[pool]
	_, err := fp.f.st.Jobs().Enqueue(ctx, store.EnqueueRequest{SubmissionType: "BENCH", SubmissionID: fmt.Sprintf("fp-%d", fp.seq.Add(1)),
		Language: p.lang, Source: p.source, ManifestID: fp.manifests[pool]})
	return err
}

// baselineClaims times the probe's claims while the queue holds only the
// job about to be claimed, then claims that find nothing at all (no wait).
func (fp *footprint) baselineClaims(ctx context.Context) (emptyMs, nothingMs []float64, err error) {
	for range fp.cfg.claims {
		if err := fp.enqueue(ctx, fp.probe.pool); err != nil {
			return nil, nil, err
		}
		d, err := fp.probe.claimAndFinish(ctx)
		if err != nil {
			return nil, nil, err
		}
		emptyMs = append(emptyMs, d)
	}
	for range fp.cfg.claims {
		d, got, err := fp.probe.claim(ctx)
		if err != nil {
			return nil, nil, err
		}
		if len(got) > 0 {
			return nil, nil, errors.New("a claim on an empty queue got a job")
		}
		nothingMs = append(nothingMs, d)
	}
	return emptyMs, nothingMs, nil
}

// fillBacklog enqueues the backlog from many goroutines, spread over the pools.
func (fp *footprint) fillBacklog(ctx context.Context) error {
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, fp.cfg.enqueuers)
	for range fp.cfg.enqueuers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(fp.cfg.queued) || ctx.Err() != nil {
					return
				}
				if err := fp.enqueue(ctx, fp.cfg.pools[int(i)%len(fp.cfg.pools)]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// underBacklog times scrapes, summaries and the probe's claims with the
// backlog queued, then reads the replica's RSS and its queue-depth metric.
func (fp *footprint) underBacklog(ctx context.Context, r *footprintReport) error {
	f := fp.f
	for range 5 {
		t := time.Now()
		if _, err := telemetry.Scrape(ctx, f.url+"/metrics"); err != nil {
			return err
		}
		r.scrapeMs = append(r.scrapeMs, ms(time.Since(t)))
		t = time.Now()
		resp, err := http.Get(f.url + "/api/v1/system/judgers/summary")
		if err != nil {
			return err
		}
		resp.Body.Close()
		r.summaryMs = append(r.summaryMs, ms(time.Since(t)))
		sleepCtx(ctx, 5*time.Second+time.Millisecond) // past the metrics cache
	}
	for range fp.cfg.claims {
		d, err := fp.probe.claimAndFinish(ctx)
		if err != nil {
			return err
		}
		r.backlogMs = append(r.backlogMs, d)
	}
	sleepCtx(ctx, fp.cfg.idle)
	var err error
	if r.loadedRSS, r.peakRSS, err = rss(f.control.cmd.Process.Pid); err != nil {
		return err
	}
	s, err := telemetry.Scrape(ctx, f.url+"/metrics")
	if err != nil {
		return err
	}
	for _, p := range fp.cfg.pools {
		r.shown += s.Value("kece_control_queue_depth", "pool", p)
	}
	return nil
}

// footprintReport is the footprint run's figures.
type footprintReport struct {
	cfg                           footprintConfig
	idleRSS, loadedRSS, peakRSS   int64
	nodeRSS                       map[string]int64
	emptyMs, nothingMs, backlogMs []float64
	scrapeMs, summaryMs           []float64
	fill                          time.Duration
	depth                         int
	shown                         float64
}

func (r *footprintReport) print() {
	for _, v := range [][]float64{r.emptyMs, r.nothingMs, r.backlogMs, r.scrapeMs, r.summaryMs} {
		slices.Sort(v)
	}
	pools := r.cfg.pools
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	fmt.Printf("mode=real_kece_control_process pools=%s queued=%d queue_depth_db=%d queue_depth_metrics=%.0f\n", strings.Join(pools, ","), r.cfg.queued, r.depth, r.shown)
	fmt.Printf("enqueue_rate_per_s=%.0f enqueuers=%d\n", float64(r.cfg.queued)/r.fill.Seconds(), r.cfg.enqueuers)
	fmt.Printf("control_rss_idle_mb=%.1f control_rss_backlog_mb=%.1f control_rss_peak_mb=%.1f control_rss_target_mb=%d within=%t\n",
		mb(r.idleRSS), mb(r.loadedRSS), mb(r.peakRSS), controlRSSTargetBytes>>20, r.peakRSS <= controlRSSTargetBytes)
	fmt.Printf("claim_empty_p50_ms=%.2f claim_empty_p95_ms=%.2f claim_nothing_p50_ms=%.2f claim_nothing_p95_ms=%.2f\n",
		pctf(r.emptyMs, 50), pctf(r.emptyMs, 95), pctf(r.nothingMs, 50), pctf(r.nothingMs, 95))
	fmt.Printf("claim_backlog_p50_ms=%.2f claim_backlog_p95_ms=%.2f claim_p95_factor=%.2f claim_p95_target_factor=%.1f within=%t\n",
		pctf(r.backlogMs, 50), pctf(r.backlogMs, 95), pctf(r.backlogMs, 95)/pctf(r.emptyMs, 95), claimP95TargetFactor,
		pctf(r.backlogMs, 95) <= claimP95TargetFactor*pctf(r.emptyMs, 95))
	fmt.Printf("metrics_scrape_backlog_p50_ms=%.1f metrics_scrape_backlog_max_ms=%.1f public_summary_backlog_p50_ms=%.1f\n",
		pctf(r.scrapeMs, 50), r.scrapeMs[len(r.scrapeMs)-1], pctf(r.summaryMs, 50))
	var worst int64
	for _, p := range pools {
		fmt.Printf("node_rss_idle_mb{pool=%s}=%.1f\n", p, mb(r.nodeRSS[p]))
		worst = max(worst, r.nodeRSS[p])
	}
	fmt.Printf("node_rss_idle_max_mb=%.1f node_rss_target_mb=%d within=%t\n", mb(worst), nodeRSSTargetBytes>>20, worst <= nodeRSSTargetBytes)
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
	g, err := f.st.Nodes().CreateHostGroup(ctx, "probe-host", 1, "bench")
	if err != nil {
		return nil, err
	}
	n, code, err := f.st.Nodes().CreateNode(ctx, store.NodeSpec{Name: "probe", Pool: pool, HostGroupID: g.ID, Slots: 1}, "bench")
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
