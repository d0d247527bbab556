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
	"log/slog"
	"sync"
	"time"
)

// PollIntervalDefault is how often the cross-replica signal is read.
const PollIntervalDefault = 100 * time.Millisecond

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
// signal moved, until ctx ends.
func (h *Hub) Run(ctx context.Context, src SignalSource, interval time.Duration, log *slog.Logger) {
	if interval <= 0 {
		interval = PollIntervalDefault
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
				log.Warn("long-poll: reading pool signals failed", "err", err)
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
