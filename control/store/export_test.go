package store

import (
	"context"

	"github.com/kece-oj/kece/control/lease"
)

// HoldBatches makes s queue every batched call (completions, new
// submissions and renewals) until release, which runs what queued as batches; queued
// reports how many calls wait. Tests use it to build a batch for certain.
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
	return lease.HoldClaims(s.leases.Engine, pool)
}
