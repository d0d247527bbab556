package main

// What a freeze costs in leasing (issue 47, item 2): the jobs leased per
// second during the long replica freezes against the time just before
// each, for the fleet and each pool, while a backlog is kept queued in
// every pool (so both are what the fleet can lease, not the load's rate).
// A fleet that keeps going back to the frozen replica (the repro:
// 133 jobs leased in 30 s of a freeze with cut answers on the healthy
// replica, against 881–886 with either fault alone) leases a fraction of
// what it did before.

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// freezeLeaseRates are the freeze_leased_* lines: per second, the attempts
// that started during the long freezes, and during the freezeQuiet()
// before each (no other fault runs then, and keepBacklog keeps jobs
// queued), for the fleet and each pool, and their ratio (during / before).
// Nothing without long freezes.
func (r *chaosRun) freezeLeaseRates(ctx context.Context, windows []freezeWindow) (string, error) {
	before, during := map[string]int{}, map[string]int{}
	var beforeS, duringS float64
	quiet := r.freezeQuiet()
	for _, w := range windows {
		if !w.long {
			continue
		}
		if err := leasedPerPool(ctx, r.f.db, w.start.Add(-quiet), w.start, before); err != nil {
			return "", err
		}
		if err := leasedPerPool(ctx, r.f.db, w.start, w.end, during); err != nil {
			return "", err
		}
		beforeS += quiet.Seconds()
		duringS += w.end.Sub(w.start).Seconds()
	}
	if duringS == 0 {
		return "", nil
	}
	var b strings.Builder
	line := func(suffix string, nb, nd int) {
		rb, rd := float64(nb)/beforeS, float64(nd)/duringS
		ratio := math.NaN()
		if rb > 0 {
			ratio = rd / rb
		}
		fmt.Fprintf(&b, "freeze_leased_per_s_before%s=%.2f freeze_leased_per_s_during%s=%.2f freeze_leased_ratio%s=%.2f\n",
			suffix, rb, suffix, rd, suffix, ratio)
	}
	nb, nd := 0, 0
	for _, p := range r.cfg.poolList {
		nb, nd = nb+before[p], nd+during[p]
	}
	line("", nb, nd)
	for _, p := range r.cfg.poolList {
		line("_"+p, before[p], during[p])
	}
	return b.String(), nil
}

// leasedPerPool adds to into, per pool, the attempts that started in
// [from, to).
func leasedPerPool(ctx context.Context, db *sql.DB, from, to time.Time, into map[string]int) error {
	rows, err := db.QueryContext(ctx, `SELECT j.pool, COUNT(*) FROM judge_job_attempt a JOIN judge_job j ON j.id = a.job_id
		WHERE a.started_at >= ? AND a.started_at < ? GROUP BY j.pool`, from.UTC(), to.UTC())
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var pool string
		var n int
		if err := rows.Scan(&pool, &n); err != nil {
			return err
		}
		into[pool] += n
	}
	return rows.Err()
}

// keepBacklog keeps at least a pool's slots of ready jobs queued in every
// pool (the usual mix of programs), checked every 100 ms, until the
// returned stop is called; stop waits until every submission it made was
// accepted (or gave up).
func (r *chaosRun) keepBacklog(ctx context.Context) (stop func()) {
	kctx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	r.bursts++
	b := r.bursts
	r.mu.Unlock()
	want := r.cfg.nodesPerPool * r.cfg.slots
	pending := map[string]*atomic.Int64{}
	for _, p := range r.cfg.poolList {
		pending[p] = new(atomic.Int64)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		defer close(done)
		n := 0
		for kctx.Err() == nil {
			for _, pool := range r.cfg.poolList {
				queued, _, err := poolClaimSample(kctx, r.f.db, pool)
				for k := queued + int(pending[pool].Load()); err == nil && k < want; k++ {
					n++
					pending[pool].Add(1)
					id, kind := fmt.Sprintf("chaos-%d-backlog%d-%s-%d", r.cfg.seed, b, pool, n), n%3
					wg.Go(func() { defer pending[pool].Add(-1); r.submitOne(kctx, id, pool, kind) })
				}
			}
			sleepCtx(kctx, 100*time.Millisecond)
		}
	}()
	return func() { cancel(); <-done; wg.Wait() }
}
