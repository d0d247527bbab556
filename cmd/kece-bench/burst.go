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
		return err
	}
	pools := []string{*pool}
	if *mix != "" {
		pools = strings.Split(*mix, ",")
	}
	for _, p := range pools {
		if _, ok := benchPrograms[p]; !ok || !contracts.ValidPool(p) {
			return fmt.Errorf("unknown pool %q (want cpp, python, java, arkts or mysql)", p)
		}
	}
	if *n < 1 || *slots < 1 || *slots > 256 || *concurrency < 1 {
		return errors.New("-n, -slots (1..256) and -concurrency must be positive")
	}
	showBar := *progress == "on" || (*progress == "auto" && isTerminal(os.Stderr))

	f, err := startFleet(ctx, fleetConfig{bin: *bin, dsn: *dsn, judgeDSN: *judgeDSN,
		controlArgs: []string{"--lease-ttl", "60s", "--reap-interval", "1s"}})
	if err != nil {
		return err
	}
	defer f.stop()
	manifests := map[string]string{}
	for _, p := range pools {
		if _, ok := manifests[p]; ok {
			continue
		}
		if p == string(machineapi.PoolMysql) {
			manifests[p], err = f.publishSQL(ctx)
		} else {
			manifests[p], err = f.publishAPlusB(ctx)
		}
		if err != nil {
			return err
		}
		if _, err := f.addNode(ctx, p, *slots); err != nil {
			return err
		}
	}
	if err := f.waitReady(ctx, 2*time.Minute); err != nil {
		return err
	}
	// Warm-up: one job per pool, so first-time costs (page cache of the
	// image, JIT of the control plane's paths) are not in the burst.
	if err := burstWarmup(ctx, f, pools, manifests); err != nil {
		return err
	}
	before, err := nodeJobTime(ctx, f)
	if err != nil {
		return err
	}
	C := 0
	for _, nd := range f.nodes {
		C += nd.slots
	}

	// The burst: n enqueues at once (bounded concurrency), accept latency per request.
	type sub struct {
		id, pool string
		status   int
		accept   time.Duration
		err      error
	}
	subs := make([]sub, *n)
	sem := make(chan struct{}, *concurrency)
	var wg sync.WaitGroup
	started := time.Now()
	for i := range subs {
		p := pools[i%len(pools)]
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
	submitWall := time.Since(started)
	var accepted, rejected, unknown int
	var acceptMs []float64
	want := map[string]bool{}
	for _, s := range subs {
		switch {
		case s.err != nil || s.status >= 500:
			unknown++ // the client cannot tell whether it was accepted
		case s.status >= 400:
			rejected++
		default:
			accepted++
			want[s.id] = true
			acceptMs = append(acceptMs, ms(s.accept))
		}
	}

	// Settlements: consumed (claimed and acknowledged) through the business
	// API, counting duplicates per submission.
	seen := map[string]int{}
	statuses := map[string]string{}
	deadline := time.Now().Add(*timeout)
	var bar *progressBar
	if showBar {
		bar = &progressBar{total: accepted, label: "settled"}
	}
	for len(seen) < accepted && time.Now().Before(deadline) && ctx.Err() == nil {
		r, err := f.biz.ClaimSettlementEventsWithResponse(ctx, businessapi.EventClaimRequest{Consumer: "bench", Max: 100, LeaseMs: 60000})
		if err != nil {
			return err
		}
		if r.StatusCode() != http.StatusOK {
			return fmt.Errorf("claim events: %d %s", r.StatusCode(), r.Body)
		}
		var ids []string
		for _, e := range r.JSON200.Events {
			if e.SubmissionType != "BENCH" || !strings.HasPrefix(e.SubmissionId, "burst-") {
				ids = append(ids, e.EventId) // warm-up events
				continue
			}
			seen[e.SubmissionId]++
			statuses[e.SubmissionId] = string(e.Payload.Status)
			ids = append(ids, e.EventId)
		}
		if len(ids) > 0 {
			if _, err := f.biz.AckSettlementEventsWithResponse(ctx, businessapi.EventAckRequest{Consumer: "bench", EventIds: ids}); err != nil {
				return err
			}
		}
		bar.set(len(seen))
		if len(r.JSON200.Events) == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	bar.done()
	duplicates := 0
	for _, c := range seen {
		duplicates += c - 1
	}
	var dbDup int
	if err := f.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(c - 1), 0) FROM (SELECT COUNT(*) AS c FROM judge_settlement_event
		WHERE submission_type = 'BENCH' GROUP BY submission_id, event_type) AS x`).Scan(&dbDup); err != nil {
		return err
	}
	duplicates += dbDup
	failed, wrong := 0, 0
	mixCount := map[string]int{}
	for id := range seen {
		st := statuses[id]
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
	unfinished := accepted - len(seen)

	// Timeline on the database clock: first accept = first job created,
	// settlements = job finished_at; queue = first claim − created; exec =
	// finished − first claim.
	rows, err := f.db.QueryContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, created_at, started_at),
		TIMESTAMPDIFF(MICROSECOND, started_at, finished_at),
		TIMESTAMPDIFF(MICROSECOND, (SELECT MIN(created_at) FROM judge_job WHERE submission_type = 'BENCH' AND submission_id LIKE 'burst-%'), finished_at)
		FROM judge_job WHERE submission_type = 'BENCH' AND submission_id LIKE 'burst-%' AND finished_at IS NOT NULL`)
	if err != nil {
		return err
	}
	var queueMs, execMs, doneS []float64
	for rows.Next() {
		var q, e, d int64
		if err := rows.Scan(&q, &e, &d); err != nil {
			rows.Close()
			return err
		}
		queueMs, execMs, doneS = append(queueMs, float64(q)/1000), append(execMs, float64(e)/1000), append(doneS, float64(d)/1e6)
	}
	rows.Close()
	slices.Sort(acceptMs)
	slices.Sort(queueMs)
	slices.Sort(execMs)
	slices.Sort(doneS)
	after, err := nodeJobTime(ctx, f)
	if err != nil {
		return err
	}
	jobs := after.count - before.count
	T := 0.0
	if jobs > 0 {
		T = (after.sum - before.sum) / jobs
	}
	ideal, rate, ratio := 0.0, 0.0, 0.0
	if T > 0 {
		ideal = float64(C) / T
	}
	if len(doneS) > 0 && doneS[len(doneS)-1] > 0 {
		rate = float64(len(doneS)) / doneS[len(doneS)-1]
	}
	if ideal > 0 {
		ratio = rate / ideal
	}
	// Waves: with n jobs on C slots the last wave starts only when a slot
	// frees, so even perfect scheduling needs ceil(n/C) rounds of T: the
	// best ratio reachable is (n/C) / ceil(n/C).
	waves := (*n + C - 1) / C
	waveBound := float64(*n) / float64(C) / float64(waves)

	fmt.Printf("mode=real_kece_control_and_nodes docker=real pools=%s n=%d slots_per_node=%d nodes=%d\n", strings.Join(pools, ","), *n, *slots, len(f.nodes))
	fmt.Printf("accepted=%d rejected=%d failed=%d unknown=%d wrong_verdict=%d verdicts=%s\n", accepted, rejected, failed, unknown, wrong,
		strings.Join(verdicts, ","))
	fmt.Printf("submit_wall_ms=%.0f accept_p50_ms=%.1f accept_p95_ms=%.1f accept_p99_ms=%.1f\n", ms(submitWall),
		pctf(acceptMs, 50), pctf(acceptMs, 95), pctf(acceptMs, 99))
	fmt.Printf("queue_p50_ms=%.0f queue_p95_ms=%.0f exec_p50_ms=%.0f exec_p95_ms=%.0f\n", pctf(queueMs, 50), pctf(queueMs, 95),
		pctf(execMs, 50), pctf(execMs, 95))
	first, last := 0.0, 0.0
	if len(doneS) > 0 {
		first, last = doneS[0], doneS[len(doneS)-1]
	}
	fmt.Printf("first_done_s=%.2f last_done_s=%.2f completions_per_s=%.3f\n", first, last, rate)
	fmt.Printf("slots=%d mean_exec_s=%.3f node_measured_jobs=%.0f ideal_per_s=%.3f ratio=%.3f\n", C, T, jobs, ideal, ratio)
	fmt.Printf("waves=%d wave_bound_ratio=%.3f ratio_target=0.9\n", waves, waveBound)
	fmt.Printf("duplicate_settlements=%d unfinished=%d\n", duplicates, unfinished)
	if *plot != "" {
		if err := writeBurstPlot(*plot, doneS, C, T, *n); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		fmt.Printf("plot=%s\n", *plot)
	}
	if unfinished > 0 {
		return fmt.Errorf("%d accepted submissions not settled within %s (logs were in %s)", unfinished, *timeout, f.work)
	}
	return nil
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
			s, err := f.st.SubmissionStatus(ctx, "BENCH", id)
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
		jt.sum += s.Sum("kece_node_job_duration_seconds_sum", "kind", "SUBMISSION")
		jt.count += s.Sum("kece_node_job_duration_seconds_count", "kind", "SUBMISSION")
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
