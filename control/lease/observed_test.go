package lease_test

import (
	"testing"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/lease"
	"github.com/kece-oj/kece/control/store"
	"github.com/stretchr/testify/require"
)

// The lease engine wakes no one: the waiters a reap, a release or a
// requeued result concern are woken by its decorator (lease.Observed),
// which Store.Leases hands out, after the engine's call returned.
func TestLeaseWakeUpsComeFromTheDecorator(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	rec := &storetest.Wakes{}
	st := b.Store.WithNotifier(rec)
	g := b.Group(t, 8)
	sess := b.Node(t, "cpp", g.ID, 1, true).NodeSession
	heard := rec.Take
	expired := func() lease.ClaimedJob {
		c := b.ClaimEventually(t, st, sess)
		b.ExpireLease(t, c.JobID)
		heard()
		return c
	}

	b.Enqueue(t, "ALGO", "wake")
	expired()
	got, err := st.Leases().Engine.Reap(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"cpp"}, got.Pools, "the engine says which pools got work back")
	require.Empty(t, heard(), "the bare engine wakes no one")

	expired()
	got, err = st.Leases().Reap(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, 1, got.Requeued)
	require.Equal(t, []string{"cpp"}, heard(), "the decorator wakes the pool that got work back")

	c := b.ClaimEventually(t, st, sess)
	heard()
	out, err := st.Leases().Complete(b.Ctx, sess, c.JobID, c.LeaseEpoch, storetest.InfraResult())
	require.NoError(t, err)
	require.Equal(t, store.StateQueued, out.JobState)
	require.Equal(t, []string{"cpp"}, heard(), "a requeued result wakes its pool")

	c = b.ClaimEventually(t, st, sess)
	heard()
	rel, err := st.Leases().Engine.Release(b.Ctx, sess, []lease.ReleaseItem{{JobID: c.JobID, LeaseEpoch: c.LeaseEpoch}}, lease.ReleaseDraining)
	require.NoError(t, err)
	require.Equal(t, lease.ReleaseReleased, rel[0].State)
	require.Empty(t, heard(), "the bare engine's release wakes no one")

	c = b.ClaimEventually(t, st, sess)
	heard()
	rel, err = st.Leases().Release(b.Ctx, sess, []lease.ReleaseItem{{JobID: c.JobID, LeaseEpoch: c.LeaseEpoch}}, lease.ReleaseDraining)
	require.NoError(t, err)
	require.Equal(t, lease.ReleaseReleased, rel[0].State)
	require.Equal(t, []string{"cpp"}, heard(), "a release frees the node's slot: its pool is woken")
}
