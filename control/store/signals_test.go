package store_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

type recordingNotifier struct {
	mu    sync.Mutex
	pools []string
}

func (r *recordingNotifier) Notify(pool string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pools = append(r.pools, pool)
}

// The cross-replica pool signal commits with the work (and only then); the
// local notifier hears about it after commit.
func TestPoolSignalCommitsWithTheWork(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := &recordingNotifier{}
	st := b.store.WithNotifier(rec)
	before, err := st.PoolSignals(b.ctx)
	require.NoError(t, err)
	_, err = st.Jobs().Enqueue(b.ctx, store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "sig", Language: "python3", Source: "print(1)", ManifestID: b.manifest})
	require.NoError(t, err)
	after, err := st.PoolSignals(b.ctx)
	require.NoError(t, err)
	require.Greater(t, after["python"].NewestJob, before["python"].NewestJob, "the python pool's newest job moves")
	require.Equal(t, before["python"].Bumps, after["python"].Bumps, "a new job writes no signal row")
	require.Equal(t, before["cpp"], after["cpp"])
	require.Equal(t, []string{"python"}, rec.pools)

	tx, err := b.db.BeginTx(b.ctx, nil)
	require.NoError(t, err)
	_, err = st.Jobs().EnqueueTx(b.ctx, tx, store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "sig2", Language: "python3", Source: "print(1)", ManifestID: b.manifest})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	again, err := st.PoolSignals(b.ctx)
	require.NoError(t, err)
	require.Equal(t, after["python"], again["python"], "a rolled-back enqueue signals nothing")
}

// The lease engine wakes no one: the waiters a reap, a release or a
// requeued result concern are woken by its decorator (lease.Observed),
// which Store.Leases hands out, after the engine's call returned.
func TestLeaseWakeUpsComeFromTheDecorator(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := &recordingNotifier{}
	st := b.store.WithNotifier(rec)
	g := b.group(t, 8)
	sess := b.node(t, "cpp", g.ID, 1, true).NodeSession
	heard := func() []string {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		out := rec.pools
		rec.pools = nil
		return out
	}
	expired := func() store.ClaimedJob {
		c := b.claimEventually(t, st, sess)
		b.expireLease(t, c.JobID)
		heard()
		return c
	}

	b.enqueue(t, "ALGO", "wake")
	expired()
	got, err := st.Leases().Engine.Reap(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"cpp"}, got.Pools, "the engine says which pools got work back")
	require.Empty(t, heard(), "the bare engine wakes no one")

	expired()
	got, err = st.Leases().Reap(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, got.Requeued)
	require.Equal(t, []string{"cpp"}, heard(), "the decorator wakes the pool that got work back")

	c := b.claimEventually(t, st, sess)
	heard()
	out, err := st.Leases().Complete(b.ctx, sess, c.JobID, c.LeaseEpoch, infraResult())
	require.NoError(t, err)
	require.Equal(t, store.StateQueued, out.JobState)
	require.Equal(t, []string{"cpp"}, heard(), "a requeued result wakes its pool")

	c = b.claimEventually(t, st, sess)
	heard()
	rel, err := st.Leases().Engine.Release(b.ctx, sess, []store.ReleaseItem{{JobID: c.JobID, LeaseEpoch: c.LeaseEpoch}}, store.ReleaseDraining)
	require.NoError(t, err)
	require.Equal(t, store.ReleaseReleased, rel[0].State)
	require.Empty(t, heard(), "the bare engine's release wakes no one")

	c = b.claimEventually(t, st, sess)
	heard()
	rel, err = st.Leases().Release(b.ctx, sess, []store.ReleaseItem{{JobID: c.JobID, LeaseEpoch: c.LeaseEpoch}}, store.ReleaseDraining)
	require.NoError(t, err)
	require.Equal(t, store.ReleaseReleased, rel[0].State)
	require.Equal(t, []string{"cpp"}, heard(), "a release frees the node's slot: its pool is woken")
}
