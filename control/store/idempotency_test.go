package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

func enqueueReq(id, src string, manifestID int64) store.EnqueueRequest {
	return store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: id, Language: "cpp17", Source: src, ManifestID: manifestID}
}

func TestEnqueueIdempotentConcurrentRetries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	replicas := []*store.Store{b.Store, b.SecondReplica(t)}
	const n = 16
	res := make([]store.EnqueueResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = replicas[i%2].Jobs().EnqueueIdempotent(b.Ctx, 7, "key-1", enqueueReq("s-1", "int main(){}", b.Manifest))
		}()
	}
	wg.Wait()
	created := 0
	for i := 0; i < n; i++ {
		require.NoError(t, errs[i])
		require.Equal(t, res[0].JobID, res[i].JobID)
		require.Equal(t, 1, res[i].Generation)
		if res[i].Created {
			created++
		}
	}
	require.Equal(t, 1, created, "one request created the job")
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_job`))
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_idempotency_key WHERE token_id = 7 AND job_id = ?`, res[0].JobID))

	// Same key, different body (content or identity): refused, nothing written.
	for _, req := range []store.EnqueueRequest{enqueueReq("s-1", "int main(){return 1;}", b.Manifest), enqueueReq("s-2", "int main(){}", b.Manifest)} {
		_, err := b.Store.Jobs().EnqueueIdempotent(b.Ctx, 7, "key-1", req)
		require.ErrorIs(t, err, store.ErrIdempotencyKeyReused)
		require.ErrorIs(t, err, store.ErrConflict)
	}
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_job`))
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_submission`))

	// Keys are per caller.
	r, err := b.Store.Jobs().EnqueueIdempotent(b.Ctx, 8, "key-1", enqueueReq("s-2", "int main(){}", b.Manifest))
	require.NoError(t, err)
	require.True(t, r.Created)

	// A request that conflicts with the submission records no key.
	_, err = b.Store.Jobs().EnqueueIdempotent(b.Ctx, 7, "key-2", enqueueReq("s-1", "other", b.Manifest))
	require.ErrorIs(t, err, store.ErrConflict)
	require.NotErrorIs(t, err, store.ErrIdempotencyKeyReused)
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM judge_idempotency_key WHERE idem_key = 'key-2'`))

	// Malformed keys; no key at all is plain Enqueue.
	for _, k := range []string{"has space", string(make([]byte, 129)), "tab\t"} {
		_, err := b.Store.Jobs().EnqueueIdempotent(b.Ctx, 7, k, enqueueReq("s-9", "x", b.Manifest))
		require.ErrorIs(t, err, store.ErrValidation)
	}
	r, err = b.Store.Jobs().EnqueueIdempotent(b.Ctx, 7, "", enqueueReq("s-1", "int main(){}", b.Manifest))
	require.NoError(t, err)
	require.Equal(t, res[0].JobID, r.JobID)
	require.False(t, r.Created)
}

func TestPurgeIdempotencyKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first, err := b.Store.Jobs().EnqueueIdempotent(b.Ctx, 1, "old", enqueueReq("p-1", "a", b.Manifest))
	require.NoError(t, err)
	_, err = b.Store.Jobs().EnqueueIdempotent(b.Ctx, 1, "new", enqueueReq("p-2", "a", b.Manifest))
	require.NoError(t, err)
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE judge_idempotency_key SET created_at = NOW(6) - INTERVAL 2 DAY WHERE idem_key = 'old'`)
	require.NoError(t, err)
	_, err = b.Store.Jobs().PurgeIdempotencyKeys(b.Ctx, time.Second)
	require.ErrorIs(t, err, store.ErrValidation)
	n, err := b.Store.Jobs().PurgeIdempotencyKeys(b.Ctx, 24*time.Hour)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	// The purged key is free: a different request may use it now.
	r, err := b.Store.Jobs().EnqueueIdempotent(b.Ctx, 1, "old", enqueueReq("p-3", "a", b.Manifest))
	require.NoError(t, err)
	require.NotEqual(t, first.JobID, r.JobID)
	_, err = b.Store.Jobs().EnqueueIdempotent(b.Ctx, 1, "new", enqueueReq("p-3", "a", b.Manifest))
	require.ErrorIs(t, err, store.ErrIdempotencyKeyReused)
}

// One key raced by different bodies, on two replicas: exactly one request
// enqueues and every other one is refused by the key (ErrIdempotencyKeyReused),
// whether its body names the same submission (which would otherwise conflict
// with the winner's job) or another one. Before the key was locked first, the
// same-submission losers answered ErrConflict or the key error by timing.
func TestEnqueueIdempotentRaceAnswersByTheKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	replicas := []*store.Store{b.Store, b.SecondReplica(t)}
	for round, sameSubmission := range []bool{true, false} {
		const n = 16
		key := fmt.Sprintf("race-%d", round)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("r%d-%d", round, i)
				if sameSubmission {
					id = fmt.Sprintf("r%d", round)
				}
				<-start
				_, errs[i] = replicas[i%2].Jobs().EnqueueIdempotent(b.Ctx, 7, key, enqueueReq(id, fmt.Sprintf("int main(){return %d;}", i), b.Manifest))
			}()
		}
		close(start)
		wg.Wait()
		won := 0
		for i, err := range errs {
			if err == nil {
				won++
				continue
			}
			require.ErrorIs(t, err, store.ErrIdempotencyKeyReused, "request %d (same submission: %t)", i, sameSubmission)
		}
		require.Equal(t, 1, won, "same submission: %t", sameSubmission)
		require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_idempotency_key WHERE idem_key = ? AND job_id <> 0`, key))
	}
	require.Equal(t, 2, b.Count(t, `SELECT COUNT(*) FROM judge_job`))
	require.Equal(t, 2, b.Count(t, `SELECT COUNT(*) FROM judge_submission WHERE current_job_id <> 0`), "losers leave no pointer behind")
}
