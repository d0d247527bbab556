package store_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

func TestJoinCodeIsSingleUseAndExpires(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.group(t, 4)
	_, code, err := b.store.CreateNode(b.ctx, store.NodeSpec{Name: "n1", Pool: "cpp", HostGroupID: g.ID, Slots: 2}, "admin")
	require.NoError(t, err)
	var wg sync.WaitGroup
	results := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() { defer wg.Done(); _, results[i] = b.store.Join(b.ctx, code.Code) }()
	}
	wg.Wait()
	wins := 0
	for _, err := range results {
		if err == nil {
			wins++
		} else {
			require.ErrorIs(t, err, store.ErrJoinCodeUsed)
		}
	}
	require.Equal(t, 1, wins, "exactly one concurrent join wins")

	_, code2, err := b.store.CreateNode(b.ctx, store.NodeSpec{Name: "n2", Pool: "cpp", HostGroupID: g.ID, Slots: 2}, "admin")
	require.NoError(t, err)
	_, err = b.db.ExecContext(b.ctx, `UPDATE judge_join_code SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE consumed_at IS NULL`)
	require.NoError(t, err)
	_, err = b.store.Join(b.ctx, code2.Code)
	require.ErrorIs(t, err, store.ErrJoinCodeExpired)
	_, err = b.store.Join(b.ctx, "kjc_not-a-code")
	require.ErrorIs(t, err, store.ErrUnauthenticated)
	require.Equal(t, 0, b.count(t, `SELECT COUNT(*) FROM judge_join_code WHERE code_hash LIKE 'kjc_%'`), "only hashes are stored")
}

func TestNewBootSupersedesOldSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.group(t, 4)
	_, code, err := b.store.CreateNode(b.ctx, store.NodeSpec{Name: "n1", Pool: "cpp", HostGroupID: g.ID, Slots: 2}, "admin")
	require.NoError(t, err)
	j, err := b.store.Join(b.ctx, code.Code)
	require.NoError(t, err)
	s1, err := b.store.OpenSession(b.ctx, j.Credential, "boot-a")
	require.NoError(t, err)
	s1again, err := b.store.OpenSession(b.ctx, j.Credential, "boot-a")
	require.NoError(t, err)
	require.Equal(t, s1.SessionEpoch, s1again.SessionEpoch, "same boot, same session")
	s2, err := b.store.OpenSession(b.ctx, j.Credential, "boot-b")
	require.NoError(t, err)
	require.Equal(t, s1.SessionEpoch+1, s2.SessionEpoch)

	_, err = b.store.AuthenticateSession(b.ctx, s1again.Token)
	require.ErrorIs(t, err, store.ErrSessionSuperseded)
	_, err = b.store.Claim(b.ctx, s1.NodeSession, 1)
	require.ErrorIs(t, err, store.ErrSessionSuperseded)
	info, err := b.store.AuthenticateSession(b.ctx, s2.Token)
	require.NoError(t, err)
	require.Equal(t, s2.NodeSession, info.NodeSession)

	_, err = b.store.OpenSession(b.ctx, "knc_1_wrong", "boot-c")
	require.ErrorIs(t, err, store.ErrUnauthenticated)
	_, err = b.store.Revoke(b.ctx, s2.NodeID, "admin", "stolen")
	require.NoError(t, err)
	_, err = b.store.AuthenticateSession(b.ctx, s2.Token)
	require.ErrorIs(t, err, store.ErrNodeRevoked)
	_, err = b.store.OpenSession(b.ctx, j.Credential, "boot-d")
	require.ErrorIs(t, err, store.ErrNodeRevoked)
}

func TestEnableNeedsFreshPassingCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.group(t, 4)
	sess := b.node(t, "cpp", g.ID, 2, false)
	_, err := b.store.Enable(b.ctx, sess.NodeID, "admin", "")
	require.ErrorIs(t, err, store.ErrConflict, "no check yet")
	// Pool work is not handed to a node pending verification.
	b.enqueue(t, "ALGO", "pending")
	got, err := b.store.Claim(b.ctx, sess.NodeSession, 2)
	require.NoError(t, err)
	require.Empty(t, got)

	// A CHECK job only goes to its node, uses its capacity, and never settles to the business.
	other := b.node(t, "cpp", g.ID, 2, true)
	chk, err := b.store.StartCheck(b.ctx, store.CheckRequest{NodeID: sess.NodeID, ManifestID: b.manifest, Language: "cpp17", Source: "x"}, "admin", "")
	require.NoError(t, err)
	got, err = b.store.Claim(b.ctx, other.NodeSession, 2)
	require.NoError(t, err)
	for _, c := range got {
		require.NotEqual(t, chk.JobID, c.JobID, "a check job never goes to another node")
	}
	got, err = b.store.Claim(b.ctx, sess.NodeSession, 2)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, chk.JobID, got[0].JobID)
	_, err = b.store.Complete(b.ctx, sess.NodeSession, chk.JobID, got[0].LeaseEpoch, waResult())
	require.NoError(t, err)
	_, err = b.store.Enable(b.ctx, sess.NodeID, "admin", "")
	require.ErrorIs(t, err, store.ErrConflict, "a failed check does not enable")
	require.Equal(t, 0, b.count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE job_id = ?`, chk.JobID))

	// A runtime change after the check needs a new check.
	b.verifyAndEnable(t, sess, "cpp")
	_, err = b.store.Drain(b.ctx, sess.NodeID, "admin", "")
	require.NoError(t, err)
	_, err = b.store.Heartbeat(b.ctx, sess.NodeSession, store.HeartbeatReport{RuntimeVersion: "rt-2"})
	require.NoError(t, err)
	_, err = b.store.Enable(b.ctx, sess.NodeID, "admin", "")
	require.ErrorIs(t, err, store.ErrConflict)
	audit, err := b.store.Audit(b.ctx, sess.NodeID, 0, 50)
	require.NoError(t, err)
	require.NotEmpty(t, audit)
}

func TestTokensAreKindBound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	adm, err := b.store.CreateToken(b.ctx, store.TokenAdmin, "ops")
	require.NoError(t, err)
	biz, err := b.store.CreateToken(b.ctx, store.TokenBusiness, "oj")
	require.NoError(t, err)
	_, err = b.store.AuthenticateToken(b.ctx, store.TokenAdmin, adm)
	require.NoError(t, err)
	_, err = b.store.AuthenticateToken(b.ctx, store.TokenAdmin, biz)
	require.ErrorIs(t, err, store.ErrUnauthenticated)
	_, err = b.store.AuthenticateToken(b.ctx, store.TokenBusiness, adm)
	require.ErrorIs(t, err, store.ErrUnauthenticated)
	id, err := b.store.AuthenticateToken(b.ctx, store.TokenBusiness, biz)
	require.NoError(t, err)
	require.Equal(t, "oj", id.Name)
}

func TestSummaryCountsPoolsAndNodesApart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.group(t, 8)
	b.node(t, "cpp", g.ID, 2, true)
	b.node(t, "cpp", g.ID, 2, true)
	b.node(t, "python", g.ID, 2, false)
	b.enqueue(t, "ALGO", "s1")
	sum, err := b.store.Summary(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 5, sum.TotalPools)
	require.Equal(t, 1, sum.ReadyPools)
	require.NotNil(t, sum.Freshness)
	for _, p := range sum.Pools {
		switch p.Pool {
		case "cpp":
			require.Equal(t, 2, p.ReadyNodes)
			require.Equal(t, 1, p.QueuedSubmissions)
		default:
			require.Zero(t, p.ReadyNodes, p.Pool)
		}
	}
}
