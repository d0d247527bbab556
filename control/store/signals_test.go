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
