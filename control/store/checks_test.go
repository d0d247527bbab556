package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/store"
)

func TestNodeChecksShowJobState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.Group(t, 4)
	sess := b.Node(t, "cpp", g.ID, 2, false)
	chk, err := b.Store.Nodes().StartCheck(b.Ctx, store.CheckRequest{NodeID: sess.NodeID, ManifestID: b.Manifest, Language: "cpp17", Source: "x"}, "admin", "verify")
	require.NoError(t, err)
	jobID, active, err := b.Store.Nodes().ActiveCheck(b.Ctx, sess.NodeID)
	require.NoError(t, err)
	require.True(t, active)
	require.Equal(t, chk.JobID, jobID)
	cs, err := b.Store.Nodes().NodeChecks(b.Ctx, sess.NodeID, 20)
	require.NoError(t, err)
	require.Equal(t, store.CheckPending, cs[0].State)

	c := b.ClaimEventually(t, b.Store, sess.NodeSession)
	cs, err = b.Store.Nodes().NodeChecks(b.Ctx, sess.NodeID, 20)
	require.NoError(t, err)
	require.Equal(t, store.CheckRunning, cs[0].State)
	_, err = b.Store.Leases().Complete(b.Ctx, sess.NodeSession, c.JobID, c.LeaseEpoch, storetest.WAResult())
	require.NoError(t, err)
	cs, err = b.Store.Nodes().NodeChecks(b.Ctx, sess.NodeID, 20)
	require.NoError(t, err)
	require.Equal(t, store.CheckFailed, cs[0].State)
	require.NotEmpty(t, cs[0].Result)
	_, active, err = b.Store.Nodes().ActiveCheck(b.Ctx, sess.NodeID)
	require.NoError(t, err)
	require.False(t, active)

	// A cancelled check never passes.
	chk2, err := b.Store.Nodes().StartCheck(b.Ctx, store.CheckRequest{NodeID: sess.NodeID, ManifestID: b.Manifest, Language: "cpp17", Source: "x"}, "admin", "verify")
	require.NoError(t, err)
	_, err = b.Store.Jobs().CancelJob(b.Ctx, chk2.JobID, "admin", "stuck")
	require.NoError(t, err)
	cs, err = b.Store.Nodes().NodeChecks(b.Ctx, sess.NodeID, 20)
	require.NoError(t, err)
	require.Equal(t, chk2.CheckID, cs[0].ID)
	require.Equal(t, store.CheckFailed, cs[0].State)
	require.Equal(t, "CANCELLED", cs[0].ErrorCode)
}
