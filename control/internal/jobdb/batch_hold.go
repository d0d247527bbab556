package jobdb

// Hold, Release and Queued let tests build a batch for certain: Hold makes
// every call queue, Queued counts them, Release runs them as one batch.
// Production code never calls them.

// Release runs what queued while held as one batch.
func (b *Batcher[Req, Resp]) Release() {
	b.mu.Lock()
	b.running = 1
	b.mu.Unlock()
	go b.lead()
}

// Hold waits until no batch runs — a batch released just before may still
// be finishing after its callers were answered, and its end would undo the
// hold — then makes every call queue.
func (b *Batcher[Req, Resp]) Hold() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.running != 0 {
		b.idle.Wait()
	}
	b.running = b.parallel
}

// Queued is how many calls wait.
func (b *Batcher[Req, Resp]) Queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}
