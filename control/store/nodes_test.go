package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

func TestEnableNeedsFreshPassingCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.group(t, 4)
	sess := b.node(t, "cpp", g.ID, 2, false)
	_, err := b.store.Nodes().Enable(b.ctx, sess.NodeID, "admin", "")
	require.ErrorIs(t, err, store.ErrConflict, "no check yet")
	// Pool work is not handed to a node pending verification.
	b.enqueue(t, "ALGO", "pending")
	got, err := b.store.Leases().Claim(b.ctx, sess.NodeSession, 2)
	require.NoError(t, err)
	require.Empty(t, got)

	// A CHECK job only goes to its node, uses its capacity, and never settles to the business.
	other := b.node(t, "cpp", g.ID, 2, true)
	chk, err := b.store.Nodes().StartCheck(b.ctx, store.CheckRequest{NodeID: sess.NodeID, ManifestID: b.manifest, Language: "cpp17", Source: "x"}, "admin", "")
	require.NoError(t, err)
	got, err = b.store.Leases().Claim(b.ctx, other.NodeSession, 2)
	require.NoError(t, err)
	for _, c := range got {
		require.NotEqual(t, chk.JobID, c.JobID, "a check job never goes to another node")
	}
	got, err = b.store.Leases().Claim(b.ctx, sess.NodeSession, 2)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, chk.JobID, got[0].JobID)
	_, err = b.store.Leases().Complete(b.ctx, sess.NodeSession, chk.JobID, got[0].LeaseEpoch, waResult())
	require.NoError(t, err)
	_, err = b.store.Nodes().Enable(b.ctx, sess.NodeID, "admin", "")
	require.ErrorIs(t, err, store.ErrConflict, "a failed check does not enable")
	require.Equal(t, 0, b.count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE job_id = ?`, chk.JobID))

	// A runtime change after the check needs a new check.
	b.verifyAndEnable(t, sess, "cpp")
	_, err = b.store.Nodes().Drain(b.ctx, sess.NodeID, "admin", "")
	require.NoError(t, err)
	_, err = b.store.Credentials().Heartbeat(b.ctx, sess.NodeSession, store.HeartbeatReport{RuntimeVersion: "rt-2"})
	require.NoError(t, err)
	_, err = b.store.Nodes().Enable(b.ctx, sess.NodeID, "admin", "")
	require.ErrorIs(t, err, store.ErrConflict)
	audit, err := b.store.AuditLog().Audit(b.ctx, sess.NodeID, 0, 50)
	require.NoError(t, err)
	require.NotEmpty(t, audit)
}
