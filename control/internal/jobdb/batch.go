package jobdb

import (
	"context"
	"sync"
	"time"
)

// Batcher combines concurrent calls into batches that share one transaction
// (and so one commit and one fsync). A call that finds no batch running runs
// one with whatever is queued; calls that arrive while a batch runs queue up
// and form the next one, so the batch size grows as fast as commits are the
// bottleneck. Up to parallel batches run at once, so one slow commit does
// not hold up every caller.
//
// Under load a burst of calls arrives together (the nodes whose slots one
// result batch freed claim at once; the jobs one claim granted report
// their start and post their results at once), and the first of a burst
// finds no batch running. With linger set, such a call on a busy batcher —
// one whose last batch ended less than lingerBusy ago — waits until no call
// has joined the queue for quiet (the burst is in), at most linger, before
// running its batch, so the rest of its burst joins it instead of forming
// a second one. An idle batcher still runs a lone call at once.
//
// The goroutine that runs a batch is owned by the batcher and ends when the
// queue is empty.
type Batcher[Req, Resp any] struct {
	max int
	// parallel is how many batches may run at once.
	parallel int
	// linger is the longest a call that starts a batch on a busy batcher
	// waits for the rest of its burst (0: never); quiet ends the wait
	// sooner, once no call has joined for that long.
	linger, quiet time.Duration
	// run answers every call of the batch (sets Resp/Err).
	run func(ctx context.Context, calls []*BatchCall[Req, Resp])

	mu      sync.Mutex
	pending []*BatchCall[Req, Resp]
	running int
	// ended is when the last batch ended.
	ended time.Time
	// idle is signalled when running drops (Hold waits on it).
	idle *sync.Cond
}

const (
	// lingerBusy is how recently a batcher's last batch must have ended
	// for it to count as busy (linger applies).
	lingerBusy = 50 * time.Millisecond
	// lingerQuiet: the calls of one burst arrive within a few hundred
	// microseconds of each other, so ending the wait once none has joined
	// for a while beats always waiting the whole linger, with the same
	// batch sizes (docs/scheduling.md, the table of what moved throughput).
	lingerQuiet = 300 * time.Microsecond
)

// BatchCall is one caller's request and, once done is closed, its answer.
type BatchCall[Req, Resp any] struct {
	Ctx  context.Context
	Req  Req
	Resp Resp
	Err  error
	done chan struct{}
}

// NewBatcher returns a batcher of at most max calls per batch, parallel
// batches at once, each run by run (see Batcher for linger).
func NewBatcher[Req, Resp any](max, parallel int, linger time.Duration, run func(context.Context, []*BatchCall[Req, Resp])) *Batcher[Req, Resp] {
	b := &Batcher[Req, Resp]{max: max, parallel: parallel, linger: linger, quiet: lingerQuiet, run: run}
	b.idle = sync.NewCond(&b.mu)
	return b
}

// Do queues req and waits for its answer or ctx. When ctx ends first the
// request may still commit, exactly as when a reply is lost on the network;
// every batched operation is safe to repeat.
func (b *Batcher[Req, Resp]) Do(ctx context.Context, req Req) (Resp, error) {
	c := &BatchCall[Req, Resp]{Ctx: ctx, Req: req, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	lead := b.running < b.parallel
	if lead {
		b.running++
	}
	wait := lead && b.linger > 0 && time.Since(b.ended) < lingerBusy
	b.mu.Unlock()
	if lead {
		if wait {
			b.settle()
		}
		b.lead()
	}
	select {
	case <-c.done:
		return c.Resp, c.Err
	case <-ctx.Done():
		var zero Resp
		return zero, ctx.Err()
	}
}

// settle waits until no call has joined the queue for b.quiet, or b.linger
// has passed.
func (b *Batcher[Req, Resp]) settle() {
	deadline := time.Now().Add(b.linger)
	b.mu.Lock()
	n := len(b.pending)
	b.mu.Unlock()
	for left := time.Until(deadline); left > 0; left = time.Until(deadline) {
		time.Sleep(min(b.quiet, left))
		b.mu.Lock()
		m := len(b.pending)
		b.mu.Unlock()
		if m == n {
			return
		}
		n = m
	}
}

// lead runs the queued calls as one batch, then hands the rest (if any) to a
// new leader so this caller can return.
func (b *Batcher[Req, Resp]) lead() {
	b.mu.Lock()
	n := min(len(b.pending), b.max)
	if n == 0 {
		b.running--
		b.idle.Broadcast()
		b.mu.Unlock()
		return
	}
	batch := b.pending[:n:n]
	b.pending = append([]*BatchCall[Req, Resp](nil), b.pending[n:]...)
	b.mu.Unlock()

	// One caller's cancellation must not fail the others' work.
	b.run(context.WithoutCancel(batch[0].Ctx), batch)
	for _, c := range batch {
		close(c.done)
	}

	b.mu.Lock()
	b.ended = time.Now()
	more := len(b.pending) > 0
	if !more {
		b.running--
		b.idle.Broadcast()
	}
	b.mu.Unlock()
	if more {
		go b.lead()
	}
}
