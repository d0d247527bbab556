package store_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/dbtest"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
)

// testBundle is one fresh database with a store and a published manifest.
type testBundle struct {
	ctx      context.Context
	db       *sql.DB
	dsn      string
	store    *store.Store
	manifest int64 // CODE manifest with cases c1 (weight 40), c2 (weight 60)
	sqlMan   int64 // SQL manifest
	seq      atomic.Int64
}

func testConfig() store.Config {
	return store.Config{
		LeaseTTL:    5 * time.Second,
		MaxAttempts: 3,
		BackoffBase: 5 * time.Millisecond,
		BackoffMax:  20 * time.Millisecond,
	}
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return setupWith(t, testConfig())
}

// setupWith is setup with a store of another configuration.
func setupWith(t *testing.T, cfg store.Config) *testBundle {
	t.Helper()
	db, dsn := dbtest.Open(t)
	st, err := store.New(db, cfg)
	require.NoError(t, err)
	b := &testBundle{ctx: context.Background(), db: db, dsn: dsn, store: st}
	in, out1, out2 := b.artifact(t, "1 2\n"), b.artifact(t, "3\n"), b.artifact(t, "")
	pm, err := st.Manifests().PublishManifest(b.ctx, manifest.Manifest{
		Kind:   manifest.KindCode,
		Limits: manifest.Limits{TimeMs: 1000, MemoryMb: 256, OutputKb: 1024}, Checker: manifest.Checker{Type: "tolerant"},
		Cases: []manifest.Case{
			{CaseID: "c1", InputSha256: in, InputSize: 4, OutputSha256: out1, OutputSize: 2, Weight: 40},
			{CaseID: "c2", InputSha256: in, InputSize: 4, OutputSha256: out2, OutputSize: 0, Weight: 60},
		},
	})
	require.NoError(t, err)
	b.manifest = pm.ID
	sm, err := st.Manifests().PublishManifest(b.ctx, manifest.Manifest{
		Kind: manifest.KindSQL, Checker: manifest.Checker{Type: "exact"},
		SQL: &manifest.SQL{ProblemKind: "SELECT", SchemaSQL: "CREATE TABLE t (a INT)", ReferenceSQL: "SELECT a FROM t",
			StatementTimeoutMs: 1000, MaxRows: 100, MaxBytes: 1 << 20},
	})
	require.NoError(t, err)
	b.sqlMan = sm.ID
	return b
}

// secondReplica is an independent store with its own connection pool on the
// same database, standing in for another control replica.
func (b *testBundle) secondReplica(t *testing.T) *store.Store {
	st, err := store.New(dbtest.OpenDSN(t, b.dsn), testConfig())
	require.NoError(t, err)
	return st
}

func (b *testBundle) artifact(t *testing.T, content string) string {
	sum := sha256.Sum256([]byte(content))
	d := hex.EncodeToString(sum[:])
	require.NoError(t, b.store.Manifests().RegisterArtifact(b.ctx, d, int64(len(content))))
	return d
}

func (b *testBundle) group(t *testing.T, capacity int) store.HostGroup {
	g, err := b.store.Nodes().CreateHostGroup(b.ctx, fmt.Sprintf("host-%d", b.seq.Add(1)), capacity, "test")
	require.NoError(t, err)
	return g
}

// node creates, joins and opens a session for a node; enabled runs the real
// verify flow (CHECK job judged AC, heartbeat, enable).
func (b *testBundle) node(t *testing.T, pool string, groupID int64, slots int, enabled bool) store.Session {
	t.Helper()
	sess, _ := b.nodeWithCredential(t, pool, groupID, slots, enabled)
	return sess
}

// nodeWithCredential is node, also returning the node's credential (to
// open another session: a restart).
func (b *testBundle) nodeWithCredential(t *testing.T, pool string, groupID int64, slots int, enabled bool) (store.Session, string) {
	t.Helper()
	n, code, err := b.store.Nodes().CreateNode(b.ctx, store.NodeSpec{
		Name: fmt.Sprintf("node-%d", b.seq.Add(1)), Pool: pool, HostGroupID: groupID, Slots: slots}, "test")
	require.NoError(t, err)
	j, err := b.store.Credentials().Join(b.ctx, code.Code)
	require.NoError(t, err)
	require.Equal(t, n.ID, j.Node.ID)
	sess, err := b.store.Credentials().OpenSession(b.ctx, j.Credential, "boot-"+strconv.FormatInt(b.seq.Add(1), 10))
	require.NoError(t, err)
	_, err = b.store.Credentials().Heartbeat(b.ctx, sess.NodeSession, store.HeartbeatReport{RuntimeVersion: "rt-1"})
	require.NoError(t, err)
	if enabled {
		b.verifyAndEnable(t, sess, pool)
	}
	return sess, j.Credential
}

// startJudging sends the start signal of a lease: its first progress
// report (a renewal with progressSeq 1), as a node does when it begins to
// run the job. Only then does the attempt count toward max_attempts.
func (b *testBundle) startJudging(t *testing.T, st *store.Store, sess store.NodeSession, c store.ClaimedJob) {
	t.Helper()
	rr, err := st.Leases().Renew(b.ctx, sess, []store.RenewItem{{JobID: c.JobID, LeaseEpoch: c.LeaseEpoch, ProgressSeq: 1, Phase: "COMPILING"}})
	require.NoError(t, err)
	require.Equal(t, store.RenewOK, rr[0].State)
}

func (b *testBundle) verifyAndEnable(t *testing.T, sess store.Session, pool string) {
	t.Helper()
	lang, man := map[string]string{"cpp": "cpp17", "java": "java17", "python": "python3", "arkts": "arkts", "mysql": "mysql"}[pool], b.manifest
	if pool == "mysql" {
		man = b.sqlMan
	}
	chk, err := b.store.Nodes().StartCheck(b.ctx, store.CheckRequest{NodeID: sess.NodeID, ManifestID: man, Language: lang, Source: "check"}, "test", "verify")
	require.NoError(t, err)
	jobs, err := b.store.Leases().Claim(b.ctx, sess.NodeSession, 1)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, chk.JobID, jobs[0].JobID)
	require.Equal(t, store.KindCheck, jobs[0].Kind)
	res := acResult()
	if pool == "mysql" {
		res = store.Result{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{Status: "AC", Score: 100, MaxScore: 100}}
	}
	_, err = b.store.Leases().Complete(b.ctx, sess.NodeSession, chk.JobID, jobs[0].LeaseEpoch, res)
	require.NoError(t, err)
	_, err = b.store.Nodes().Enable(b.ctx, sess.NodeID, "test", "verified")
	require.NoError(t, err)
}

func (b *testBundle) enqueue(t *testing.T, typ, id string) store.EnqueueResult {
	t.Helper()
	r, err := b.store.Jobs().Enqueue(b.ctx, store.EnqueueRequest{SubmissionType: typ, SubmissionID: id, Language: "cpp17",
		Source: "int main(){}", ManifestID: b.manifest})
	require.NoError(t, err)
	return r
}

// expireLease moves a job's lease into the past: the fault a lost node causes.
func (b *testBundle) expireLease(t *testing.T, jobID int64) {
	t.Helper()
	_, err := b.db.ExecContext(b.ctx, `UPDATE judge_job SET lease_until = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, jobID)
	require.NoError(t, err)
}

func acResult() store.Result {
	return store.Result{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{
		Status: "AC", Score: 100, MaxScore: 100,
		Cases: []store.CaseResult{{CaseID: "c1", Status: "AC", Score: 40, TimeMs: 3}, {CaseID: "c2", Status: "AC", Score: 60, TimeMs: 4}},
	}}
}

func waResult() store.Result {
	return store.Result{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{
		Status: "WA", Score: 40, MaxScore: 100,
		Cases: []store.CaseResult{{CaseID: "c1", Status: "AC", Score: 40}, {CaseID: "c2", Status: "WA", Score: 0, Message: "line 1"}},
	}}
}

func infraResult() store.Result {
	return store.Result{Outcome: store.OutcomeError, Error: &store.ErrorResult{Code: "DAEMON_UNREACHABLE", Message: "docker down"}}
}

// claimEventually claims until a job appears (backoff may be pending).
func (b *testBundle) claimEventually(t *testing.T, st *store.Store, sess store.NodeSession) store.ClaimedJob {
	t.Helper()
	var got []store.ClaimedJob
	require.Eventually(t, func() bool {
		var err error
		got, err = st.Leases().Claim(b.ctx, sess, 1)
		require.NoError(t, err)
		return len(got) == 1
	}, 5*time.Second, 5*time.Millisecond)
	return got[0]
}

func (b *testBundle) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.QueryRowContext(b.ctx, q, args...).Scan(&n))
	return n
}

// together makes n calls at once (call(i) makes the i-th) while the store's
// batchers hold, then lets what queued go as batches: a test builds a batch
// for certain.
func (b *testBundle) together(t *testing.T, n int, call func(i int)) {
	t.Helper()
	queued, release := store.HoldBatches(b.store)
	heldTogether(t, queued, release, n, call)
}

// claimsTogether is together for the claim batcher of pool (claims, and
// results that carry a claim).
func (b *testBundle) claimsTogether(t *testing.T, pool string, n int, call func(i int)) {
	t.Helper()
	queued, release := store.HoldClaims(b.store, pool)
	heldTogether(t, queued, release, n, call)
}

// heldTogether makes the n calls on held batchers, waits until all queued,
// and releases them.
func heldTogether(t *testing.T, queued func() int, release func(), n int, call func(i int)) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { call(i) })
	}
	require.Eventually(t, func() bool { return queued() == n }, 5*time.Second, time.Millisecond)
	release()
	wg.Wait()
}

// judging is a renewal of c reporting JUDGING, one case of two done, at
// progress seq.
func judging(c store.ClaimedJob, seq int64) store.RenewItem {
	return store.RenewItem{JobID: c.JobID, LeaseEpoch: c.LeaseEpoch, ProgressSeq: seq, Phase: "JUDGING", CasesDone: 1, CasesTotal: 2}
}
