package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/store"
)

func TestEnqueueIsIdempotentUnderConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "1001", Language: "cpp17", Source: "int main(){}", ManifestID: b.Manifest}
	const n = 24
	ids := make([]int64, n)
	created := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := b.Store.Jobs().Enqueue(b.Ctx, req)
			require.NoError(t, err)
			ids[i], created[i] = r.JobID, r.Created
		}()
	}
	wg.Wait()
	nCreated := 0
	for i := range n {
		require.Equal(t, ids[0], ids[i], "every duplicate enqueue returns the same job")
		if created[i] {
			nCreated++
		}
	}
	require.Equal(t, 1, nCreated)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE submission_type = 'ALGO' AND submission_id = '1001'`))

	// Same identity, different request: a conflict, nothing written.
	req.Source = "int main(){return 1;}"
	_, err := b.Store.Jobs().Enqueue(b.Ctx, req)
	require.ErrorIs(t, err, store.ErrConflict)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_job`))
}

// T02: a failure in the middle of enqueue leaves nothing behind. A new
// submission's fast path is one statement (a failing batch statement is
// TestBatchedEnqueuesAnswerEachSubmission); the paths with several
// statements are transactions, failed here after the job rows.
func TestEnqueueFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	boom := errors.New("injected failure after job insert")
	failing := b.Store.WithHooks(&store.Hooks{AfterJobInsert: func() error { return boom }})
	_, err := failing.Jobs().EnqueueMany(b.Ctx, []store.EnqueueRequest{
		{SubmissionType: "ALGO", SubmissionID: "6", Language: "cpp17", Source: "x", ManifestID: b.Manifest},
		{SubmissionType: "ALGO", SubmissionID: "7", Language: "cpp17", Source: "x", ManifestID: b.Manifest}})
	require.ErrorIs(t, err, boom)
	require.Equal(t, 0, b.Count(t, `SELECT COUNT(*) FROM judge_job`))
	require.Equal(t, 0, b.Count(t, `SELECT COUNT(*) FROM judge_submission`))

	// The locking path: its pointer row and job go together.
	_, err = failing.Jobs().Cancel(b.Ctx, "ALGO", "7", "admin", "none yet")
	require.ErrorIs(t, err, store.ErrNotFound)
	tx, err := b.DB.BeginTx(b.Ctx, nil)
	require.NoError(t, err)
	_, err = failing.Jobs().EnqueueTx(b.Ctx, tx, store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "7", Language: "cpp17", Source: "x", ManifestID: b.Manifest})
	require.ErrorIs(t, err, boom)
	require.NoError(t, tx.Rollback())
	require.Equal(t, 0, b.Count(t, `SELECT COUNT(*) FROM judge_job`))
	require.Equal(t, 0, b.Count(t, `SELECT COUNT(*) FROM judge_submission`), "a cancel of nothing and a failed enqueue leave no pointer")

	// EnqueueTx joins the caller's transaction: a rollback takes the job with it.
	tx, err = b.DB.BeginTx(b.Ctx, nil)
	require.NoError(t, err)
	r, err := b.Store.Jobs().EnqueueTx(b.Ctx, tx, store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "8", Language: "cpp17", Source: "x", ManifestID: b.Manifest})
	require.NoError(t, err)
	require.True(t, r.Created)
	require.NoError(t, tx.Rollback())
	require.Equal(t, 0, b.Count(t, `SELECT COUNT(*) FROM judge_job`))

	// And a commit makes it claimable.
	tx, err = b.DB.BeginTx(b.Ctx, nil)
	require.NoError(t, err)
	r, err = b.Store.Jobs().EnqueueTx(b.Ctx, tx, store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "8", Language: "cpp17", Source: "x", ManifestID: b.Manifest})
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	g := b.Group(t, 4)
	sess := b.Node(t, "cpp", g.ID, 2, true)
	jobs, err := b.Store.Leases().Claim(b.Ctx, sess.NodeSession, 2)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, r.JobID, jobs[0].JobID)
}

func TestEnqueueRejectsBadInputAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ok := store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "1", Language: "cpp17", Source: "x", ManifestID: b.Manifest}
	cases := map[string]func(r *store.EnqueueRequest){
		"unknown language (pool)": func(r *store.EnqueueRequest) { r.Language = "cobol" },
		"missing manifest":        func(r *store.EnqueueRequest) { r.ManifestID = 999999 },
		"no manifest":             func(r *store.EnqueueRequest) { r.ManifestID = 0 },
		"priority out of range":   func(r *store.EnqueueRequest) { r.Priority = -1000 },
		"oversized snapshot":      func(r *store.EnqueueRequest) { r.Source = strings.Repeat("x", store.MaxSnapshotBytesDefault+1) },
		"empty source":            func(r *store.EnqueueRequest) { r.Source = "  " },
		"bad submission type":     func(r *store.EnqueueRequest) { r.SubmissionType = "algo" },
		"reserved type":           func(r *store.EnqueueRequest) { r.SubmissionType = "KECE_CHECK" },
		"bad submission id":       func(r *store.EnqueueRequest) { r.SubmissionID = "a b" },
		"sql against code tests":  func(r *store.EnqueueRequest) { r.Language = "mysql" },
	}
	for name, mutate := range cases {
		r := ok
		mutate(&r)
		_, err := b.Store.Jobs().Enqueue(b.Ctx, r)
		require.ErrorIs(t, err, store.ErrValidation, name)
		var ve *store.ValidationError
		require.ErrorAs(t, err, &ve, name)
		require.NotEmpty(t, ve.Field, name)
	}
	require.Equal(t, 0, b.Count(t, `SELECT COUNT(*) FROM judge_job`))
	require.Equal(t, 0, b.Count(t, `SELECT COUNT(*) FROM judge_submission`))
}

// T05: the same numeric id under two submission types stays two submissions.
func TestSameNumberDifferentTypesStaySeparate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	algo := b.Enqueue(t, "ALGO", "42")
	dbReq := store.EnqueueRequest{SubmissionType: "DATABASE", SubmissionID: "42", Language: "mysql", Source: "SELECT 1", ManifestID: b.SQLManifest}
	database, err := b.Store.Jobs().Enqueue(b.Ctx, dbReq)
	require.NoError(t, err)
	require.NotEqual(t, algo.JobID, database.JobID)

	g := b.Group(t, 4)
	cpp := b.Node(t, "cpp", g.ID, 2, true)
	jobs, err := b.Store.Leases().Claim(b.Ctx, cpp.NodeSession, 2)
	require.NoError(t, err)
	require.Len(t, jobs, 1, "the cpp node only sees the ALGO job")
	require.Equal(t, algo.JobID, jobs[0].JobID)
	_, err = b.Store.Leases().Complete(b.Ctx, cpp.NodeSession, jobs[0].JobID, jobs[0].LeaseEpoch, storetest.WAResult())
	require.NoError(t, err)

	st, err := b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "42")
	require.NoError(t, err)
	require.Equal(t, "WA", st.Status)
	st, err = b.Store.Jobs().SubmissionStatus(b.Ctx, "DATABASE", "42")
	require.NoError(t, err)
	require.Equal(t, "PENDING", st.Status)
	require.Equal(t, "WAITING_FOR_WORKER", st.WaitReason)
	require.Equal(t, database.JobID, st.JobID)
}

func TestRejudgeAndCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.Enqueue(t, "ALGO", "5")
	r, err := b.Store.Jobs().Rejudge(b.Ctx, "ALGO", "5", "admin", "new tests")
	require.NoError(t, err)
	require.Equal(t, 2, r.Generation)
	old, err := b.Store.Jobs().GetJob(b.Ctx, first.JobID)
	require.NoError(t, err)
	require.Equal(t, store.StateCancelled, old.State, "a queued old generation is cancelled")

	st, err := b.Store.Jobs().Cancel(b.Ctx, "ALGO", "5", "admin", "withdrawn")
	require.NoError(t, err)
	require.Equal(t, store.StateCancelled, st)
	s, err := b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "5")
	require.NoError(t, err)
	require.Equal(t, "CANCELLED", s.Status)
	// Every job that ends settles once: generation 1 (superseded) and 2 (cancelled).
	require.Equal(t, 2, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE submission_id = '5' AND payload LIKE '%"status":"CANCELLED"%'`))
	_, err = b.Store.Jobs().Cancel(b.Ctx, "ALGO", "5", "admin", "again")
	require.NoError(t, err)
	require.Equal(t, 2, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE submission_id = '5'`), "cancelling a cancelled job writes nothing")
	require.Equal(t, r.JobID, s.JobID)

	_, err = b.Store.Jobs().Cancel(b.Ctx, "ALGO", "nope", "admin", "")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = b.Store.Jobs().Rejudge(context.Background(), "ALGO", "nope", "admin", "")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestRejudgeJobMakesOneGenerationUnderRacingAdmins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.Enqueue(t, "ALGO", "race").JobID
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.Store.Jobs().RejudgeJob(b.Ctx, first, "admin", "racing")
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		require.ErrorIs(t, err, store.ErrJobNotCurrent)
	}
	require.Equal(t, 1, ok)
	require.Equal(t, 2, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE submission_id = 'race'`))
	require.Equal(t, 2, b.Count(t, `SELECT generation FROM judge_submission WHERE submission_id = 'race'`))

	_, err := b.Store.Jobs().RejudgeJob(b.Ctx, 999999, "admin", "x")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// Concurrent new submissions share one transaction; each caller gets its own
// job, and a duplicate identity in the batch gets the same job as the first
// (the batch falls back item by item, nothing is lost or doubled).
func TestBatchedEnqueuesAnswerEachSubmission(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.Enqueue(t, "ALGO", "exists")
	ids := []string{"a", "b", "c", "a", "exists", "d"}
	before := store.CommittedBatches(b.Store)
	results := make([]store.EnqueueResult, len(ids))
	errs := make([]error, len(ids))
	b.Together(t, len(ids), func(i int) {
		results[i], errs[i] = b.Store.Jobs().Enqueue(b.Ctx, store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: ids[i],
			Language: "cpp17", Source: "int main(){}", ManifestID: b.Manifest})
	})
	for i, id := range ids {
		require.NoError(t, errs[i], id)
		j, err := b.Store.Jobs().GetJob(b.Ctx, results[i].JobID)
		require.NoError(t, err)
		require.Equal(t, id, j.SubmissionID, "each caller gets the job of its own submission")
	}
	require.Equal(t, results[0].JobID, results[3].JobID, "the same identity twice is one job")
	require.Equal(t, before, store.CommittedBatches(b.Store), "a batch holding an existing submission falls back item by item")
	require.False(t, results[4].Created, "an existing submission is returned, not created")
	for _, i := range []int{1, 2, 5} {
		// The batch's INSERT failed on "exists" after writing some of its
		// rows; had any survived, its submission's own insert would have
		// found it and answered Created false.
		require.True(t, results[i].Created, "the failed batch statement left nothing: %s is created by its own insert", ids[i])
	}
	require.Equal(t, 5, b.Count(t, `SELECT COUNT(*) FROM judge_job`))
	// Only the identities that took the locking path ("exists" and "a"
	// again) have a pointer row; it names their generation 1.
	require.Equal(t, 2, b.Count(t, `SELECT COUNT(*) FROM judge_submission p JOIN judge_job j
		ON j.id = p.current_job_id AND j.submission_id = p.submission_id AND j.generation = 1`))
	require.Equal(t, 2, b.Count(t, `SELECT COUNT(*) FROM judge_submission`))
}

// Many submissions in one call: all new ones in one transaction; with an
// existing identical one the call still succeeds (that one is returned, not
// created); with a conflicting one nothing at all is written.
func TestEnqueueManyIsAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := func(id, src string) store.EnqueueRequest {
		return store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: id, Language: "cpp17", Source: src, ManifestID: b.Manifest}
	}
	got, err := b.Store.Jobs().EnqueueMany(b.Ctx, []store.EnqueueRequest{req("m1", "a"), req("m2", "a"), req("m3", "a")})
	require.NoError(t, err)
	require.Len(t, got, 3)
	for i, id := range []string{"m1", "m2", "m3"} {
		require.True(t, got[i].Created)
		j, err := b.Store.Jobs().GetJob(b.Ctx, got[i].JobID)
		require.NoError(t, err)
		require.Equal(t, id, j.SubmissionID)
	}

	again, err := b.Store.Jobs().EnqueueMany(b.Ctx, []store.EnqueueRequest{req("m4", "a"), req("m1", "a")})
	require.NoError(t, err)
	require.True(t, again[0].Created)
	require.False(t, again[1].Created)
	require.Equal(t, got[0].JobID, again[1].JobID, "the existing identical submission is returned")

	_, err = b.Store.Jobs().EnqueueMany(b.Ctx, []store.EnqueueRequest{req("m5", "a"), req("m2", "different")})
	require.ErrorIs(t, err, store.ErrConflict)
	require.ErrorContains(t, err, "submissions[1]")
	require.Equal(t, 0, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE submission_id = 'm5'`), "nothing of a refused call is written")

	_, err = b.Store.Jobs().EnqueueMany(b.Ctx, []store.EnqueueRequest{req("m6", "a"), req("m6", "a")})
	require.ErrorIs(t, err, store.ErrValidation)
	_, err = b.Store.Jobs().EnqueueMany(b.Ctx, []store.EnqueueRequest{req("m7", "a"), {SubmissionType: "ALGO", SubmissionID: "m8", Language: "cobol", Source: "x", ManifestID: b.Manifest}})
	require.ErrorIs(t, err, store.ErrUnknownLanguage)
	require.ErrorContains(t, err, "submissions[1]")
	require.Equal(t, 4, b.Count(t, `SELECT COUNT(*) FROM judge_job`), "m1..m4")
}

// A new submission's generation 1 has no pointer row; the first path that
// locks the submission must still find it, also while the INSERT that makes
// it is in flight: its locking read waits for that insert, and then writes
// the job into the pointer.
func TestLockingPathWaitsForGenerationOneInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// What the enqueue fast path does, held open: the job row alone.
	tx0, err := b.DB.BeginTx(b.Ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx0.Rollback() }()
	r, err := tx0.ExecContext(b.Ctx, `INSERT INTO judge_job (submission_type, submission_id, generation, kind, pool, runtime_spec,
	    manifest_id, request_snapshot, request_digest, state, max_attempts)
	  VALUES ('ALGO', 'in-flight-g1', 1, 'SUBMISSION', 'cpp', 'cpp17', ?, '{}', 'x', 'QUEUED', 3)`, b.Manifest)
	require.NoError(t, err)
	jobID, err := r.LastInsertId()
	require.NoError(t, err)

	done := make(chan error, 1)
	var state store.JobState
	go func() {
		var err error
		state, err = b.Store.Jobs().Cancel(b.Ctx, "ALGO", "in-flight-g1", "admin", "while inserted")
		done <- err
	}()
	// information_schema.innodb_trx is a cache InnoDB refreshes only after
	// 100 ms without reads: poll slower than that.
	require.Eventually(t, func() bool {
		return b.Count(t, `SELECT COUNT(*) FROM information_schema.innodb_trx
		  WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE '%in-flight-g1%'`) == 1
	}, 10*time.Second, 150*time.Millisecond, "the cancel waits on the uncommitted generation 1")
	require.NoError(t, tx0.Commit())
	require.NoError(t, <-done)
	require.Equal(t, store.StateCancelled, state)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_submission
	  WHERE submission_id = 'in-flight-g1' AND current_job_id = ? AND generation = 1`, jobID), "the pointer now names it")

	// A submission nobody made: not found, and no pointer row left behind.
	_, err = b.Store.Jobs().Cancel(b.Ctx, "ALGO", "never-made", "admin", "x")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = b.Store.Jobs().Rejudge(b.Ctx, "ALGO", "never-made", "admin", "x")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM judge_submission WHERE submission_id = 'never-made'`))

	// Rejudging a pointerless generation 1 makes generation 2 the current job
	// everywhere: the status read, the job's extras, the generations list.
	g1 := b.Enqueue(t, "ALGO", "g1-only")
	g2, err := b.Store.Jobs().Rejudge(b.Ctx, "ALGO", "g1-only", "admin", "again")
	require.NoError(t, err)
	require.Equal(t, 2, g2.Generation)
	st, err := b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "g1-only")
	require.NoError(t, err)
	require.Equal(t, g2.JobID, st.JobID)
	x1, err := b.Store.Jobs().JobExtras(b.Ctx, g1.JobID)
	require.NoError(t, err)
	x2, err := b.Store.Jobs().JobExtras(b.Ctx, g2.JobID)
	require.NoError(t, err)
	require.False(t, x1.Current)
	require.True(t, x2.Current)
	gens, err := b.Store.Jobs().Generations(b.Ctx, g1.JobID)
	require.NoError(t, err)
	require.Len(t, gens, 2)
	require.True(t, gens[0].Current)
	require.Equal(t, g2.JobID, gens[0].JobID)
	require.False(t, gens[1].Current)
}
