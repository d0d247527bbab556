package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

func TestIssueJoinCodeOnlyBeforeJoining(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.group(t, 4)
	n, first, err := b.store.CreateNode(b.ctx, store.NodeSpec{Name: "fresh", Pool: "cpp", HostGroupID: g.ID, Slots: 1}, "test")
	require.NoError(t, err)
	second, err := b.store.IssueJoinCode(b.ctx, n.ID, "admin", "lost the first code")
	require.NoError(t, err)
	_, err = b.store.Join(b.ctx, first.Code)
	require.Error(t, err, "the earlier code stops working")
	_, err = b.store.Join(b.ctx, second.Code)
	require.NoError(t, err)
	_, err = b.store.IssueJoinCode(b.ctx, n.ID, "admin", "again")
	require.ErrorIs(t, err, store.ErrNodeAlreadyJoined)
	require.ErrorIs(t, err, store.ErrConflict)
	_, err = b.store.IssueJoinCode(b.ctx, 999999, "admin", "x")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Equal(t, 1, b.count(t, `SELECT COUNT(*) FROM judge_audit WHERE node_id = ? AND action = 'node.join_code' AND actor = 'admin'`, n.ID))
}

func TestRotateCredentialKillsCredentialAndSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.group(t, 4)
	n, code, err := b.store.CreateNode(b.ctx, store.NodeSpec{Name: "rot", Pool: "cpp", HostGroupID: g.ID, Slots: 1}, "test")
	require.NoError(t, err)
	j, err := b.store.Join(b.ctx, code.Code)
	require.NoError(t, err)
	sess, err := b.store.OpenSession(b.ctx, j.Credential, "boot-a")
	require.NoError(t, err)

	fresh, err := b.store.RotateCredential(b.ctx, n.ID, "admin", "key leaked")
	require.NoError(t, err)
	_, err = b.store.AuthenticateSession(b.ctx, sess.Token)
	require.ErrorIs(t, err, store.ErrUnauthenticated)
	_, err = b.store.OpenSession(b.ctx, j.Credential, "boot-a")
	require.ErrorIs(t, err, store.ErrUnauthenticated)

	j2, err := b.store.Join(b.ctx, fresh.Code)
	require.NoError(t, err)
	_, err = b.store.OpenSession(b.ctx, j2.Credential, "boot-b")
	require.NoError(t, err)

	_, err = b.store.Revoke(b.ctx, n.ID, "admin", "gone")
	require.NoError(t, err)
	_, err = b.store.RotateCredential(b.ctx, n.ID, "admin", "x")
	require.ErrorIs(t, err, store.ErrNodeRevoked)
	_, err = b.store.IssueJoinCode(b.ctx, n.ID, "admin", "x")
	require.ErrorIs(t, err, store.ErrNodeRevoked)
}

func TestRejudgeJobMakesOneGenerationUnderRacingAdmins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.enqueue(t, "ALGO", "race").JobID
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = b.store.RejudgeJob(b.ctx, first, "admin", "racing")
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
	require.Equal(t, 2, b.count(t, `SELECT COUNT(*) FROM judge_job WHERE submission_id = 'race'`))
	require.Equal(t, 2, b.count(t, `SELECT generation FROM judge_submission WHERE submission_id = 'race'`))

	_, err := b.store.RejudgeJob(b.ctx, 999999, "admin", "x")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestRedeliverOnlyDeadEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.settleJobs(t, 2)
	evs, err := b.store.ListEventsPage(b.ctx, store.EventFilter{})
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Greater(t, evs[0].ID, evs[1].ID, "newest first")
	dead := evs[1].ID
	b.exec(t, `UPDATE judge_settlement_event SET state = 'DEAD', attempts = 5, last_error = 'HTTP 500' WHERE id = ?`, dead)

	page, err := b.store.ListEventsPage(b.ctx, store.EventFilter{State: store.EventDead})
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, "HTTP 500", page[0].LastError)
	page, err = b.store.ListEventsPage(b.ctx, store.EventFilter{BeforeID: evs[0].ID})
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, dead, page[0].ID)

	ev, err := b.store.RedeliverEvent(b.ctx, dead, "admin", "receiver fixed")
	require.NoError(t, err)
	require.Equal(t, store.EventPending, ev.State)
	require.Zero(t, ev.DeliveryAttempt)
	claimed, err := b.store.ClaimEvents(b.ctx, "consumer-a", 10, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, claimed, 2, "the redelivered event is claimable again")

	_, err = b.store.RedeliverEvent(b.ctx, dead, "admin", "again")
	require.ErrorIs(t, err, store.ErrEventNotDead)
	_, err = b.store.RedeliverEvent(b.ctx, 999999, "admin", "x")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Equal(t, 1, b.count(t, `SELECT COUNT(*) FROM judge_audit WHERE action = 'event.redeliver' AND reason = 'receiver fixed'`))
}

func TestNodeChecksShowJobState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.group(t, 4)
	sess := b.node(t, "cpp", g.ID, 2, false)
	chk, err := b.store.StartCheck(b.ctx, store.CheckRequest{NodeID: sess.NodeID, ManifestID: b.manifest, Language: "cpp17", Source: "x"}, "admin", "verify")
	require.NoError(t, err)
	jobID, active, err := b.store.ActiveCheck(b.ctx, sess.NodeID)
	require.NoError(t, err)
	require.True(t, active)
	require.Equal(t, chk.JobID, jobID)
	cs, err := b.store.NodeChecks(b.ctx, sess.NodeID, 20)
	require.NoError(t, err)
	require.Equal(t, store.CheckPending, cs[0].State)

	c := b.claimEventually(t, b.store, sess.NodeSession)
	cs, err = b.store.NodeChecks(b.ctx, sess.NodeID, 20)
	require.NoError(t, err)
	require.Equal(t, store.CheckRunning, cs[0].State)
	_, err = b.store.Complete(b.ctx, sess.NodeSession, c.JobID, c.LeaseEpoch, waResult())
	require.NoError(t, err)
	cs, err = b.store.NodeChecks(b.ctx, sess.NodeID, 20)
	require.NoError(t, err)
	require.Equal(t, store.CheckFailed, cs[0].State)
	require.NotEmpty(t, cs[0].Result)
	_, active, err = b.store.ActiveCheck(b.ctx, sess.NodeID)
	require.NoError(t, err)
	require.False(t, active)

	// A cancelled check never passes.
	chk2, err := b.store.StartCheck(b.ctx, store.CheckRequest{NodeID: sess.NodeID, ManifestID: b.manifest, Language: "cpp17", Source: "x"}, "admin", "verify")
	require.NoError(t, err)
	_, err = b.store.CancelJob(b.ctx, chk2.JobID, "admin", "stuck")
	require.NoError(t, err)
	cs, err = b.store.NodeChecks(b.ctx, sess.NodeID, 20)
	require.NoError(t, err)
	require.Equal(t, chk2.CheckID, cs[0].ID)
	require.Equal(t, store.CheckFailed, cs[0].State)
	require.Equal(t, "CANCELLED", cs[0].ErrorCode)
}
