// Package longpoll wakes claim long-polls. Waiters hold no database
// connection: they wait on a per-pool channel that is closed when this
// replica commits new ready work (Notify, called by the store after commit)
// or when the poller sees another replica's pool signal move (one cheap query
// per interval for the whole replica, not per waiter).
package longpoll

import (
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

// Hub tracks one wake-up channel per pool.
type Hub struct {
	mu      sync.Mutex
	chans   map[string]chan struct{}
	waiting int
	last    map[string]int64
}

// New returns an empty hub.
func New() *Hub {
	return &Hub{chans: make(map[string]chan struct{}), last: make(map[string]int64)}
}

// Watch returns a channel that is closed at the next wake-up of pool. Take it
// before trying to claim, so a wake-up between the try and the wait is not
// missed; call Done when no longer waiting.
func (h *Hub) Watch(pool string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waiting++
	ch, ok := h.chans[pool]
	if !ok {
		ch = make(chan struct{})
		h.chans[pool] = ch
	}
	return ch
}

// Done ends one Watch.
func (h *Hub) Done() {
	h.mu.Lock()
	h.waiting--
	h.mu.Unlock()
}

// Notify wakes every waiter of pool. It never blocks.
func (h *Hub) Notify(pool string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch, ok := h.chans[pool]; ok {
		close(ch)
		delete(h.chans, pool)
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
