package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/internal/jobdb"
)

// Bounds of the verdict-mix window (the admin contract's `minutes`).
const (
	VerdictMixMinutesDefault = 15
	VerdictMixMinutesMax     = 24 * 60
	// VerdictMixBucketsMax: windows longer than this many minutes get
	// buckets wider than a minute.
	VerdictMixBucketsMax = 120
)

// Outcomes of a finished job besides its verdict status.
const (
	OutcomeSystemError = "SYSTEM_ERROR"
	OutcomeCancelled   = "CANCELLED"
)

// OutcomeCount is how many jobs ended one way.
type OutcomeCount struct {
	Outcome string
	Count   int64
}

// PoolVerdictMix is one pool's finished submissions in the window.
type PoolVerdictMix struct {
	Pool     string
	Finished int64
	// Outcomes are the non-zero counts, most frequent first (ties by name).
	Outcomes []OutcomeCount
	// Buckets count the finished jobs per bucket, oldest first; every
	// bucket of the window is present.
	Buckets []int64
	// WaitP95 is, per bucket, the 95th percentile of how long the
	// submissions that finished in it waited in the queue before their
	// first start (created to started); -1 where none finished.
	WaitP95 []time.Duration
}

// VerdictMix is how the submissions that finished in the last Window ended,
// per pool, read with the database clock.
type VerdictMix struct {
	AsOf   time.Time
	Window time.Duration
	// Bucket is the width of each of PoolVerdictMix.Buckets. The buckets
	// end at AsOf: bucket i starts at BucketStart(i). When Bucket does not
	// divide Window, the first bucket starts before the window and counts
	// only its part inside.
	Bucket time.Duration
	// Pools lists every pool, in the contracts' order.
	Pools []PoolVerdictMix
}

// BucketStart is when bucket i of PoolVerdictMix.Buckets starts.
func (m VerdictMix) BucketStart(i int) time.Time {
	n := int((m.Window + m.Bucket - 1) / m.Bucket)
	return m.AsOf.Add(-time.Duration(n-i) * m.Bucket)
}

// MixBucket is the bucket width of a window of the given minutes: one
// minute up to VerdictMixBucketsMax minutes, wider beyond so there are at
// most VerdictMixBucketsMax buckets.
func MixBucket(minutes int) time.Duration {
	return time.Duration((minutes+VerdictMixBucketsMax-1)/VerdictMixBucketsMax) * time.Minute
}

// outcomeOf names how a finished job ended.
func outcomeOf(state JobState, verdict string) string {
	switch state {
	case StateFailed:
		return OutcomeSystemError
	case StateCancelled:
		return OutcomeCancelled
	}
	return verdict
}

// verdictMixSQL counts finished submissions by pool, outcome and bucket;
// its arguments are the last bucket's index, the window's end, the bucket
// width in microseconds, and the window's start and end.
const verdictMixSQL = `SELECT pool, state, COALESCE(verdict, ''),
        ? - TIMESTAMPDIFF(MICROSECOND, finished_at, ?) DIV ? AS bucket, COUNT(*)
 FROM judge_job
 WHERE finished_at > ? AND finished_at <= ? AND kind = 'SUBMISSION'
 GROUP BY pool, state, verdict, bucket`

// verdictWaitSQL reads the queue wait of finished submissions by pool and
// bucket (arguments as verdictMixSQL's), newest first, at most
// verdictWaitRowsMax rows: a 24-hour window of a busy system is sampled
// by its most recent submissions rather than read whole.
const verdictWaitSQL = `SELECT pool, ? - TIMESTAMPDIFF(MICROSECOND, finished_at, ?) DIV ? AS bucket,
        TIMESTAMPDIFF(MICROSECOND, created_at, started_at)
 FROM judge_job
 WHERE finished_at > ? AND finished_at <= ? AND kind = 'SUBMISSION' AND started_at IS NOT NULL
 ORDER BY finished_at DESC LIMIT ?`

// verdictWaitRowsMax bounds the rows verdictWaitSQL reads.
const verdictWaitRowsMax = 50000

// waitP95 fills each pool's WaitP95 from the queue waits of the window.
func (s *core) waitP95(ctx context.Context, mix *VerdictMix, nb int, start time.Time) error {
	rows, err := s.db.Pool.QueryContext(ctx, verdictWaitSQL, nb-1, mix.AsOf, mix.Bucket.Microseconds(), start, mix.AsOf, verdictWaitRowsMax)
	if err != nil {
		return fmt.Errorf("store: queue wait: %w", err)
	}
	defer rows.Close()
	waits := map[string][][]time.Duration{}
	for _, p := range mix.Pools {
		waits[p.Pool] = make([][]time.Duration, nb)
	}
	for rows.Next() {
		var pool string
		var bucket, us int64
		if err := rows.Scan(&pool, &bucket, &us); err != nil {
			return fmt.Errorf("store: queue wait: %w", err)
		}
		if w := waits[pool]; w != nil && bucket >= 0 && bucket < int64(nb) {
			w[bucket] = append(w[bucket], time.Duration(max(us, 0))*time.Microsecond)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: queue wait: %w", err)
	}
	for i := range mix.Pools {
		pm := &mix.Pools[i]
		pm.WaitP95 = make([]time.Duration, nb)
		for b, ws := range waits[pm.Pool] {
			pm.WaitP95[b] = p95(ws)
		}
	}
	return nil
}

// p95 is the nearest-rank 95th percentile of ws; -1 for none.
func p95(ws []time.Duration) time.Duration {
	if len(ws) == 0 {
		return -1
	}
	slices.Sort(ws)
	rank := (95*len(ws) + 99) / 100 // ceil(0.95 n), 1-based
	return ws[rank-1]
}

// VerdictMix counts the SUBMISSION jobs that finished in the last minutes
// (1..VerdictMixMinutesMax) by pool and outcome, and by pool and bucket. One
// range scan of ix_job_finished (finished_at, pool, kind, state, verdict)
// covers it: only the window's rows are read, and no table row.
func (s *Jobs) VerdictMix(ctx context.Context, minutes int) (VerdictMix, error) {
	if minutes < 1 || minutes > VerdictMixMinutesMax {
		return VerdictMix{}, jobdb.Invalid("minutes", "must be 1..%d", VerdictMixMinutesMax)
	}
	mix := VerdictMix{Window: time.Duration(minutes) * time.Minute, Bucket: MixBucket(minutes)}
	if err := s.db.Pool.QueryRowContext(ctx, `SELECT NOW(6)`).Scan(&mix.AsOf); err != nil {
		return mix, fmt.Errorf("store: verdict mix: %w", err)
	}
	start := mix.AsOf.Add(-mix.Window)
	nb := int((mix.Window + mix.Bucket - 1) / mix.Bucket)
	byPool := map[string]*PoolVerdictMix{}
	counts := map[string]map[string]int64{}
	for _, p := range contracts.Pools() {
		mix.Pools = append(mix.Pools, PoolVerdictMix{Pool: p, Buckets: make([]int64, nb)})
		counts[p] = map[string]int64{}
	}
	for i := range mix.Pools {
		byPool[mix.Pools[i].Pool] = &mix.Pools[i]
	}
	// The bucket index is computed in SQL so the grouping stays small
	// (pools × outcomes × buckets rows at most) however busy the window.
	rows, err := s.db.Pool.QueryContext(ctx, verdictMixSQL, nb-1, mix.AsOf, mix.Bucket.Microseconds(), start, mix.AsOf)
	if err != nil {
		return mix, fmt.Errorf("store: verdict mix: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var pool, verdict string
		var state JobState
		var bucket, n int64
		if err := rows.Scan(&pool, &state, &verdict, &bucket, &n); err != nil {
			return mix, fmt.Errorf("store: verdict mix: %w", err)
		}
		pm := byPool[pool]
		if pm == nil || bucket < 0 || bucket >= int64(nb) {
			continue // a pool this binary does not know (an older replica's rows)
		}
		pm.Finished += n
		pm.Buckets[bucket] += n
		counts[pool][outcomeOf(state, verdict)] += n
	}
	if err := rows.Err(); err != nil {
		return mix, fmt.Errorf("store: verdict mix: %w", err)
	}
	for i := range mix.Pools {
		pm := &mix.Pools[i]
		for o, n := range counts[pm.Pool] {
			pm.Outcomes = append(pm.Outcomes, OutcomeCount{Outcome: o, Count: n})
		}
		slices.SortFunc(pm.Outcomes, func(a, b OutcomeCount) int {
			return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Outcome, b.Outcome))
		})
	}
	return mix, s.waitP95(ctx, &mix, nb, start)
}
