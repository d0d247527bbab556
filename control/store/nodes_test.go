package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/store"
)

func TestEnableNeedsFreshPassingCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.Group(t, 4)
	sess := b.Node(t, "cpp", g.ID, 2, false)
	_, err := b.Store.Nodes().Enable(b.Ctx, sess.NodeID, "admin", "")
	require.ErrorIs(t, err, store.ErrConflict, "no check yet")
	// Pool work is not handed to a node pending verification.
	b.Enqueue(t, "ALGO", "pending")
	got, err := b.Store.Leases().Claim(b.Ctx, sess.NodeSession, 2)
	require.NoError(t, err)
	require.Empty(t, got)

	// A CHECK job only goes to its node, uses its capacity, and never settles to the business.
	other := b.Node(t, "cpp", g.ID, 2, true)
	chk, err := b.Store.Nodes().StartCheck(b.Ctx, store.CheckRequest{NodeID: sess.NodeID, ManifestID: b.Manifest, Language: "cpp17", Source: "x"}, "admin", "")
	require.NoError(t, err)
	got, err = b.Store.Leases().Claim(b.Ctx, other.NodeSession, 2)
	require.NoError(t, err)
	for _, c := range got {
		require.NotEqual(t, chk.JobID, c.JobID, "a check job never goes to another node")
	}
	got, err = b.Store.Leases().Claim(b.Ctx, sess.NodeSession, 2)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, chk.JobID, got[0].JobID)
	_, err = b.Store.Leases().Complete(b.Ctx, sess.NodeSession, chk.JobID, got[0].LeaseEpoch, storetest.WAResult())
	require.NoError(t, err)
	_, err = b.Store.Nodes().Enable(b.Ctx, sess.NodeID, "admin", "")
	require.ErrorIs(t, err, store.ErrConflict, "a failed check does not enable")
	require.Equal(t, 0, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE job_id = ?`, chk.JobID))

	// A runtime change after the check needs a new check.
	b.VerifyAndEnable(t, sess, "cpp")
	_, err = b.Store.Nodes().Drain(b.Ctx, sess.NodeID, "admin", "")
	require.NoError(t, err)
	_, err = b.Store.Credentials().Heartbeat(b.Ctx, sess.NodeSession, store.HeartbeatReport{RuntimeVersion: "rt-2"})
	require.NoError(t, err)
	_, err = b.Store.Nodes().Enable(b.Ctx, sess.NodeID, "admin", "")
	require.ErrorIs(t, err, store.ErrConflict)
	audit, err := b.Store.AuditLog().Audit(b.Ctx, sess.NodeID, 0, 50)
	require.NoError(t, err)
	require.NotEmpty(t, audit)
}

// The host groups' view counts each group's RUNNING jobs (no queued or
// finished ones) in one grouped read; a group without work shows 0.
func TestHostGroupDetailsCountRunningJobsPerGroup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g1, g2, idle := b.Group(t, 8), b.Group(t, 8), b.Group(t, 4)
	n1 := b.Node(t, "cpp", g1.ID, 4, true)
	n2 := b.Node(t, "cpp", g2.ID, 4, true)
	got := b.EnqueueAndClaim(t, n1.NodeSession, "hg1", 4)
	// A finished job keeps its host group and is not busy.
	_, err := b.Store.Leases().Complete(b.Ctx, n1.NodeSession, got[0].JobID, got[0].LeaseEpoch, storetest.ACResult())
	require.NoError(t, err)
	b.EnqueueAndClaim(t, n2.NodeSession, "hg2", 1)
	b.Enqueue(t, "ALGO", "hg-queued")

	all, err := b.Store.Nodes().HostGroupDetails(b.Ctx, 0)
	require.NoError(t, err)
	busy := map[int64]int{}
	nodes := map[int64]int{}
	for _, g := range all {
		busy[g.ID], nodes[g.ID] = g.SlotsBusy, g.NodeCount
	}
	require.Equal(t, map[int64]int{g1.ID: 3, g2.ID: 1, idle.ID: 0}, busy, "finished and queued jobs are not busy")
	require.Equal(t, map[int64]int{g1.ID: 1, g2.ID: 1, idle.ID: 0}, nodes)

	one, err := b.Store.Nodes().HostGroupDetails(b.Ctx, g2.ID)
	require.NoError(t, err)
	require.Len(t, one, 1)
	require.Equal(t, g2.ID, one[0].ID)
	require.Equal(t, 1, one[0].SlotsBusy)
}
