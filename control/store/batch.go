package store

import (
	"context"
	"sync"
)

// batcher combines concurrent calls into batches that share one transaction
// (and so one commit and one fsync). A call that finds no batch running runs
// one at once with whatever is queued, so a lone call waits for nothing; calls
// that arrive while a batch runs queue up and form the next one. The queue, not a timer, sets the batch
// size, so it grows exactly as fast as commits are the bottleneck. Up to
// parallel batches run at once, so one slow commit does not hold up every
// caller.
//
// The goroutine that runs a batch is owned by the batcher and ends when the
// queue is empty.
type batcher[Req, Resp any] struct {
	max int
	// parallel is how many batches may run at once.
	parallel int
	// run answers every call of the batch (sets resp/err).
	run func(ctx context.Context, calls []*batchCall[Req, Resp])

	mu      sync.Mutex
	pending []*batchCall[Req, Resp]
	running int
}

// batchCall is one caller's request and, once done is closed, its answer.
type batchCall[Req, Resp any] struct {
	ctx  context.Context
	req  Req
	resp Resp
	err  error
	done chan struct{}
}

func newBatcher[Req, Resp any](max, parallel int, run func(context.Context, []*batchCall[Req, Resp])) *batcher[Req, Resp] {
	return &batcher[Req, Resp]{max: max, parallel: parallel, run: run}
}

// do queues req and waits for its answer or ctx. When ctx ends first the
// request may still commit, exactly as when a reply is lost on the network;
// every batched operation is safe to repeat.
func (b *batcher[Req, Resp]) do(ctx context.Context, req Req) (Resp, error) {
	c := &batchCall[Req, Resp]{ctx: ctx, req: req, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	lead := b.running < b.parallel
	if lead {
		b.running++
	}
	b.mu.Unlock()
	if lead {
		b.lead()
	}
	select {
	case <-c.done:
		return c.resp, c.err
	case <-ctx.Done():
		var zero Resp
		return zero, ctx.Err()
	}
}

// lead runs the queued calls as one batch, then hands the rest (if any) to a
// new leader so this caller can return.
func (b *batcher[Req, Resp]) lead() {
	b.mu.Lock()
	n := min(len(b.pending), b.max)
	if n == 0 {
		b.running--
		b.mu.Unlock()
		return
	}
	batch := b.pending[:n:n]
	b.pending = append([]*batchCall[Req, Resp](nil), b.pending[n:]...)
	b.mu.Unlock()

	// One caller's cancellation must not fail the others' work.
	b.run(context.WithoutCancel(batch[0].ctx), batch)
	for _, c := range batch {
		close(c.done)
	}

	b.mu.Lock()
	more := len(b.pending) > 0
	if !more {
		b.running--
	}
	b.mu.Unlock()
	if more {
		go b.lead()
	}
}
