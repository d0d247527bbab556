package lease_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/lease"
	"github.com/kece-oj/kece/control/store"
)

// A drain deadline passing takes the node's leases back on the real store:
// the jobs are QUEUED again at once with their attempt not counted, the old
// lease is fenced (renew LOST, result refused), the node is DISABLED, and
// all of it is audited. Before the deadline nothing happens.
func TestDrainDeadlineRequeuesLeasesUncountedAndDisables(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 8)
	sess := b.Node(t, "cpp", g.ID, 4, true)
	other := b.Node(t, "cpp", g.ID, 4, false) // not enabled: claims nothing, keeps no lease
	j1, j2 := b.Enqueue(t, "ALGO", "dd-1"), b.Enqueue(t, "ALGO", "dd-2")
	claimed, err := b.Store.Leases().Claim(b.Ctx, sess.NodeSession, 2)
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	attemptsBefore := b.Count(t, `SELECT SUM(attempt_count) FROM judge_job WHERE id IN (?, ?)`, j1.JobID, j2.JobID)
	require.Equal(t, 2, attemptsBefore)

	_, err = b.Store.Nodes().DrainUntil(b.Ctx, sess.NodeID, -time.Second, "admin", "x")
	require.ErrorIs(t, err, store.ErrValidation)
	n, err := b.Store.Nodes().DrainUntil(b.Ctx, sess.NodeID, time.Hour, "admin", "kernel update")
	require.NoError(t, err)
	require.Equal(t, store.NodeDraining, n.DesiredState)
	require.NotNil(t, n.DrainDeadlineAt)

	// Not due yet: nothing changes.
	st, err := b.Store.Leases().ExpireDrainDeadlines(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, lease.DrainExpiry{}, st)
	require.Equal(t, 2, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE node_id = ? AND state = 'RUNNING'`, sess.NodeID))

	// The deadline passes (moved into the past on the database clock).
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE judge_node SET drain_deadline_at = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, sess.NodeID)
	require.NoError(t, err)
	st, err = b.Store.Leases().ExpireDrainDeadlines(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, lease.DrainExpiry{Nodes: 1, Requeued: 2, Pools: []string{"cpp"}}, st)

	n, err = b.Store.Nodes().GetNode(b.Ctx, sess.NodeID)
	require.NoError(t, err)
	require.Equal(t, store.NodeDisabled, n.DesiredState)
	require.Nil(t, n.DrainDeadlineAt)
	require.Equal(t, 0, n.SlotsBusy)
	require.Equal(t, 2, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE id IN (?, ?) AND state = 'QUEUED' AND node_id IS NULL
		AND available_at <= NOW(6) AND last_error_code = 'DRAIN_DEADLINE'`, j1.JobID, j2.JobID))
	require.Equal(t, 0, b.Count(t, `SELECT SUM(attempt_count) FROM judge_job WHERE id IN (?, ?)`, j1.JobID, j2.JobID),
		"taken-back leases do not count as attempts")
	require.Equal(t, 2, b.Count(t, `SELECT COUNT(*) FROM judge_job_attempt WHERE node_id = ? AND outcome = 'REVOKED'
		AND error_class = 'DRAIN_DEADLINE' AND ended_at IS NOT NULL`, sess.NodeID))
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_audit WHERE node_id = ? AND action = 'node.drain_deadline'`, sess.NodeID))
	require.Equal(t, 2, b.Count(t, `SELECT COUNT(*) FROM judge_audit WHERE node_id = ? AND action = 'job.lease_revoked'`, sess.NodeID))

	// Fenced: the old lease can neither renew nor post a result.
	rr, err := b.Store.Leases().Renew(b.Ctx, sess.NodeSession, []lease.RenewItem{{JobID: claimed[0].JobID, LeaseEpoch: claimed[0].LeaseEpoch, ProgressSeq: 1}})
	require.NoError(t, err)
	require.NotEqual(t, lease.RenewOK, rr[0].State)
	_, err = b.Store.Leases().Complete(b.Ctx, sess.NodeSession, claimed[0].JobID, claimed[0].LeaseEpoch, storetest.ACResult())
	require.ErrorIs(t, err, store.ErrLeaseLost)

	// Another node picks the jobs up with a new lease epoch, first attempt.
	b.VerifyAndEnable(t, other, "cpp")
	again, err := b.Store.Leases().Claim(b.Ctx, other.NodeSession, 2)
	require.NoError(t, err)
	require.Len(t, again, 2)
	oldEpoch := map[int64]int64{claimed[0].JobID: claimed[0].LeaseEpoch, claimed[1].JobID: claimed[1].LeaseEpoch}
	for _, j := range again {
		require.Greater(t, j.LeaseEpoch, oldEpoch[j.JobID], "a new lease epoch fences the old one")
	}
	require.Equal(t, 2, b.Count(t, `SELECT SUM(attempt_count) FROM judge_job WHERE id IN (?, ?)`, j1.JobID, j2.JobID))
	rep, err := b.Store.Reconcile(b.Ctx)
	require.NoError(t, err)
	require.Empty(t, rep.Violations)

	// A second pass finds nothing more to do.
	st, err = b.Store.Leases().ExpireDrainDeadlines(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, lease.DrainExpiry{}, st)
}

// Draining again replaces the deadline; re-enabling before it passes means
// the deadline no longer applies.
func TestDrainDeadlineReplacedOrCancelled(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	sess := b.Node(t, "cpp", g.ID, 2, true)
	b.Enqueue(t, "ALGO", "dr-1")
	_, err := b.Store.Leases().Claim(b.Ctx, sess.NodeSession, 1)
	require.NoError(t, err)
	_, err = b.Store.Nodes().DrainUntil(b.Ctx, sess.NodeID, time.Minute, "admin", "first")
	require.NoError(t, err)
	n, err := b.Store.Nodes().DrainUntil(b.Ctx, sess.NodeID, 0, "admin", "no deadline after all")
	require.NoError(t, err)
	require.Nil(t, n.DrainDeadlineAt)
	require.Equal(t, 0, b.Count(t, `SELECT COUNT(*) FROM judge_node WHERE id = ? AND drain_deadline_at IS NOT NULL`, sess.NodeID))

	_, err = b.Store.Nodes().DrainUntil(b.Ctx, sess.NodeID, time.Minute, "admin", "again")
	require.NoError(t, err)
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE judge_node SET desired_state = 'ENABLED', drain_deadline_at = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, sess.NodeID)
	require.NoError(t, err)
	st, err := b.Store.Leases().ExpireDrainDeadlines(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, lease.DrainExpiry{}, st, "only DRAINING nodes are affected")
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE node_id = ? AND state = 'RUNNING'`, sess.NodeID))
}
