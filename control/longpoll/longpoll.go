// Package longpoll wakes claim long-polls. Waiters hold no database
// connection: each waits on its own channel, queued per pool, that is closed
// when this replica commits new ready work (the store calls NotifyN after
// commit with the number of new jobs, waking that many waiters, longest
// waiting first, or Notify for all of them) or when the poller sees another
// replica's pool signal move (one cheap query per interval for the whole
// replica, not per waiter; see Run for how many it wakes).
package longpoll

import (
	"container/list"
	"context"
	"maps"
	"sync"
	"time"
)

// Poll intervals. The pool signal is read often because a claim parked on
// one replica waits for work enqueued on another at most this long (plus
// the query): 10 ms keeps cross-replica pickup p95 under 25 ms. The query
// costs two loose index scans (the pool signal rows by primary key and the
// highest job id per pool on ix_job_pool_id: a few rows per pool whatever
// the backlog), and a replica runs it only while at least one claim waits,
// so a replica costs at most 100 such queries a second (kece-bench pickup
// prints their cost). Settlements are waited for by people and scripts,
// not nodes: a tenth of a second is enough there.
const (
	SignalPollIntervalDefault = 10 * time.Millisecond
	SettlePollIntervalDefault = 100 * time.Millisecond
)

// Signal is one pool's wake-up counters as the database holds them; both
// only grow.
type Signal struct {
	// Bumps moves when work becomes ready again without a new job row (a
	// requeue, a rejudge, an enqueue on the locking path).
	Bumps int64
	// NewestJob is the pool's highest job id: it moves with each new job.
	// Job ids are shared by all pools, so its growth is an upper bound on
	// the pool's new jobs.
	NewestJob int64
}

// SignalSource reads each pool's wake-up counters (store.PoolSignals).
type SignalSource interface {
	PoolSignals(ctx context.Context) (map[string]Signal, error)
}

// SweepIntervalDefault is how often at most the signal poll wakes every
// waiter of a pool whose new jobs were all made on this replica (and so
// already woke one waiter each). A woken waiter that could not take its job
// (its host group is at capacity) leaves it to the others: this sweep
// reaches them, as does each waiter's own retry (~2 s) later.
const SweepIntervalDefault = 250 * time.Millisecond

// Hub tracks the waiters of each pool, longest waiting first.
type Hub struct {
	mu sync.Mutex
	// waiters holds each pool's waiters not yet woken, in Watch order.
	waiters map[string]*list.List
	// elems finds a waiter's place for Done; a woken waiter is no longer in
	// its pool's list but stays here until Done.
	elems   map[<-chan struct{}]waiterRef
	waiting int
	// last is each pool's signal at the previous poll.
	last map[string]Signal
	// local counts the new jobs NotifyN was told of since the poll that
	// last accounted for them: they woke their waiters already, so the poll
	// does not wake more for them.
	local map[string]int64
	// swept is when the poll last woke every waiter of a pool, at most once
	// per sweep.
	swept map[string]time.Time
	sweep time.Duration
}

// New returns an empty hub.
func New() *Hub {
	return &Hub{waiters: make(map[string]*list.List), elems: make(map[<-chan struct{}]waiterRef),
		last: make(map[string]Signal), local: make(map[string]int64), swept: make(map[string]time.Time),
		sweep: SweepIntervalDefault}
}

// waiterRef is where a waiter sits: its pool's list and its element there
// (removing an element already taken out by a wake-up does nothing).
type waiterRef struct {
	pool string
	e    *list.Element
}

// Watch returns a channel that is closed at the next wake-up of pool that
// reaches this waiter. Take it before trying to claim, so a wake-up between
// the try and the wait is not missed; call Done with it when no longer
// waiting.
func (h *Hub) Watch(pool string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiting++
	l, ok := h.waiters[pool]
	if !ok {
		l = list.New()
		h.waiters[pool] = l
	}
	ch := make(chan struct{})
	h.elems[ch] = waiterRef{pool: pool, e: l.PushBack(ch)}
	return ch
}

// Done ends the Watch that returned ch.
func (h *Hub) Done(ch <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ref, ok := h.elems[ch]
	if !ok {
		return
	}
	delete(h.elems, ch)
	h.waiting--
	h.waiters[ref.pool].Remove(ref.e)
}

// Notify wakes every waiter of pool. It never blocks.
func (h *Hub) Notify(pool string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wake(pool, -1)
}

// NotifyN is told that this replica committed n new jobs of pool and wakes
// the n longest-waiting waiters: n new jobs need n claims, not a claim from
// every waiting node, which would all but one find nothing. It never
// blocks. A woken waiter that cannot take the job after all (its host group
// is full) leaves it to the others: Run's sweep (SweepIntervalDefault) or
// their own retry.
func (h *Hub) NotifyN(pool string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n > 0 {
		h.local[pool] += int64(n)
	}
	h.wake(pool, n)
}

// wake wakes the n longest-waiting waiters of pool (all when n < 0); h.mu
// is held.
func (h *Hub) wake(pool string, n int) {
	l, ok := h.waiters[pool]
	if !ok {
		return
	}
	for e := l.Front(); e != nil && n != 0; e = l.Front() {
		close(l.Remove(e).(chan struct{}))
		n--
	}
}

// Run polls src every interval while anyone waits, until ctx ends, and
// wakes waiters for what moved since the previous poll: every waiter of a
// pool whose Bumps moved (work ready again: which nodes can take it is not
// known here); for new jobs, as many waiters as the pool's NewestJob grew
// beyond the jobs this replica already woke waiters for (NotifyN) — one
// per job made on another replica — and, when all of them were made here,
// every waiter at most once per SweepIntervalDefault. A failed read is given
// to failed (which logs it: an outage once, not per poll) and tried again
// next interval.
func (h *Hub) Run(ctx context.Context, src SignalSource, interval time.Duration, failed func(error)) {
	if interval <= 0 {
		interval = SignalPollIntervalDefault
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.mu.Lock()
		idle := h.waiting == 0
		// Jobs NotifyN heard of before the read committed before it (the
		// store notifies after commit), so the read counts them.
		taken := maps.Clone(h.local)
		h.mu.Unlock()
		if idle {
			continue
		}
		sig, err := src.PoolSignals(ctx)
		if err != nil {
			if ctx.Err() == nil {
				failed(err)
			}
			continue
		}
		now := time.Now()
		h.mu.Lock()
		for pool, s := range sig {
			prev, seen := h.last[pool]
			h.last[pool] = s
			h.local[pool] -= taken[pool]
			if !seen {
				// The first read is the baseline. A job another replica
				// made after a waiter's claim try and before this read is
				// in it, so wake every waiter once: one empty claim each
				// costs less than a job left until the retry.
				h.wake(pool, -1)
				h.swept[pool] = now
				continue
			}
			switch {
			case s.Bumps != prev.Bumps:
				h.wake(pool, -1)
				h.swept[pool] = now
			case s.NewestJob != prev.NewestJob:
				if n := s.NewestJob - prev.NewestJob - taken[pool]; n > 0 {
					h.wake(pool, int(n))
				} else if now.Sub(h.swept[pool]) >= h.sweep {
					h.wake(pool, -1)
					h.swept[pool] = now
				}
			}
		}
		h.mu.Unlock()
	}
}
