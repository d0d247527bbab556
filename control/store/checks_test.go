package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

func TestNodeChecksShowJobState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.group(t, 4)
	sess := b.node(t, "cpp", g.ID, 2, false)
	chk, err := b.store.Nodes().StartCheck(b.ctx, store.CheckRequest{NodeID: sess.NodeID, ManifestID: b.manifest, Language: "cpp17", Source: "x"}, "admin", "verify")
	require.NoError(t, err)
	jobID, active, err := b.store.Nodes().ActiveCheck(b.ctx, sess.NodeID)
	require.NoError(t, err)
	require.True(t, active)
	require.Equal(t, chk.JobID, jobID)
	cs, err := b.store.Nodes().NodeChecks(b.ctx, sess.NodeID, 20)
	require.NoError(t, err)
	require.Equal(t, store.CheckPending, cs[0].State)

	c := b.claimEventually(t, b.store, sess.NodeSession)
	cs, err = b.store.Nodes().NodeChecks(b.ctx, sess.NodeID, 20)
	require.NoError(t, err)
	require.Equal(t, store.CheckRunning, cs[0].State)
	_, err = b.store.Leases().Complete(b.ctx, sess.NodeSession, c.JobID, c.LeaseEpoch, waResult())
	require.NoError(t, err)
	cs, err = b.store.Nodes().NodeChecks(b.ctx, sess.NodeID, 20)
	require.NoError(t, err)
	require.Equal(t, store.CheckFailed, cs[0].State)
	require.NotEmpty(t, cs[0].Result)
	_, active, err = b.store.Nodes().ActiveCheck(b.ctx, sess.NodeID)
	require.NoError(t, err)
	require.False(t, active)

	// A cancelled check never passes.
	chk2, err := b.store.Nodes().StartCheck(b.ctx, store.CheckRequest{NodeID: sess.NodeID, ManifestID: b.manifest, Language: "cpp17", Source: "x"}, "admin", "verify")
	require.NoError(t, err)
	_, err = b.store.Jobs().CancelJob(b.ctx, chk2.JobID, "admin", "stuck")
	require.NoError(t, err)
	cs, err = b.store.Nodes().NodeChecks(b.ctx, sess.NodeID, 20)
	require.NoError(t, err)
	require.Equal(t, chk2.CheckID, cs[0].ID)
	require.Equal(t, store.CheckFailed, cs[0].State)
	require.Equal(t, "CANCELLED", cs[0].ErrorCode)
}
