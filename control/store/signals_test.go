package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/store"
)

// The cross-replica pool signal commits with the work (and only then); the
// local notifier hears about it after commit.
func TestPoolSignalCommitsWithTheWork(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := &storetest.Wakes{}
	st := b.Store.WithNotifier(rec)
	before, err := st.PoolSignals(b.Ctx)
	require.NoError(t, err)
	_, err = st.Jobs().Enqueue(b.Ctx, store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "sig", Language: "python3", Source: "print(1)", ManifestID: b.Manifest})
	require.NoError(t, err)
	after, err := st.PoolSignals(b.Ctx)
	require.NoError(t, err)
	require.Greater(t, after["python"].NewestJob, before["python"].NewestJob, "the python pool's newest job moves")
	require.Equal(t, before["python"].Bumps, after["python"].Bumps, "a new job writes no signal row")
	require.Equal(t, before["cpp"], after["cpp"])
	require.Equal(t, []string{"python"}, rec.Take())

	tx, err := b.DB.BeginTx(b.Ctx, nil)
	require.NoError(t, err)
	_, err = st.Jobs().EnqueueTx(b.Ctx, tx, store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "sig2", Language: "python3", Source: "print(1)", ManifestID: b.Manifest})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	again, err := st.PoolSignals(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, after["python"], again["python"], "a rolled-back enqueue signals nothing")
}
