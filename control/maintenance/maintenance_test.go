package maintenance_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/dbtest"
	"github.com/kece-oj/kece/control/maintenance"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
)

func TestConfigValidateNamesEveryProblem(t *testing.T) {
	t.Parallel()
	err := maintenance.Config{ReapInterval: time.Millisecond, PurgeInterval: time.Millisecond, IdempotencyKeyTTL: time.Minute}.Validate()
	require.ErrorContains(t, err, "reap interval")
	require.ErrorContains(t, err, "purge interval")
	require.ErrorContains(t, err, "idempotency key TTL")
	m, err := maintenance.New(nil, maintenance.Config{}, nil)
	require.NoError(t, err)
	require.Equal(t, store.ReapIntervalDefault, m.Config().ReapInterval)
	require.Equal(t, maintenance.PurgeIntervalDefault, m.Config().PurgeInterval)
	require.Equal(t, maintenance.IdempotencyKeyTTLDefault, m.Config().IdempotencyKeyTTL)
}

// The maintainer reaps an expired lease and purges an old idempotency key on
// its own tickers; the test waits on its signals, not on time.
func TestMaintainerReapsAndPurges(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := leased(t, store.Config{})
	st, db, job := f.st, f.db, f.job
	_, err := db.ExecContext(ctx, `UPDATE judge_job SET lease_until = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, job.JobID)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `UPDATE judge_idempotency_key SET created_at = NOW(6) - INTERVAL 2 HOUR`)
	require.NoError(t, err)

	m, err := maintenance.New(st, maintenance.Config{ReapInterval: 20 * time.Millisecond,
		PurgeInterval: 20 * time.Millisecond, IdempotencyKeyTTL: time.Hour}, nil)
	require.NoError(t, err)
	sig := m.EnableTestSignals()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	reaped := false
	purged := false
	timeout := time.After(10 * time.Second)
	for !reaped || !purged {
		select {
		case p := <-sig.Reaped:
			require.NoError(t, p.Err)
			if p.Stats.Requeued == 1 {
				reaped = true
			}
		case p := <-sig.Purged:
			require.NoError(t, p.Err)
			if p.Deleted == 1 {
				purged = true
			}
		case <-timeout:
			t.Fatalf("no reap (%v) or purge (%v) within 10s", reaped, purged)
		}
	}
	got, err := st.GetJob(ctx, job.JobID)
	require.NoError(t, err)
	require.Equal(t, store.StateQueued, got.State, "the expired lease went back to the queue")
}

// fixture is a store with one enabled node holding the lease of one job.
type fixture struct {
	st  *store.Store
	db  *sql.DB
	job store.EnqueueResult
	n   store.Node
}

func leased(t *testing.T, cfg store.Config) fixture {
	t.Helper()
	ctx := t.Context()
	db, _ := dbtest.Open(t)
	st, err := store.New(db, cfg)
	require.NoError(t, err)

	in, out := "1 2\n", "3\n"
	si, so := sha256.Sum256([]byte(in)), sha256.Sum256([]byte(out))
	require.NoError(t, st.RegisterArtifact(ctx, hex.EncodeToString(si[:]), int64(len(in))))
	require.NoError(t, st.RegisterArtifact(ctx, hex.EncodeToString(so[:]), int64(len(out))))
	pm, err := st.PublishManifest(ctx, manifest.Manifest{Kind: manifest.KindCode,
		Limits: manifest.Limits{TimeMs: 1000, MemoryMb: 256, OutputKb: 1024}, Checker: manifest.Checker{Type: "tolerant"},
		Cases: []manifest.Case{{CaseID: "1", InputSha256: hex.EncodeToString(si[:]), InputSize: int64(len(in)),
			OutputSha256: hex.EncodeToString(so[:]), OutputSize: int64(len(out)), Weight: 100}}})
	require.NoError(t, err)
	g, err := st.CreateHostGroup(ctx, "host", 4, "test")
	require.NoError(t, err)
	n, code, err := st.CreateNode(ctx, store.NodeSpec{Name: "n1", Pool: "cpp", HostGroupID: g.ID, Slots: 1}, "test")
	require.NoError(t, err)
	j, err := st.Join(ctx, code.Code)
	require.NoError(t, err)
	sess, err := st.OpenSession(ctx, j.Credential, "boot")
	require.NoError(t, err)
	// The verify flow is the store's to test; here the node is simply enabled.
	_, err = db.ExecContext(ctx, `UPDATE judge_node SET desired_state = 'ENABLED' WHERE id = ?`, n.ID)
	require.NoError(t, err)
	req := store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "1", Language: "cpp17", Source: "int main(){}", ManifestID: pm.ID}
	job, err := st.EnqueueIdempotent(ctx, 1, "key-1", req)
	require.NoError(t, err)
	claimed, err := st.Claim(ctx, sess.NodeSession, 1)
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	return fixture{st: st, db: db, job: job, n: n}
}

// A node that stops heartbeating loses its lease to the maintainer's reaper
// after the store's HeartbeatTTL, long before the lease would run out.
func TestMaintainerReapsSilentNodes(t *testing.T) {
	t.Parallel()
	f := leased(t, store.Config{LeaseTTL: time.Hour, HeartbeatTTL: time.Second})
	_, err := f.db.ExecContext(t.Context(), `UPDATE judge_node SET last_heartbeat_at = NOW(6) - INTERVAL 2 SECOND,
		session_started_at = NOW(6) - INTERVAL 2 SECOND WHERE id = ?`, f.n.ID)
	require.NoError(t, err)
	m, err := maintenance.New(f.st, maintenance.Config{ReapInterval: 20 * time.Millisecond}, nil)
	require.NoError(t, err)
	sig := m.EnableTestSignals()
	runCtx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	timeout := time.After(10 * time.Second)
	for reaped := false; !reaped; {
		select {
		case p := <-sig.Reaped:
			require.NoError(t, p.Err)
			reaped = p.Stats.Silent == 1 && p.Stats.Requeued == 1
		case <-timeout:
			t.Fatal("the silent node's lease was not reaped within 10s")
		}
	}
	got, err := f.st.GetJob(t.Context(), f.job.JobID)
	require.NoError(t, err)
	require.Equal(t, store.StateQueued, got.State)
	require.Equal(t, store.NodeSilentErrorCode, got.LastErrorCode)
}
