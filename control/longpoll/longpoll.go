// Package longpoll wakes claim long-polls. Waiters hold no database
// connection: each waits on its own channel, queued per pool, that is closed
// when this replica commits new ready work (the store calls NotifyN after
// commit with the number of new jobs, waking that many waiters, longest
// waiting first, or Notify for all of them) or when the poller sees another
// replica's pool signal move (one cheap query per interval for the whole
// replica, not per waiter).
package longpoll

import (
	"container/list"
	"context"
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

// SignalSource reads each pool's wake-up counter (store.PoolSignals).
type SignalSource interface {
	PoolSignals(ctx context.Context) (map[string]int64, error)
}

// Hub tracks the waiters of each pool, longest waiting first.
type Hub struct {
	mu sync.Mutex
	// waiters holds each pool's waiters not yet woken, in Watch order.
	waiters map[string]*list.List
	// elems finds a waiter's place for Done; a woken waiter is no longer in
	// its pool's list but stays here until Done.
	elems   map[<-chan struct{}]waiterRef
	waiting int
	last    map[string]int64
}

// New returns an empty hub.
func New() *Hub {
	return &Hub{waiters: make(map[string]*list.List), elems: make(map[<-chan struct{}]waiterRef),
		last: make(map[string]int64)}
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
func (h *Hub) Notify(pool string) { h.NotifyN(pool, -1) }

// NotifyN wakes the n longest-waiting waiters of pool (all when n < 0): n
// new jobs need n claims, not a claim from every waiting node, which would
// all but one find nothing. It never blocks. A woken waiter that cannot take
// the job after all (its host group is full) leaves it to the others' next
// wake-up: the signal poll of Run, at the latest one interval later.
func (h *Hub) NotifyN(pool string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.waiters[pool]
	if !ok {
		return
	}
	for e := l.Front(); e != nil && n != 0; e = l.Front() {
		close(l.Remove(e).(chan struct{}))
		n--
	}
}

// Run polls src every interval while anyone waits and wakes pools whose
// signal moved, until ctx ends. A failed read is given to failed (which
// logs it: an outage once, not per poll) and tried again next interval.
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
		for pool, seq := range sig {
			h.mu.Lock()
			prev, seen := h.last[pool]
			h.last[pool] = seq
			h.mu.Unlock()
			if seen && seq != prev {
				h.Notify(pool)
			}
		}
	}
}
