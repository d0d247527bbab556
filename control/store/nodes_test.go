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
