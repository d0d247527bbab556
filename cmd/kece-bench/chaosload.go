package main

// The chaos run's load: the business client that enqueues and consumes
// settlement events, and the replicas' retry counters.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/telemetry"
)

func (r *chaosRun) unsettled() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.order {
		if s.accepted && s.settledAt.IsZero() {
			n++
		}
	}
	return n
}

// Programs per pool: the accepted one, a wrong one (WA), and for mysql a
// statement that sleeps so kills land mid-job.
func chaosProgram(pool string, kind int) (source, want string) {
	switch {
	case pool == string(machineapi.PoolMysql) && kind == 1:
		return "SELECT name FROM city ORDER BY name", "WA"
	case pool == string(machineapi.PoolMysql) && kind == 2:
		return "SELECT name FROM city, (SELECT SLEEP(0.8) AS z) AS s WHERE population > 1000000 ORDER BY name", "AC"
	case kind == 1 && pool == string(machineapi.PoolPython):
		return "a, b = map(int, input().split())\nprint(a - b - 1)\n", "WA"
	}
	return benchPrograms[pool].source, "AC"
}

// enqueueLoop is the business client's submitter: rate submissions per
// second, each retried on both replicas (same Idempotency-Key) until
// accepted, starting with the one that accepted the last.
func (r *chaosRun) enqueueLoop(ctx context.Context) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / r.cfg.rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, 32)
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r.mu.Lock()
		pool := r.cfg.poolList[r.rng.IntN(len(r.cfg.poolList))]
		kind := r.rng.IntN(3)
		full := r.inFlight(pool) >= r.cfg.inFlight
		r.mu.Unlock()
		if full {
			// Closed loop: a pool's backlog stays bounded whatever this
			// machine's judging speed, so stuck means stuck, not slow.
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r.submitOne(ctx, fmt.Sprintf("chaos-%d-%d", r.cfg.seed, n), pool, kind)
		}()
	}
}

// submitOne records a submission of pool's program kind and enqueues it
// until accepted. It goes on being retried after the load stops: a
// business backend does not give up on an accepted user's code.
func (r *chaosRun) submitOne(ctx context.Context, id, pool string, kind int) {
	src, want := chaosProgram(pool, kind)
	s := &chaosSub{id: id, pool: pool, want: want, enqueuedAt: time.Now(), events: map[string]int{}}
	r.mu.Lock()
	r.subs[s.id] = s
	r.order = append(r.order, s)
	r.mu.Unlock()
	r.enqueue(context.WithoutCancel(ctx), s, src)
}

// inFlight is how many of pool's submissions are sent but not settled
// (r.mu held).
func (r *chaosRun) inFlight(pool string) int {
	n := 0
	for _, s := range r.order {
		if s.pool == pool && s.settledAt.IsZero() {
			n++
		}
	}
	return n
}

func (r *chaosRun) enqueue(ctx context.Context, s *chaosSub, src string) {
	key := s.id
	body := businessapi.SubmissionCreate{SubmissionType: "CHAOS", SubmissionId: s.id, Language: benchPrograms[s.pool].lang,
		Source: src, ManifestId: r.manifests[s.pool]}
	deadline := time.Now().Add(3 * time.Minute)
	// First the replica that accepted the last submission: a client does
	// not wait out a frozen replica's timeout for every submission.
	first := int(r.bizPref.Load())
	for k := 0; time.Now().Before(deadline); k++ {
		i := (first + k) % len(r.biz)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := r.biz[i].EnqueueSubmissionWithResponse(cctx, &businessapi.EnqueueSubmissionParams{IdempotencyKey: &key}, body)
		cancel()
		if err == nil && resp.StatusCode() >= 200 && resp.StatusCode() < 300 {
			r.bizPref.Store(int32(i))
			r.mu.Lock()
			s.accepted = true
			r.mu.Unlock()
			return
		}
		if err == nil && resp.StatusCode() >= 400 && resp.StatusCode() < 500 && resp.StatusCode() != http.StatusTooManyRequests {
			fmt.Fprintf(os.Stderr, "chaos: enqueue %s refused: %d %s\n", s.id, resp.StatusCode(), resp.Body)
			break
		}
		r.mu.Lock()
		r.enqueueErrors++
		r.mu.Unlock()
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// consumeLoop claims and acknowledges settlement events as a business
// backend would, alternating replicas.
func (r *chaosRun) consumeLoop(ctx context.Context) {
	for k := 0; ctx.Err() == nil; k++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := r.biz[k%2].ClaimSettlementEventsWithResponse(cctx, businessapi.EventClaimRequest{Consumer: "chaos-business", LeaseMs: 10_000, Max: 100})
		cancel()
		if err != nil || resp.JSON200 == nil {
			sleepCtx(ctx, 300*time.Millisecond)
			continue
		}
		evs := resp.JSON200.Events
		if len(evs) == 0 {
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		now := time.Now()
		ids := make([]string, 0, len(evs))
		r.mu.Lock()
		for _, e := range evs {
			ids = append(ids, e.EventId)
			r.deliveries++
			s := r.subs[e.SubmissionId]
			if s == nil {
				continue
			}
			s.events[e.EventId]++
			if s.settledAt.IsZero() {
				s.settledAt = now
				s.status = string(e.Payload.Status)
			}
		}
		r.mu.Unlock()
		cctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		_, _ = r.biz[(k+1)%2].AckSettlementEventsWithResponse(cctx, businessapi.EventAckRequest{Consumer: "chaos-business", EventIds: ids})
		cancel()
	}
}

// scrapeLoop follows each replica's transaction-retry counter, adding what
// a killed process had counted to the replica's base.
func (r *chaosRun) scrapeLoop(ctx context.Context) {
	for ctx.Err() == nil {
		for _, rep := range r.replicas {
			r.scrapeRetries(ctx, rep)
		}
		sleepCtx(ctx, time.Second)
	}
}

func (r *chaosRun) scrapeRetries(ctx context.Context, rep *chaosReplica) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := telemetry.Scrape(cctx, "http://"+rep.addr+"/metrics")
	if err != nil {
		return
	}
	v := s.Sum("kece_control_db_tx_retries_total")
	rep.mu.Lock()
	if v < rep.retryLast { // a new process
		rep.retryBase += rep.retryLast
	}
	rep.retryLast = v
	rep.mu.Unlock()
}
