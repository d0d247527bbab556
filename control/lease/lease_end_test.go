package lease_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/dbtest"
	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/lease"
	"github.com/kece-oj/kece/control/store"
)

// A job whose node died goes back to its place in the queue: once its
// backoff has passed it is claimed before every job enqueued after it,
// however many there are.
func TestRetriedJobKeepsItsPlace(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 8)
	dead := b.Node(t, "cpp", g.ID, 1, true)
	alive := b.Node(t, "cpp", g.ID, 1, true)
	first := b.Enqueue(t, "ALGO", "place-first")
	c := b.ClaimEventually(t, b.Store, dead.NodeSession)
	require.Equal(t, first.JobID, c.JobID)
	b.StartJudging(t, b.Store, dead.NodeSession, c)
	var later []int64
	for i := range 30 {
		later = append(later, b.Enqueue(t, "ALGO", fmt.Sprintf("place-later-%d", i)).JobID)
	}
	// The node dies: its lease runs out and the reaper requeues the job
	// with a backoff that ends after the later jobs were enqueued.
	b.ExpireLease(t, first.JobID)
	st, err := b.Store.Leases().Reap(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Requeued)
	require.Eventually(t, func() bool {
		j, err := b.Store.Jobs().GetJob(b.Ctx, first.JobID)
		require.NoError(t, err)
		return j.State == store.StateQueued && j.AvailableIn == 0
	}, 5*time.Second, time.Millisecond, "backoff passes")
	got, err := b.Store.Leases().Claim(b.Ctx, alive.NodeSession, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, first.JobID, got[0].JobID, "the retried job goes first, not behind %d later jobs", len(later))
	require.EqualValues(t, 2, got[0].Attempt)
	require.NoError(t, completeOK(b, alive.NodeSession, got[0]))
	// The rest follow in enqueue order.
	for _, want := range later[:3] {
		got, err := b.Store.Leases().Claim(b.Ctx, alive.NodeSession, 1)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, want, got[0].JobID)
		require.NoError(t, completeOK(b, alive.NodeSession, got[0]))
	}
}

// While its backoff runs, a retried job is skipped (available_at is an
// eligibility filter) and the jobs behind it are served.
func TestRetryBackoffIsOnlyAFilter(t *testing.T) {
	t.Parallel()
	cfg := storetest.Config()
	cfg.BackoffBase, cfg.BackoffMax = time.Hour, time.Hour
	b := storetest.SetupWith(t, cfg)
	g := b.Group(t, 8)
	n := b.Node(t, "cpp", g.ID, 2, true)
	first := b.Enqueue(t, "ALGO", "filter-first")
	second := b.Enqueue(t, "ALGO", "filter-second")
	c := b.ClaimEventually(t, b.Store, n.NodeSession)
	require.Equal(t, first.JobID, c.JobID)
	_, err := b.Store.Leases().Complete(b.Ctx, n.NodeSession, c.JobID, c.LeaseEpoch, storetest.InfraResult())
	require.NoError(t, err)
	got, err := b.Store.Leases().Claim(b.Ctx, n.NodeSession, 2)
	require.NoError(t, err)
	require.Len(t, got, 1, "the job in its hour of backoff is not claimable")
	require.Equal(t, second.JobID, got[0].JobID)
}

// A claim answer lost on the way: the node sends the same claim request id
// again and gets the same leases, not new ones; no attempt is burned. A new
// request id claims new work.
func TestLostClaimAnswerReplaysTheSameLeases(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 8)
	n := b.Node(t, "cpp", g.ID, 3, true)
	for i := range 3 {
		b.Enqueue(t, "ALGO", fmt.Sprintf("replay-%d", i))
	}
	lost, err := b.Store.Leases().ClaimRequest(b.Ctx, n.NodeSession, 2, "claim-req-0001")
	require.NoError(t, err)
	require.Len(t, lost, 2)
	// The retry may reach another replica.
	again, err := b.SecondReplica(t).Leases().ClaimRequest(b.Ctx, n.NodeSession, 2, "claim-req-0001")
	require.NoError(t, err)
	require.Len(t, again, 2)
	for i := range lost {
		require.Equal(t, lost[i].JobID, again[i].JobID)
		require.Equal(t, lost[i].LeaseEpoch, again[i].LeaseEpoch, "the same lease, not a new one")
		require.Equal(t, lost[i].Attempt, again[i].Attempt)
		require.True(t, again[i].Replayed)
		require.Equal(t, lost[i].SubmissionID, again[i].SubmissionID)
	}
	require.Equal(t, 2, b.Count(t, `SELECT COUNT(*) FROM judge_job_attempt a JOIN judge_job j ON j.id = a.job_id
		WHERE j.kind = 'SUBMISSION'`), "no attempt was added")
	require.Equal(t, 2, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE kind = 'SUBMISSION' AND attempt_count = 1`))
	// The replayed leases are the node's to finish.
	for _, c := range again {
		require.NoError(t, completeOK(b, n.NodeSession, c))
	}
	// A new request id is a new claim.
	more, err := b.Store.Leases().ClaimRequest(b.Ctx, n.NodeSession, 2, "claim-req-0002")
	require.NoError(t, err)
	require.Len(t, more, 1)
	require.False(t, more[0].Replayed)
	// Leases that ended are never answered again.
	done, err := b.Store.Leases().ClaimRequest(b.Ctx, n.NodeSession, 2, "claim-req-0001")
	require.NoError(t, err)
	require.Empty(t, done)
	_, err = b.Store.Leases().ClaimRequest(b.Ctx, n.NodeSession, 1, "bad id!")
	require.ErrorIs(t, err, store.ErrValidation)
}

// A released lease requeues at once, its attempt is not counted, and the
// node can never commit or renew it afterwards (fencing).
func TestReleaseRequeuesAtOnceWithoutCountingAnAttempt(t *testing.T) {
	t.Parallel()
	cfg := storetest.Config()
	cfg.BackoffBase, cfg.BackoffMax = time.Hour, time.Hour // a release must not wait for it
	b := storetest.SetupWith(t, cfg)
	g := b.Group(t, 8)
	a := b.Node(t, "cpp", g.ID, 1, true)
	other := b.Node(t, "cpp", g.ID, 1, true)
	job := b.Enqueue(t, "ALGO", "release")
	c := b.ClaimEventually(t, b.Store, a.NodeSession)
	res, err := b.Store.Leases().Release(b.Ctx, a.NodeSession, []lease.ReleaseItem{{JobID: c.JobID, LeaseEpoch: c.LeaseEpoch}}, lease.ReleaseDraining)
	require.NoError(t, err)
	require.Equal(t, lease.ReleaseReleased, res[0].State)
	require.Equal(t, store.StateQueued, res[0].JobState)
	j, err := b.Store.Jobs().GetJob(b.Ctx, job.JobID)
	require.NoError(t, err)
	require.Equal(t, store.StateQueued, j.State)
	require.Zero(t, j.AvailableIn, "requeued at once")
	require.Zero(t, j.AttemptCount, "an unstarted release is not an attempt")
	require.Equal(t, 1, j.UnstartedAttempts)
	// The same release again (its answer was lost): the same answer.
	res, err = b.Store.Leases().Release(b.Ctx, a.NodeSession, []lease.ReleaseItem{{JobID: c.JobID, LeaseEpoch: c.LeaseEpoch}}, lease.ReleaseDraining)
	require.NoError(t, err)
	require.Equal(t, lease.ReleaseReleased, res[0].State)
	require.Empty(t, res[0].JobState)

	// Fencing: the released lease can neither renew nor commit.
	rr, err := b.Store.Leases().Renew(b.Ctx, a.NodeSession, []lease.RenewItem{{JobID: c.JobID, LeaseEpoch: c.LeaseEpoch, ProgressSeq: 1, Phase: "JUDGING"}})
	require.NoError(t, err)
	require.Equal(t, lease.RenewLost, rr[0].State)
	_, err = b.Store.Leases().Complete(b.Ctx, a.NodeSession, c.JobID, c.LeaseEpoch, storetest.ACResult())
	require.ErrorIs(t, err, store.ErrLeaseLost)

	c2, err := b.Store.Leases().Claim(b.Ctx, other.NodeSession, 1)
	require.NoError(t, err)
	require.Len(t, c2, 1)
	require.Equal(t, job.JobID, c2[0].JobID)
	require.EqualValues(t, 1, c2[0].Attempt, "still the first counted attempt")
	// Another node's lease is not A's to release.
	res, err = b.Store.Leases().Release(b.Ctx, a.NodeSession, []lease.ReleaseItem{{JobID: c2[0].JobID, LeaseEpoch: c2[0].LeaseEpoch}}, lease.ReleaseShuttingDown)
	require.NoError(t, err)
	require.Equal(t, lease.ReleaseLost, res[0].State)
	_, err = b.Store.Leases().Complete(b.Ctx, a.NodeSession, c.JobID, c.LeaseEpoch, storetest.ACResult())
	require.ErrorIs(t, err, store.ErrLeaseLost, "even once the job runs again")

	// A started lease released counts as an attempt.
	b.StartJudging(t, b.Store, other.NodeSession, c2[0])
	res, err = b.Store.Leases().Release(b.Ctx, other.NodeSession, []lease.ReleaseItem{{JobID: c2[0].JobID, LeaseEpoch: c2[0].LeaseEpoch}}, lease.ReleaseShuttingDown)
	require.NoError(t, err)
	require.Equal(t, lease.ReleaseReleased, res[0].State)
	j, err = b.Store.Jobs().GetJob(b.Ctx, job.JobID)
	require.NoError(t, err)
	require.Equal(t, 1, j.AttemptCount)
	require.Equal(t, 1, j.UnstartedAttempts)
	atts, err := b.Store.Jobs().Attempts(b.Ctx, job.JobID)
	require.NoError(t, err)
	require.Len(t, atts, 2)
	require.Equal(t, lease.AttemptReleased, atts[0].Outcome)
	require.Equal(t, lease.ReleaseDraining, atts[0].ErrorClass)
	require.False(t, *atts[0].JudgingStarted)
	require.True(t, *atts[1].JudgingStarted)

	_, err = b.Store.Leases().Release(b.Ctx, a.NodeSession, []lease.ReleaseItem{{JobID: c.JobID, LeaseEpoch: c.LeaseEpoch}}, "BORED")
	require.ErrorIs(t, err, store.ErrValidation)
}

// T09, never started: a job whose node dies before it reports a start is
// retried without counting attempts, but not forever: at
// MaxUnstartedAttempts it fails with NEVER_STARTED, one settlement.
func TestNeverStartedLeasesEndAtTheirOwnCap(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	n := b.Node(t, "cpp", g.ID, 1, true)
	job := b.Enqueue(t, "ALGO", "never")
	for i := 1; i <= store.MaxUnstartedAttemptsDefault; i++ {
		c := b.ClaimEventually(t, b.Store, n.NodeSession)
		require.EqualValues(t, 1, c.Attempt, "never-started leases are not counted")
		b.ExpireLease(t, job.JobID)
		st, err := b.Store.Leases().Reap(b.Ctx)
		require.NoError(t, err)
		if i < store.MaxUnstartedAttemptsDefault {
			require.Equal(t, 1, st.Requeued, "round %d: more than max_attempts (3) unstarted leases still retry", i)
		} else {
			require.Equal(t, 1, st.Failed)
		}
	}
	j, err := b.Store.Jobs().GetJob(b.Ctx, job.JobID)
	require.NoError(t, err)
	require.Equal(t, store.StateFailed, j.State)
	require.Equal(t, lease.NeverStartedErrorCode, j.LastErrorCode)
	require.Zero(t, j.AttemptCount)
	require.Equal(t, store.MaxUnstartedAttemptsDefault, j.UnstartedAttempts)
	s, err := b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "never")
	require.NoError(t, err)
	require.Equal(t, "SYSTEM_ERROR", s.Status)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE job_id = ? AND payload LIKE '%NEVER_STARTED%'`, job.JobID))
	atts, err := b.Store.Jobs().Attempts(b.Ctx, job.JobID)
	require.NoError(t, err)
	require.Len(t, atts, store.MaxUnstartedAttemptsDefault)
	for _, a := range atts {
		require.Equal(t, lease.AttemptExpired, a.Outcome)
		require.False(t, *a.JudgingStarted)
	}
}

// A node process restarts (new boot): opening the new session takes back
// the old session's leases at once, counted only where judging started; the
// old session can never commit. Re-opening the same boot takes nothing.
func TestNewBootRequeuesTheOldSessionsLeases(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 8)
	old, cred := b.NodeWithCredential(t, "cpp", g.ID, 2, true)
	started, unstarted := b.Enqueue(t, "ALGO", "boot-started"), b.Enqueue(t, "ALGO", "boot-unstarted")
	got, err := b.Store.Leases().Claim(b.Ctx, old.NodeSession, 2)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, started.JobID, got[0].JobID)
	b.StartJudging(t, b.Store, old.NodeSession, got[0])

	bootID := func() string {
		var boot string
		require.NoError(t, b.DB.QueryRowContext(b.Ctx, `SELECT boot_id FROM judge_node WHERE id = ?`, old.NodeID).Scan(&boot))
		return boot
	}
	same, err := b.Store.Credentials().OpenSession(b.Ctx, cred, bootID())
	require.NoError(t, err)
	require.Equal(t, old.SessionEpoch, same.SessionEpoch)
	require.Zero(t, same.RequeuedLeases, "a retried open of the same boot takes nothing back")

	fresh, err := b.Store.Credentials().OpenSession(b.Ctx, cred, "boot-restarted-1")
	require.NoError(t, err)
	require.Equal(t, old.SessionEpoch+1, fresh.SessionEpoch)
	require.Equal(t, 2, fresh.RequeuedLeases)
	js, err := b.Store.Jobs().GetJob(b.Ctx, started.JobID)
	require.NoError(t, err)
	require.Equal(t, store.StateQueued, js.State)
	require.Equal(t, 1, js.AttemptCount, "judging had started: counted")
	require.Equal(t, lease.NodeRestartedErrorCode, js.LastErrorCode)
	ju, err := b.Store.Jobs().GetJob(b.Ctx, unstarted.JobID)
	require.NoError(t, err)
	require.Equal(t, store.StateQueued, ju.State)
	require.Zero(t, ju.AttemptCount, "never started: not counted")
	require.Equal(t, 1, ju.UnstartedAttempts)

	// Fencing: the old boot can neither commit nor renew.
	_, err = b.Store.Leases().Complete(b.Ctx, old.NodeSession, got[0].JobID, got[0].LeaseEpoch, storetest.ACResult())
	require.Error(t, err)
	require.ErrorIs(t, err, store.ErrSessionSuperseded)
	rr, err := b.Store.Leases().Renew(b.Ctx, old.NodeSession, []lease.RenewItem{{JobID: got[1].JobID, LeaseEpoch: got[1].LeaseEpoch, ProgressSeq: 1, Phase: "JUDGING"}})
	require.NoError(t, err)
	require.Equal(t, lease.RenewLost, rr[0].State)

	// The new process picks them up.
	c := b.ClaimEventually(t, b.Store, fresh.NodeSession)
	require.Equal(t, started.JobID, c.JobID)
	require.Greater(t, c.LeaseEpoch, got[0].LeaseEpoch)
	atts, err := b.Store.Jobs().Attempts(b.Ctx, started.JobID)
	require.NoError(t, err)
	require.Equal(t, lease.AttemptSessionReplaced, atts[0].Outcome)
}

// A node that stops heartbeating loses its leases after HeartbeatTTL, long
// before they run out; its late result is refused. A slow node that keeps
// heartbeating keeps its leases however long it takes.
func TestSilentNodeLosesItsLeasesAndAliveNodeKeepsThem(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	cfg := storetest.Config()
	cfg.LeaseTTL, cfg.HeartbeatTTL = time.Minute, 2*time.Second
	reaper, err := store.New(dbtest.OpenDSN(t, b.DSN), cfg)
	require.NoError(t, err)
	g := b.Group(t, 8)
	silent := b.Node(t, "cpp", g.ID, 1, true)
	slow := b.Node(t, "cpp", g.ID, 1, true)
	other := b.Node(t, "cpp", g.ID, 1, true)
	js, jl := b.Enqueue(t, "ALGO", "silent"), b.Enqueue(t, "ALGO", "slow")
	cs := b.ClaimEventually(t, b.Store, silent.NodeSession)
	require.Equal(t, js.JobID, cs.JobID)
	b.StartJudging(t, b.Store, silent.NodeSession, cs)
	cl := b.ClaimEventually(t, b.Store, slow.NodeSession)
	require.Equal(t, jl.JobID, cl.JobID)
	b.StartJudging(t, b.Store, slow.NodeSession, cl)
	// The silent node's last sign of life was 3 s ago; the slow node's
	// session is an hour old but it heartbeats.
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE judge_node SET last_heartbeat_at = NOW(6) - INTERVAL 3 SECOND,
		session_started_at = NOW(6) - INTERVAL 3 SECOND WHERE id = ?`, silent.NodeID)
	require.NoError(t, err)
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE judge_node SET session_started_at = NOW(6) - INTERVAL 1 HOUR WHERE id = ?`, slow.NodeID)
	require.NoError(t, err)
	_, err = b.Store.Credentials().Heartbeat(b.Ctx, slow.NodeSession, store.HeartbeatReport{RuntimeVersion: "rt-1"})
	require.NoError(t, err)

	st, err := reaper.Leases().Reap(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, lease.ReapStats{Requeued: 1, Pools: []string{"cpp"}, Silent: 1}, st)
	j, err := b.Store.Jobs().GetJob(b.Ctx, js.JobID)
	require.NoError(t, err)
	require.Equal(t, store.StateQueued, j.State)
	require.Equal(t, lease.NodeSilentErrorCode, j.LastErrorCode)
	j, err = b.Store.Jobs().GetJob(b.Ctx, jl.JobID)
	require.NoError(t, err)
	require.Equal(t, store.StateRunning, j.State, "a node that heartbeats keeps its lease")
	require.Equal(t, slow.NodeID, j.NodeID)

	// The silent node wakes up and posts: fenced.
	_, err = b.Store.Leases().Complete(b.Ctx, silent.NodeSession, cs.JobID, cs.LeaseEpoch, storetest.ACResult())
	require.ErrorIs(t, err, store.ErrLeaseLost)
	c := b.ClaimEventually(t, b.Store, other.NodeSession)
	require.Equal(t, js.JobID, c.JobID)
	require.NoError(t, completeOK(b, other.NodeSession, c))
	require.NoError(t, completeOK(b, slow.NodeSession, cl))
	atts, err := b.Store.Jobs().Attempts(b.Ctx, js.JobID)
	require.NoError(t, err)
	require.Equal(t, lease.AttemptNodeSilent, atts[0].Outcome)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE job_id = ?`, js.JobID))
}

func completeOK(b *storetest.Bundle, sess store.NodeSession, c lease.ClaimedJob) error {
	r, err := b.Store.Leases().Complete(b.Ctx, sess, c.JobID, c.LeaseEpoch, storetest.ACResult())
	if err == nil && r.Disposition != lease.Accepted {
		return fmt.Errorf("job %d: %s", c.JobID, r.Disposition)
	}
	return err
}

// A CHECK job stays one try: released (or lost) before it started, it fails
// rather than waiting in the queue; the admin runs verify again.
func TestUnstartedCheckJobIsNotRequeued(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	n := b.Node(t, "cpp", g.ID, 1, false)
	chk, err := b.Store.Nodes().StartCheck(b.Ctx, store.CheckRequest{NodeID: n.NodeID, ManifestID: b.Manifest, Language: "cpp17", Source: "check"}, "test", "verify")
	require.NoError(t, err)
	got, err := b.Store.Leases().Claim(b.Ctx, n.NodeSession, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, chk.JobID, got[0].JobID)
	res, err := b.Store.Leases().Release(b.Ctx, n.NodeSession, []lease.ReleaseItem{{JobID: got[0].JobID, LeaseEpoch: got[0].LeaseEpoch}}, lease.ReleaseShuttingDown)
	require.NoError(t, err)
	require.Equal(t, store.StateFailed, res[0].JobState)
	j, err := b.Store.Jobs().GetJob(b.Ctx, chk.JobID)
	require.NoError(t, err)
	require.Equal(t, store.StateFailed, j.State)
	require.Equal(t, lease.ReleaseShuttingDown, j.LastErrorCode)
}
