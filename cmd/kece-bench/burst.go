package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/contracts"

	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/telemetry"
)

// runBurst is the capacity report (DESIGN §11): n submissions at once
// through the business API against real kece-node processes judging in real
// Docker, then the accept/queue/exec percentiles and the completion rate
// against the ideal C/T.
//
// Definitions (also in docs/capacity.md):
//   - T is the mean per-job execution time as the nodes measure it
//     (kece_node_job_duration_seconds: claim answer to result post, so
//     downloads, container start, compile and run are in it, queue wait is
//     not), over the burst's jobs;
//   - C is the total slots of the ready nodes;
//   - completions/s = n ÷ (last settlement − first accept), both on the
//     database clock (job created_at and finished_at);
//   - ideal/s = C/T, ratio = completions/s ÷ ideal/s.
func runBurst(ctx context.Context, args []string) error {
	cfg, err := parseBurst(args)
	if err != nil {
		return err
	}
	f, err := startFleet(ctx, fleetConfig{bin: cfg.bin, dsn: cfg.dsn, judgeDSN: cfg.judgeDSN,
		controlArgs: []string{"--lease-ttl", "60s", "--reap-interval", "1s"}})
	if err != nil {
		return err
	}
	defer f.stop()
	manifests, err := burstFleet(ctx, f, cfg)
	if err != nil {
		return err
	}
	before, err := nodeJobTime(ctx, f)
	if err != nil {
		return err
	}
	sub := submitBurst(ctx, f, cfg, manifests)
	settled, err := consumeBurst(ctx, f, cfg, sub.accepted)
	if err != nil {
		return err
	}
	r := burstReport{cfg: cfg, sub: sub, settled: settled, nodes: len(f.nodes)}
	for _, nd := range f.nodes {
		r.slots += nd.slots
	}
	if r.dbDuplicates, err = duplicateSettlements(ctx, f.db, "BENCH"); err != nil {
		return err
	}
	// Timeline on the database clock: first accept = first job created,
	// settlements = job finished_at; queue = first claim − created; exec =
	// finished − first claim.
	if r.queueMs, r.execMs, r.doneS, err = jobTimeline(ctx, f.db, "BENCH", "burst-"); err != nil {
		return err
	}
	after, err := nodeJobTime(ctx, f)
	if err != nil {
		return err
	}
	r.jobs = after.count - before.count
	if r.jobs > 0 {
		r.meanExec = (after.sum - before.sum) / r.jobs
	}
	r.print()
	if cfg.plot != "" {
		if err := writeBurstPlot(cfg.plot, r.doneS, r.slots, r.meanExec, cfg.n); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		fmt.Printf("plot=%s\n", cfg.plot)
	}
	if unfinished := sub.accepted - len(settled.count); unfinished > 0 {
		return fmt.Errorf("%d accepted submissions not settled within %s (logs were in %s)", unfinished, cfg.timeout, f.work)
	}
	return nil
}

// burstConfig is what `kece-bench burst` was asked for.
type burstConfig struct {
	n, slots, concurrency int
	pools                 []string
	timeout               time.Duration
	plot                  string
	showBar               bool
	dsn, judgeDSN, bin    string
}

func parseBurst(args []string) (burstConfig, error) {
	fs := flag.NewFlagSet("burst", flag.ContinueOnError)
	n := fs.Int("n", 30, "submissions in the burst (the report uses 30, 100 and 300)")
	pool := fs.String("pool", string(machineapi.PoolCpp), "pool of every submission (ignored with -mix)")
	mix := fs.String("mix", "", "comma list of pools to spread the burst over round-robin, e.g. cpp,python,java")
	slots := fs.Int("slots", 2, "slots of each node (one node and host per pool)")
	concurrency := fs.Int("concurrency", 64, "enqueue requests in flight at once")
	timeout := fs.Duration("timeout", 20*time.Minute, "give up waiting for settlements after this long")
	plot := fs.String("plot", "", "write a PNG of completions over time against the ideal C/T line here")
	progress := fs.String("progress", "auto", "progress bar on stderr: auto (when a terminal), on, off")
	dsn := fs.String("dsn", "", "control MySQL server DSN without database (default $KECE_BENCH_MYSQL_DSN or the private MariaDB)")
	judgeDSN := fs.String("judge-dsn", envOr("KECE_BENCH_JUDGE_MYSQL_DSN", "root@tcp(127.0.0.1:33062)/"), "judge MySQL admin DSN (mysql pool)")
	bin := fs.String("bin", "", "directory with kece-control, kece-node, kece-sandbox-init (default: next to kece-bench, else ./bin)")
	if err := settings.ParseWithEnv(fs, "KECE_BENCH_BURST_", args, os.Getenv); err != nil {
		return burstConfig{}, err
	}
	cfg := burstConfig{n: *n, slots: *slots, concurrency: *concurrency, pools: []string{*pool}, timeout: *timeout, plot: *plot,
		showBar: *progress == "on" || (*progress == "auto" && isTerminal(os.Stderr)), dsn: *dsn, judgeDSN: *judgeDSN, bin: *bin}
	if *mix != "" {
		cfg.pools = strings.Split(*mix, ",")
	}
	for _, p := range cfg.pools {
		if _, ok := benchPrograms[p]; !ok || !contracts.ValidPool(p) {
			return cfg, fmt.Errorf("unknown pool %q (want cpp, python, java, arkts or mysql)", p)
		}
	}
	if cfg.n < 1 || cfg.slots < 1 || cfg.slots > 256 || cfg.concurrency < 1 {
		return cfg, errors.New("-n, -slots (1..256) and -concurrency must be positive")
	}
	return cfg, nil
}

// burstFleet publishes each pool's problem, starts one node per pool and
// warms them up; it returns the manifest id per pool.
func burstFleet(ctx context.Context, f *fleet, cfg burstConfig) (map[string]string, error) {
	manifests := map[string]string{}
	var err error
	for _, p := range cfg.pools {
		if _, ok := manifests[p]; ok {
			continue
		}
		if p == string(machineapi.PoolMysql) {
			manifests[p], err = f.publishSQL(ctx)
		} else {
			manifests[p], err = f.publishAPlusB(ctx)
		}
		if err != nil {
			return nil, err
		}
		if _, err := f.addNode(ctx, p, cfg.slots); err != nil {
			return nil, err
		}
	}
	if err := f.waitReady(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	// Warm-up: one job per pool, so first-time costs (page cache of the
	// image, JIT of the control plane's paths) are not in the burst.
	return manifests, burstWarmup(ctx, f, cfg.pools, manifests)
}

// burstSubmitted is what the burst's enqueues got.
type burstSubmitted struct {
	wall                        time.Duration
	accepted, rejected, unknown int
	acceptMs                    []float64
}

// submitBurst sends n enqueues at once (bounded concurrency) and times
// each one's answer.
func submitBurst(ctx context.Context, f *fleet, cfg burstConfig, manifests map[string]string) burstSubmitted {
	type sub struct {
		id, pool string
		status   int
		accept   time.Duration
		err      error
	}
	subs := make([]sub, cfg.n)
	sem := make(chan struct{}, cfg.concurrency)
	var wg sync.WaitGroup
	started := time.Now()
	for i := range subs {
		p := cfg.pools[i%len(cfg.pools)]
		subs[i] = sub{id: fmt.Sprintf("burst-%d", i), pool: p}
		wg.Add(1)
		sem <- struct{}{}
		go func(s *sub) {
			defer wg.Done()
			defer func() { <-sem }()
			prog := benchPrograms[s.pool]
			t := time.Now()
			r, err := f.biz.EnqueueSubmissionWithResponse(ctx, nil, businessapi.SubmissionCreate{SubmissionType: "BENCH",
				SubmissionId: s.id, Language: prog.lang, Source: prog.source, ManifestId: manifests[s.pool]})
			s.accept = time.Since(t)
			if err != nil {
				s.err = err
				return
			}
			s.status = r.StatusCode()
		}(&subs[i])
	}
	wg.Wait()
	out := burstSubmitted{wall: time.Since(started)}
	for _, s := range subs {
		switch {
		case s.err != nil || s.status >= 500:
			out.unknown++ // the client cannot tell whether it was accepted
		case s.status >= 400:
			out.rejected++
		default:
			out.accepted++
			out.acceptMs = append(out.acceptMs, ms(s.accept))
		}
	}
	return out
}

// burstSettled is what the settlement events said: per submission, how many
// events arrived and the last status.
type burstSettled struct {
	count  map[string]int
	status map[string]string
}

// consumeBurst claims and acknowledges settlement events through the
// business API until every accepted submission settled or the timeout.
func consumeBurst(ctx context.Context, f *fleet, cfg burstConfig, accepted int) (burstSettled, error) {
	s := burstSettled{count: map[string]int{}, status: map[string]string{}}
	deadline := time.Now().Add(cfg.timeout)
	var bar *progressBar
	if cfg.showBar {
		bar = &progressBar{total: accepted, label: "settled"}
	}
	defer bar.done()
	for len(s.count) < accepted && time.Now().Before(deadline) && ctx.Err() == nil {
		r, err := f.biz.ClaimSettlementEventsWithResponse(ctx, businessapi.EventClaimRequest{Consumer: "bench", Max: 100, LeaseMs: 60000})
		if err != nil {
			return s, err
		}
		if r.StatusCode() != http.StatusOK {
			return s, fmt.Errorf("claim events: %d %s", r.StatusCode(), r.Body)
		}
		var ids []string
		for _, e := range r.JSON200.Events {
			ids = append(ids, e.EventId)
			if e.SubmissionType != "BENCH" || !strings.HasPrefix(e.SubmissionId, "burst-") {
				continue // warm-up events
			}
			s.count[e.SubmissionId]++
			s.status[e.SubmissionId] = string(e.Payload.Status)
		}
		if len(ids) > 0 {
			if _, err := f.biz.AckSettlementEventsWithResponse(ctx, businessapi.EventAckRequest{Consumer: "bench", EventIds: ids}); err != nil {
				return s, err
			}
		}
		bar.set(len(s.count))
		if len(r.JSON200.Events) == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return s, nil
}

// burstReport is the capacity report's figures.
type burstReport struct {
	cfg                    burstConfig
	sub                    burstSubmitted
	settled                burstSettled
	nodes, slots           int
	dbDuplicates           int
	queueMs, execMs, doneS []float64
	jobs, meanExec         float64
}

func (r *burstReport) print() {
	duplicates := r.dbDuplicates
	for _, c := range r.settled.count {
		duplicates += c - 1
	}
	failed, wrong := 0, 0
	mixCount := map[string]int{}
	for id := range r.settled.count {
		st := r.settled.status[id]
		mixCount[st]++
		switch {
		case st == "SYSTEM_ERROR":
			failed++
		case st != "AC":
			wrong++
		}
	}
	var verdicts []string
	for st, c := range mixCount {
		verdicts = append(verdicts, fmt.Sprintf("%s:%d", st, c))
	}
	slices.Sort(verdicts)
	for _, v := range [][]float64{r.sub.acceptMs, r.queueMs, r.execMs, r.doneS} {
		slices.Sort(v)
	}
	C, T, n := r.slots, r.meanExec, r.cfg.n
	ideal, rate, ratio := 0.0, 0.0, 0.0
	if T > 0 {
		ideal = float64(C) / T
	}
	first, last := 0.0, 0.0
	if len(r.doneS) > 0 {
		first, last = r.doneS[0], r.doneS[len(r.doneS)-1]
	}
	if last > 0 {
		rate = float64(len(r.doneS)) / last
	}
	if ideal > 0 {
		ratio = rate / ideal
	}
	// Waves: with n jobs on C slots the last wave starts only when a slot
	// frees, so even perfect scheduling needs ceil(n/C) rounds of T: the
	// best ratio reachable is (n/C) / ceil(n/C).
	waves := (n + C - 1) / C
	waveBound := float64(n) / float64(C) / float64(waves)

	fmt.Printf("mode=real_kece_control_and_nodes docker=real pools=%s n=%d slots_per_node=%d nodes=%d\n", strings.Join(r.cfg.pools, ","), n, r.cfg.slots, r.nodes)
	fmt.Printf("accepted=%d rejected=%d failed=%d unknown=%d wrong_verdict=%d verdicts=%s\n", r.sub.accepted, r.sub.rejected, failed, r.sub.unknown, wrong,
		strings.Join(verdicts, ","))
	fmt.Printf("submit_wall_ms=%.0f accept_p50_ms=%.1f accept_p95_ms=%.1f accept_p99_ms=%.1f\n", ms(r.sub.wall),
		pctf(r.sub.acceptMs, 50), pctf(r.sub.acceptMs, 95), pctf(r.sub.acceptMs, 99))
	fmt.Printf("queue_p50_ms=%.0f queue_p95_ms=%.0f exec_p50_ms=%.0f exec_p95_ms=%.0f\n", pctf(r.queueMs, 50), pctf(r.queueMs, 95),
		pctf(r.execMs, 50), pctf(r.execMs, 95))
	fmt.Printf("first_done_s=%.2f last_done_s=%.2f completions_per_s=%.3f\n", first, last, rate)
	fmt.Printf("slots=%d mean_exec_s=%.3f node_measured_jobs=%.0f ideal_per_s=%.3f ratio=%.3f\n", C, T, r.jobs, ideal, ratio)
	fmt.Printf("waves=%d wave_bound_ratio=%.3f ratio_target=0.9\n", waves, waveBound)
	fmt.Printf("duplicate_settlements=%d unfinished=%d\n", duplicates, r.sub.accepted-len(r.settled.count))
}

// burstWarmup judges one submission per pool before the measurement.
func burstWarmup(ctx context.Context, f *fleet, pools []string, manifests map[string]string) error {
	var ids []string
	for _, p := range pools {
		if slices.Contains(ids, "warm-"+p) {
			continue
		}
		prog := benchPrograms[p]
		r, err := f.biz.EnqueueSubmissionWithResponse(ctx, nil, businessapi.SubmissionCreate{SubmissionType: "BENCH",
			SubmissionId: "warm-" + p, Language: prog.lang, Source: prog.source, ManifestId: manifests[p]})
		if err != nil {
			return err
		}
		if r.StatusCode() != http.StatusAccepted {
			return fmt.Errorf("warm-up enqueue: %d %s", r.StatusCode(), r.Body)
		}
		ids = append(ids, "warm-"+p)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for _, id := range ids {
		for {
			s, err := f.st.Jobs().SubmissionStatus(ctx, "BENCH", id)
			if err != nil {
				return err
			}
			if s.Status == "AC" {
				break
			}
			if s.Status != "PENDING" && s.Status != "COMPILING" && s.Status != "JUDGING" {
				return fmt.Errorf("warm-up %s ended %s (node logs in %s)", id, s.Status, f.work)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("warm-up %s not judged within 5m (node logs in %s)", id, f.work)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

type jobTime struct{ sum, count float64 }

// nodeJobTime adds kece_node_job_duration_seconds of business jobs over
// every node of the fleet.
func nodeJobTime(ctx context.Context, f *fleet) (jobTime, error) {
	var jt jobTime
	for _, nd := range f.nodes {
		s, err := telemetry.Scrape(ctx, nd.metrics)
		if err != nil {
			return jt, err
		}
		jt.sum += s.Sum("kece_node_job_duration_seconds_sum", "kind", "submission")
		jt.count += s.Sum("kece_node_job_duration_seconds_count", "kind", "submission")
	}
	return jt, nil
}

// pct is the p-th percentile (nearest rank) of sorted values.
func pctf(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// progressBar draws "[####----] 12/30 settled" on stderr; nil draws nothing.
type progressBar struct {
	total int
	label string
	last  int
}

func (b *progressBar) set(done int) {
	if b == nil || (done == b.last && done != 0) {
		return
	}
	b.last = done
	const width = 40
	fill := 0
	if b.total > 0 {
		fill = done * width / b.total
	}
	fmt.Fprintf(os.Stderr, "\r[%s%s] %d/%d %s", strings.Repeat("#", fill), strings.Repeat("-", width-fill), done, b.total, b.label)
}

func (b *progressBar) done() {
	if b != nil {
		fmt.Fprintln(os.Stderr)
	}
}
