package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/store"
)

func TestVerdictMixCountsRecentSubmissionsByPool(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sess := b.Node(t, "cpp", b.Group(t, 8).ID, 1, true) // its CHECK job is not counted
	ac1 := b.Enqueue(t, "ALGO", "m-ac1")
	b.finish(t, sess, ac1.JobID, storetest.ACResult())
	ac2 := b.Enqueue(t, "ALGO", "m-ac2")
	b.finish(t, sess, ac2.JobID, storetest.ACResult())
	wa := b.Enqueue(t, "ALGO", "m-wa")
	b.finish(t, sess, wa.JobID, storetest.WAResult())
	failed := b.Enqueue(t, "ALGO", "m-failed")
	for range 3 { // MaxAttempts: the third infrastructure error fails the job
		c := b.ClaimEventually(t, b.Store, sess.NodeSession)
		require.Equal(t, failed.JobID, c.JobID)
		_, err := b.Store.Leases().Complete(b.Ctx, sess.NodeSession, c.JobID, c.LeaseEpoch, storetest.InfraResult())
		require.NoError(t, err)
	}
	cancelled := b.Enqueue(t, "ALGO", "m-cancel")
	_, err := b.Store.Jobs().CancelJob(b.Ctx, cancelled.JobID, "ADMIN:t", "spam")
	require.NoError(t, err)
	old := b.Enqueue(t, "ALGO", "m-old")
	b.finish(t, sess, old.JobID, storetest.WAResult())
	b.Enqueue(t, "ALGO", "m-queued") // not finished: not counted
	// One AC finished 7.5 minutes ago, the old WA two hours ago.
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE judge_job SET finished_at = NOW(6) - INTERVAL 450 SECOND WHERE id = ?`, ac1.JobID)
	require.NoError(t, err)
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE judge_job SET finished_at = NOW(6) - INTERVAL 2 HOUR WHERE id = ?`, old.JobID)
	require.NoError(t, err)

	// Queue waits (created to first start): 30 s for the AC of bucket 7;
	// 1, 2 and 3 s for the started ones of the last minute (the cancelled
	// one never started).
	for id, wait := range map[int64]int{ac1.JobID: 30, ac2.JobID: 1, wa.JobID: 2, failed.JobID: 3} {
		_, err = b.DB.ExecContext(b.Ctx, `UPDATE judge_job SET started_at = finished_at - INTERVAL 100 MICROSECOND,
			created_at = finished_at - INTERVAL 100 MICROSECOND - INTERVAL ? SECOND WHERE id = ?`, wait, id)
		require.NoError(t, err)
	}

	mix, err := b.Store.Jobs().VerdictMix(b.Ctx, 15)
	require.NoError(t, err)
	require.Equal(t, 15*time.Minute, mix.Window)
	require.Equal(t, time.Minute, mix.Bucket)
	require.Len(t, mix.Pools, 5, "every pool is listed")
	var cpp store.PoolVerdictMix
	for _, p := range mix.Pools {
		require.Len(t, p.Buckets, 15)
		if p.Pool == "cpp" {
			cpp = p
			continue
		}
		require.Zero(t, p.Finished, p.Pool)
		require.Empty(t, p.Outcomes, p.Pool)
	}
	require.Equal(t, int64(5), cpp.Finished)
	require.Equal(t, []store.OutcomeCount{{Outcome: "AC", Count: 2}, {Outcome: "CANCELLED", Count: 1},
		{Outcome: "SYSTEM_ERROR", Count: 1}, {Outcome: "WA", Count: 1}}, cpp.Outcomes, "most frequent first, ties by name")
	var sum int64
	for _, n := range cpp.Buckets {
		sum += n
	}
	require.Equal(t, cpp.Finished, sum)
	require.Equal(t, int64(1), cpp.Buckets[7], "7.5 minutes ago is bucket 15-1-7")
	require.Equal(t, int64(4), cpp.Buckets[14], "the rest finished in the last minute")
	require.Equal(t, mix.AsOf.Add(-8*time.Minute), mix.BucketStart(7))
	require.Len(t, cpp.WaitP95, 15)
	require.Equal(t, 30*time.Second, cpp.WaitP95[7])
	require.Equal(t, 3*time.Second, cpp.WaitP95[14], "nearest rank: the 3rd of 3")
	require.Equal(t, time.Duration(-1), cpp.WaitP95[0], "nothing finished")

	wide, err := b.Store.Jobs().VerdictMix(b.Ctx, 180)
	require.NoError(t, err)
	require.Equal(t, 2*time.Minute, wide.Bucket, "at most 120 buckets")
	for _, p := range wide.Pools {
		require.Len(t, p.Buckets, 90)
		if p.Pool == "cpp" {
			require.Equal(t, int64(6), p.Finished, "the two-hour-old job is inside three hours")
		}
	}
	day, err := b.Store.Jobs().VerdictMix(b.Ctx, store.VerdictMixMinutesMax)
	require.NoError(t, err)
	require.Equal(t, 12*time.Minute, day.Bucket)
	require.Len(t, day.Pools[0].Buckets, store.VerdictMixBucketsMax)

	for _, bad := range []int{0, -1, store.VerdictMixMinutesMax + 1} {
		_, err := b.Store.Jobs().VerdictMix(b.Ctx, bad)
		require.ErrorIs(t, err, store.ErrValidation, "minutes %d", bad)
	}
}

func TestMixBucket(t *testing.T) {
	t.Parallel()
	for minutes, want := range map[int]time.Duration{1: time.Minute, 15: time.Minute, 120: time.Minute, 121: 2 * time.Minute,
		240: 2 * time.Minute, 241: 3 * time.Minute, 1440: 12 * time.Minute} {
		require.Equal(t, want, store.MixBucket(minutes), "minutes %d", minutes)
	}
}
