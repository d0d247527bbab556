package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

func TestJoinCodeIsSingleUseAndExpires(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.Group(t, 4)
	_, code, err := b.Store.Nodes().CreateNode(b.Ctx, store.NodeSpec{Name: "n1", Pool: "cpp", HostGroupID: g.ID, Slots: 2}, "admin")
	require.NoError(t, err)
	var wg sync.WaitGroup
	results := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() { defer wg.Done(); _, results[i] = b.Store.Credentials().Join(b.Ctx, code.Code) }()
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

	_, code2, err := b.Store.Nodes().CreateNode(b.Ctx, store.NodeSpec{Name: "n2", Pool: "cpp", HostGroupID: g.ID, Slots: 2}, "admin")
	require.NoError(t, err)
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE judge_join_code SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE consumed_at IS NULL`)
	require.NoError(t, err)
	_, err = b.Store.Credentials().Join(b.Ctx, code2.Code)
	require.ErrorIs(t, err, store.ErrJoinCodeExpired)
	_, err = b.Store.Credentials().Join(b.Ctx, "kjc_not-a-code")
	require.ErrorIs(t, err, store.ErrUnauthenticated)
	require.Equal(t, 0, b.Count(t, `SELECT COUNT(*) FROM judge_join_code WHERE code_hash LIKE 'kjc_%'`), "only hashes are stored")
}

func TestNewBootSupersedesOldSession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.Group(t, 4)
	_, code, err := b.Store.Nodes().CreateNode(b.Ctx, store.NodeSpec{Name: "n1", Pool: "cpp", HostGroupID: g.ID, Slots: 2}, "admin")
	require.NoError(t, err)
	j, err := b.Store.Credentials().Join(b.Ctx, code.Code)
	require.NoError(t, err)
	s1, err := b.Store.Credentials().OpenSession(b.Ctx, j.Credential, "boot-a")
	require.NoError(t, err)
	s1again, err := b.Store.Credentials().OpenSession(b.Ctx, j.Credential, "boot-a")
	require.NoError(t, err)
	require.Equal(t, s1.SessionEpoch, s1again.SessionEpoch, "same boot, same session")
	s2, err := b.Store.Credentials().OpenSession(b.Ctx, j.Credential, "boot-b")
	require.NoError(t, err)
	require.Equal(t, s1.SessionEpoch+1, s2.SessionEpoch)

	_, err = b.Store.Credentials().AuthenticateSession(b.Ctx, s1again.Token)
	require.ErrorIs(t, err, store.ErrSessionSuperseded)
	_, err = b.Store.Leases().Claim(b.Ctx, s1.NodeSession, 1)
	require.ErrorIs(t, err, store.ErrSessionSuperseded)
	info, err := b.Store.Credentials().AuthenticateSession(b.Ctx, s2.Token)
	require.NoError(t, err)
	require.Equal(t, s2.NodeSession, info.NodeSession)

	_, err = b.Store.Credentials().OpenSession(b.Ctx, "knc_1_wrong", "boot-c")
	require.ErrorIs(t, err, store.ErrUnauthenticated)
	_, err = b.Store.Nodes().Revoke(b.Ctx, s2.NodeID, "admin", "stolen")
	require.NoError(t, err)
	_, err = b.Store.Credentials().AuthenticateSession(b.Ctx, s2.Token)
	require.ErrorIs(t, err, store.ErrNodeRevoked)
	_, err = b.Store.Credentials().OpenSession(b.Ctx, j.Credential, "boot-d")
	require.ErrorIs(t, err, store.ErrNodeRevoked)
}

func TestIssueJoinCodeOnlyBeforeJoining(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.Group(t, 4)
	n, first, err := b.Store.Nodes().CreateNode(b.Ctx, store.NodeSpec{Name: "fresh", Pool: "cpp", HostGroupID: g.ID, Slots: 1}, "test")
	require.NoError(t, err)
	second, err := b.Store.Credentials().IssueJoinCode(b.Ctx, n.ID, "admin", "lost the first code")
	require.NoError(t, err)
	_, err = b.Store.Credentials().Join(b.Ctx, first.Code)
	require.Error(t, err, "the earlier code stops working")
	_, err = b.Store.Credentials().Join(b.Ctx, second.Code)
	require.NoError(t, err)
	_, err = b.Store.Credentials().IssueJoinCode(b.Ctx, n.ID, "admin", "again")
	require.ErrorIs(t, err, store.ErrNodeAlreadyJoined)
	require.ErrorIs(t, err, store.ErrConflict)
	_, err = b.Store.Credentials().IssueJoinCode(b.Ctx, 999999, "admin", "x")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_audit WHERE node_id = ? AND action = 'node.join_code' AND actor = 'admin'`, n.ID))
}

func TestRotateCredentialKillsCredentialAndSessions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.Group(t, 4)
	n, code, err := b.Store.Nodes().CreateNode(b.Ctx, store.NodeSpec{Name: "rot", Pool: "cpp", HostGroupID: g.ID, Slots: 1}, "test")
	require.NoError(t, err)
	j, err := b.Store.Credentials().Join(b.Ctx, code.Code)
	require.NoError(t, err)
	sess, err := b.Store.Credentials().OpenSession(b.Ctx, j.Credential, "boot-a")
	require.NoError(t, err)

	fresh, err := b.Store.Credentials().RotateCredential(b.Ctx, n.ID, "admin", "key leaked")
	require.NoError(t, err)
	_, err = b.Store.Credentials().AuthenticateSession(b.Ctx, sess.Token)
	require.ErrorIs(t, err, store.ErrUnauthenticated)
	_, err = b.Store.Credentials().OpenSession(b.Ctx, j.Credential, "boot-a")
	require.ErrorIs(t, err, store.ErrUnauthenticated)

	j2, err := b.Store.Credentials().Join(b.Ctx, fresh.Code)
	require.NoError(t, err)
	_, err = b.Store.Credentials().OpenSession(b.Ctx, j2.Credential, "boot-b")
	require.NoError(t, err)

	_, err = b.Store.Nodes().Revoke(b.Ctx, n.ID, "admin", "gone")
	require.NoError(t, err)
	_, err = b.Store.Credentials().RotateCredential(b.Ctx, n.ID, "admin", "x")
	require.ErrorIs(t, err, store.ErrNodeRevoked)
	_, err = b.Store.Credentials().IssueJoinCode(b.Ctx, n.ID, "admin", "x")
	require.ErrorIs(t, err, store.ErrNodeRevoked)
}

// A join that names another pool is refused and the code stays usable; the
// lifetime is chosen at creation and bounded.
func TestJoinNamesItsPoolAndCodeLifetime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.Group(t, 4)
	_, code, err := b.Store.Nodes().CreateNode(b.Ctx, store.NodeSpec{Name: "jp-1", Pool: "java", HostGroupID: g.ID, Slots: 1,
		JoinCodeTTL: 48 * time.Hour}, "admin")
	require.NoError(t, err)
	require.Equal(t, 48*time.Hour, code.ExpiresIn)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_join_code
		WHERE expires_at BETWEEN NOW(6) + INTERVAL 47 HOUR AND NOW(6) + INTERVAL 49 HOUR`))

	_, err = b.Store.Credentials().JoinPool(b.Ctx, code.Code, "cpp")
	require.ErrorIs(t, err, store.ErrJoinPoolMismatch)
	require.Equal(t, 0, b.Count(t, `SELECT COUNT(*) FROM judge_join_code WHERE consumed_at IS NOT NULL`), "not spent")
	j, err := b.Store.Credentials().JoinPool(b.Ctx, code.Code, "java")
	require.NoError(t, err)
	require.Equal(t, "java", j.Node.Pool)
	_, err = b.Store.Credentials().JoinPool(b.Ctx, code.Code, "cpp")
	require.ErrorIs(t, err, store.ErrJoinCodeUsed, "a spent code says so, whatever the pool")

	// Default 1 h; at most 7 days.
	_, code, err = b.Store.Nodes().CreateNode(b.Ctx, store.NodeSpec{Name: "jp-2", Pool: "cpp", HostGroupID: g.ID, Slots: 1}, "admin")
	require.NoError(t, err)
	require.Equal(t, time.Hour, code.ExpiresIn)
	_, _, err = b.Store.Nodes().CreateNode(b.Ctx, store.NodeSpec{Name: "jp-3", Pool: "cpp", HostGroupID: g.ID, Slots: 1,
		JoinCodeTTL: 8 * 24 * time.Hour}, "admin")
	require.ErrorIs(t, err, store.ErrValidation)
	jc, err := b.Store.Credentials().IssueJoinCodeTTL(b.Ctx, nodeIDByName(t, b, "jp-2"), 7*24*time.Hour, "admin", "slow host operator")
	require.NoError(t, err)
	require.Equal(t, 7*24*time.Hour, jc.ExpiresIn)
}

func nodeIDByName(t *testing.T, b *testBundle, name string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, b.DB.QueryRowContext(b.Ctx, `SELECT id FROM judge_node WHERE name = ?`, name).Scan(&id))
	return id
}

// A heartbeat whose session was authenticated just before a revoke
// committed answers "revoked" (the node stops for good), not "superseded by
// a newer boot" (which it is not).
func TestHeartbeatRacingARevokeSaysRevoked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.Group(t, 4)
	_, code, err := b.Store.Nodes().CreateNode(b.Ctx, store.NodeSpec{Name: "n1", Pool: "cpp", HostGroupID: g.ID, Slots: 2}, "admin")
	require.NoError(t, err)
	j, err := b.Store.Credentials().Join(b.Ctx, code.Code)
	require.NoError(t, err)
	s, err := b.Store.Credentials().OpenSession(b.Ctx, j.Credential, "boot-a")
	require.NoError(t, err)
	info, err := b.Store.Credentials().AuthenticateSession(b.Ctx, s.Token)
	require.NoError(t, err)
	_, err = b.Store.Credentials().Heartbeat(b.Ctx, info.NodeSession, store.HeartbeatReport{RuntimeVersion: "r1"})
	require.NoError(t, err)

	_, err = b.Store.Nodes().Revoke(b.Ctx, s.NodeID, "admin", "stolen host")
	require.NoError(t, err)
	_, err = b.Store.Credentials().Heartbeat(b.Ctx, info.NodeSession, store.HeartbeatReport{RuntimeVersion: "r1"})
	require.ErrorIs(t, err, store.ErrNodeRevoked)
	require.NotErrorIs(t, err, store.ErrSessionSuperseded)

	// A newer boot still reads as superseded.
	_, code2, err := b.Store.Nodes().CreateNode(b.Ctx, store.NodeSpec{Name: "n2", Pool: "cpp", HostGroupID: g.ID, Slots: 2}, "admin")
	require.NoError(t, err)
	j2, err := b.Store.Credentials().Join(b.Ctx, code2.Code)
	require.NoError(t, err)
	old, err := b.Store.Credentials().OpenSession(b.Ctx, j2.Credential, "boot-a")
	require.NoError(t, err)
	_, err = b.Store.Credentials().OpenSession(b.Ctx, j2.Credential, "boot-b")
	require.NoError(t, err)
	_, err = b.Store.Credentials().Heartbeat(b.Ctx, old.NodeSession, store.HeartbeatReport{RuntimeVersion: "r1"})
	require.ErrorIs(t, err, store.ErrSessionSuperseded)
}
