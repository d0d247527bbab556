package store

import (
	"context"
	"time"
)

// HoldBatches makes s queue every batched call (completions, new
// submissions and renewals) until release, which runs what queued as batches; queued
// reports how many calls wait. Tests use it to build a batch for certain.
func HoldBatches(s *Store) (queued func() int, release func()) {
	s.writer.hold()
	s.enqueuer.hold()
	queued = func() int { return s.writer.queued() + s.enqueuer.queued() }
	release = func() {
		s.writer.release()
		s.enqueuer.release()
	}
	return queued, release
}

// release runs what queued while held as one batch.
func (b *batcher[Req, Resp]) release() {
	b.mu.Lock()
	b.running = 1
	b.mu.Unlock()
	go b.lead()
}

// hold waits until no batch runs — a batch released just before may still
// be finishing after its callers were answered, and its end would undo the
// hold — then makes every call queue.
func (b *batcher[Req, Resp]) hold() {
	for {
		b.mu.Lock()
		if b.running == 0 {
			b.running = b.parallel
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		time.Sleep(100 * time.Microsecond)
	}
}

func (b *batcher[Req, Resp]) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

// CommittedBatches is how many multi-item batches committed as one.
func CommittedBatches(s *Store) int64 { return s.stats.batches.Load() }

// JobSearchSQL, AuditSearchSQL and VerdictMixSQL are the statements the
// admin searches run, for the query-plan test; JobSearchSQL first turns the
// creation-time bounds into ids as ListJobs does.
func JobSearchSQL(ctx context.Context, s *Store, f JobFilter) (string, []any, error) {
	lo, hi, err := s.createdIDRange(ctx, f)
	if err != nil {
		return "", nil, err
	}
	q, args := jobSearchSQL(f, lo, hi)
	return q, args, nil
}

// AuditSearchSQL is ListAudit's statement.
func AuditSearchSQL(f AuditFilter) (string, []any) { return auditSearchSQL(f) }

// VerdictMixSQL is VerdictMix's statement.
const VerdictMixSQL = verdictMixSQL

// HoldClaims makes s queue every claim of pool until release, which runs
// what queued as one batch; queued reports how many claims wait.
func HoldClaims(s *Store, pool string) (queued func() int, release func()) {
	b := s.claimers.of(pool)
	b.hold()
	return b.queued, b.release
}
