package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/store"
)

// finish claims the one queued job of sess's pool and completes it with res.
func (b *testBundle) finish(t *testing.T, sess store.Session, jobID int64, res store.Result) {
	t.Helper()
	c := b.ClaimEventually(t, b.Store, sess.NodeSession)
	require.Equal(t, jobID, c.JobID)
	_, err := b.Store.Leases().Complete(b.Ctx, sess.NodeSession, c.JobID, c.LeaseEpoch, res)
	require.NoError(t, err)
}

func jobIDs(jobs []store.Job) []int64 {
	out := make([]int64, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

func TestListJobsSearchesBySubmissionVerdictAndTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sess := b.Node(t, "cpp", b.Group(t, 8).ID, 1, true)
	ac := b.Enqueue(t, "ALGO", "s-ac")
	b.finish(t, sess, ac.JobID, storetest.ACResult())
	wa := b.Enqueue(t, "ALGO", "s-wa")
	b.finish(t, sess, wa.JobID, storetest.WAResult())
	rj, err := b.Store.Jobs().RejudgeJob(b.Ctx, wa.JobID, "ADMIN:t", "tests changed")
	require.NoError(t, err)
	other := b.Enqueue(t, "CONTEST", "s-wa")
	// Creation times an hour apart, after the node's check job (created
	// now), so a range can pick exact ones.
	day := time.Now().UTC().Add(24 * time.Hour).Truncate(time.Hour)
	for i, id := range []int64{ac.JobID, wa.JobID, rj.JobID, other.JobID} {
		_, err := b.DB.ExecContext(b.Ctx, `UPDATE judge_job SET created_at = ? WHERE id = ?`, day.Add(time.Duration(i)*time.Hour), id)
		require.NoError(t, err)
	}

	list := func(f store.JobFilter) []int64 {
		t.Helper()
		jobs, err := b.Store.Jobs().ListJobs(b.Ctx, f)
		require.NoError(t, err)
		for _, j := range jobs {
			require.Nil(t, j.Result, "lists carry no case results")
		}
		return jobIDs(jobs)
	}
	require.Equal(t, []int64{rj.JobID, wa.JobID}, list(store.JobFilter{SubmissionType: "ALGO", SubmissionID: "s-wa"}),
		"every generation of the submission, newest first; the same id of another type is not it")
	require.Equal(t, []int64{wa.JobID}, list(store.JobFilter{Verdict: "WA"}))
	require.Equal(t, []int64{ac.JobID}, list(store.JobFilter{Verdict: "AC", Kind: store.KindSubmission}))
	require.Empty(t, list(store.JobFilter{Verdict: "TLE"}))
	require.Equal(t, []int64{other.JobID, rj.JobID}, list(store.JobFilter{State: store.StateQueued, Pool: "cpp"}))
	require.Equal(t, []int64{rj.JobID, wa.JobID}, list(store.JobFilter{CreatedAfter: day.Add(time.Hour), CreatedBefore: day.Add(3 * time.Hour)}),
		"after is inclusive, before exclusive")
	require.Equal(t, []int64{other.JobID}, list(store.JobFilter{CreatedAfter: day.Add(3 * time.Hour)}))
	require.Equal(t, []int64{wa.JobID, ac.JobID}, list(store.JobFilter{CreatedBefore: day.Add(2 * time.Hour), Kind: store.KindSubmission}))

	// Keyset pages of one cover every job once, newest first, even when a
	// job arrives between pages.
	var seen []int64
	f := store.JobFilter{Kind: store.KindSubmission, Limit: 1}
	for {
		page := list(f)
		if len(seen) == 1 {
			b.Enqueue(t, "ALGO", "late")
		}
		if len(page) == 0 {
			break
		}
		seen = append(seen, page...)
		f.BeforeID = page[len(page)-1]
	}
	require.Equal(t, []int64{other.JobID, rj.JobID, wa.JobID, ac.JobID}, seen)
}

func TestJobFilterValidate(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for name, tc := range map[string]struct {
		f     store.JobFilter
		field string
	}{
		"submission id without type": {store.JobFilter{SubmissionID: "42"}, "submissionId"},
		"bad submission id":          {store.JobFilter{SubmissionType: "ALGO", SubmissionID: "a b"}, "submissionId"},
		"bad submission type":        {store.JobFilter{SubmissionType: "algo"}, "submissionType"},
		"unknown verdict":            {store.JobFilter{Verdict: "SYSTEM_ERROR"}, "verdict"},
		"unknown state":              {store.JobFilter{State: "DONE"}, "state"},
		"unknown kind":               {store.JobFilter{Kind: "OTHER"}, "kind"},
		"unknown pool":               {store.JobFilter{Pool: "cobol"}, "pool"},
		"empty range":                {store.JobFilter{CreatedAfter: now, CreatedBefore: now}, "createdAfter"},
		"reversed range":             {store.JobFilter{CreatedAfter: now, CreatedBefore: now.Add(-time.Second)}, "createdAfter"},
		"page too large":             {store.JobFilter{Limit: store.PageLimitMax + 1}, "limit"},
	} {
		err := tc.f.Validate()
		var ve *store.ValidationError
		require.ErrorAs(t, err, &ve, name)
		require.Equal(t, tc.field, ve.Field, name)
		require.ErrorIs(t, err, store.ErrValidation, name)
	}
	require.NoError(t, store.JobFilter{SubmissionType: "ALGO", SubmissionID: "42", Verdict: "PARTIAL", Pool: "mysql",
		CreatedAfter: now.Add(-time.Hour), CreatedBefore: now, Limit: store.PageLimitMax}.Validate())
}

func TestGenerationsListEveryJobOfTheSubmission(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.Enqueue(t, "ALGO", "g-1")
	second, err := b.Store.Jobs().RejudgeJob(b.Ctx, first.JobID, "ADMIN:t", "again")
	require.NoError(t, err)
	b.Enqueue(t, "ALGO", "g-2")
	for _, id := range []int64{first.JobID, second.JobID} {
		gens, err := b.Store.Jobs().Generations(b.Ctx, id)
		require.NoError(t, err)
		require.Len(t, gens, 2)
		require.Equal(t, second.JobID, gens[0].JobID)
		require.Equal(t, 2, gens[0].Generation)
		require.True(t, gens[0].Current)
		require.Equal(t, store.StateQueued, gens[0].State)
		require.Equal(t, first.JobID, gens[1].JobID)
		require.False(t, gens[1].Current)
		require.Equal(t, store.StateCancelled, gens[1].State, "a rejudge cancels the queued old generation")
		require.NotNil(t, gens[1].FinishedAt)
	}
	_, err = b.Store.Jobs().Generations(b.Ctx, 999999)
	require.ErrorIs(t, err, store.ErrNotFound)
}
