package store

import "github.com/kece-oj/kece/control/lease"

// Test hooks: control/internal/storetest uses them to build a batch for
// certain. Production code never calls them.

// HoldBatches makes s queue every batched call (completions, new
// submissions and renewals) until release, which runs what queued as batches; queued
// reports how many calls wait.
func HoldBatches(s *Store) (queued func() int, release func()) {
	leaseQueued, leaseRelease := lease.HoldWrites(s.leases.Engine)
	s.enqueuer.Hold()
	queued = func() int { return leaseQueued() + s.enqueuer.Queued() }
	release = func() {
		leaseRelease()
		s.enqueuer.Release()
	}
	return queued, release
}

// CommittedBatches is how many multi-item batches committed as one.
func CommittedBatches(s *Store) int64 { return s.db.Stats.Batches.Load() }

// HoldClaims makes s queue every claim of pool until release, which runs
// what queued as one batch; queued reports how many claims wait.
func HoldClaims(s *Store, pool string) (queued func() int, release func()) {
	return lease.HoldClaims(s.leases.Engine, pool)
}
