package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/store"
)

// The business status follows the phase a renew reports, and each visible
// change (PENDING → COMPILING → JUDGING → verdict) bumps statusVersion; a
// finished job reports the cases its verdict judged. Both result paths (the
// one-statement fast path for submissions, and the locking path) count them.
func TestStatusPhaseAndCaseCounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sess := b.Node(t, "cpp", b.Group(t, 4).ID, 2, true)
	var finished []int64
	for _, tc := range []struct {
		name   string
		result store.Result
		done   int
	}{
		{"all-cases", storetest.ACResult(), 2},
		{"stopped-at-first-failure", store.Result{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{
			Status: "WA", Score: 0, MaxScore: 100,
			Cases: []store.CaseResult{{CaseID: "c1", Status: "WA", Score: 0}}}}, 1},
	} {
		r := b.Enqueue(t, "ALGO", "phase-"+tc.name)
		st, err := b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "phase-"+tc.name)
		require.NoError(t, err)
		require.Equal(t, "PENDING", st.Status)
		v0 := st.StatusVersion

		c := b.ClaimEventually(t, b.Store, sess.NodeSession)
		require.Equal(t, r.JobID, c.JobID)
		st, err = b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "phase-"+tc.name)
		require.NoError(t, err)
		require.Equal(t, "COMPILING", st.Status)
		require.Greater(t, st.StatusVersion, v0)
		v1 := st.StatusVersion

		_, err = b.Store.Leases().Renew(b.Ctx, sess.NodeSession, []store.RenewItem{{JobID: c.JobID, LeaseEpoch: c.LeaseEpoch,
			ProgressSeq: 1, Phase: "JUDGING", CasesDone: 0, CasesTotal: 2}})
		require.NoError(t, err)
		st, err = b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "phase-"+tc.name)
		require.NoError(t, err)
		require.Equal(t, "JUDGING", st.Status)
		require.Equal(t, v1+1, st.StatusVersion, "COMPILING → JUDGING is a status change")

		// The same phase again (a periodic renew) changes nothing visible.
		_, err = b.Store.Leases().Renew(b.Ctx, sess.NodeSession, []store.RenewItem{{JobID: c.JobID, LeaseEpoch: c.LeaseEpoch,
			ProgressSeq: 2, Phase: "JUDGING", CasesDone: 1, CasesTotal: 2}})
		require.NoError(t, err)
		st, err = b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "phase-"+tc.name)
		require.NoError(t, err)
		require.Equal(t, v1+1, st.StatusVersion)

		_, err = b.Store.Leases().Complete(b.Ctx, sess.NodeSession, c.JobID, c.LeaseEpoch, tc.result)
		require.NoError(t, err)
		st, err = b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "phase-"+tc.name)
		require.NoError(t, err)
		require.Equal(t, tc.result.Verdict.Status, st.Status)
		require.Equal(t, tc.done, st.CasesDone, tc.name)
		require.Equal(t, 2, st.CasesTotal, tc.name)
		finished = append(finished, r.JobID)
	}

	// The locking path (CHECK jobs take it) counts too.
	var done, total int
	require.NoError(t, b.DB.QueryRowContext(b.Ctx,
		`SELECT cases_done, cases_total FROM judge_job WHERE kind = 'CHECK' AND node_id = ?`, sess.NodeID).Scan(&done, &total))
	require.Equal(t, 2, done)
	require.Equal(t, 2, total)

	// Waiting reads ask which jobs settled: the finished ones, not a queued
	// one, not an unknown id.
	queued := b.Enqueue(t, "ALGO", "still-queued").JobID
	settled, err := b.Store.Jobs().SettledJobs(b.Ctx, append([]int64{queued, 999999}, finished...))
	require.NoError(t, err)
	require.ElementsMatch(t, finished, settled)
}
