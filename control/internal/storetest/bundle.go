// Package storetest is the test bundle the store's and the lease engine's
// tests share: a fresh database (control/dbtest) with a store and two
// published manifests, and helpers to make host groups, nodes (joined,
// verified, enabled), submissions, leases and batches. Only tests import it.
package storetest

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

// Bundle is one fresh database with a store and a published manifest.
type Bundle struct {
	Ctx         context.Context
	DB          *sql.DB
	DSN         string
	Store       *store.Store
	Manifest    int64 // CODE manifest with cases c1 (weight 40), c2 (weight 60)
	SQLManifest int64 // SQL manifest
	// Seq numbers what tests create, so names never collide.
	Seq atomic.Int64
}

// Config is the store configuration of Setup: short leases and backoff.
func Config() store.Config {
	return store.Config{
		LeaseTTL:    5 * time.Second,
		MaxAttempts: 3,
		BackoffBase: 5 * time.Millisecond,
		BackoffMax:  20 * time.Millisecond,
	}
}

// Setup is a fresh database with a store of Config and two manifests.
func Setup(t *testing.T) *Bundle {
	t.Helper()
	return SetupWith(t, Config())
}

// SetupWith is Setup with a store of another configuration.
func SetupWith(t *testing.T, cfg store.Config) *Bundle {
	t.Helper()
	db, dsn := dbtest.Open(t)
	st, err := store.New(db, cfg)
	require.NoError(t, err)
	b := &Bundle{Ctx: context.Background(), DB: db, DSN: dsn, Store: st}
	in, out1, out2 := b.Artifact(t, "1 2\n"), b.Artifact(t, "3\n"), b.Artifact(t, "")
	pm, err := st.Manifests().PublishManifest(b.Ctx, manifest.Manifest{
		Kind:   manifest.KindCode,
		Limits: manifest.Limits{TimeMs: 1000, MemoryMb: 256, OutputKb: 1024}, Checker: manifest.Checker{Type: "tolerant"},
		Cases: []manifest.Case{
			{CaseID: "c1", InputSha256: in, InputSize: 4, OutputSha256: out1, OutputSize: 2, Weight: 40},
			{CaseID: "c2", InputSha256: in, InputSize: 4, OutputSha256: out2, OutputSize: 0, Weight: 60},
		},
	})
	require.NoError(t, err)
	b.Manifest = pm.ID
	sm, err := st.Manifests().PublishManifest(b.Ctx, manifest.Manifest{
		Kind: manifest.KindSQL, Checker: manifest.Checker{Type: "exact"},
		SQL: &manifest.SQL{ProblemKind: "SELECT", SchemaSQL: "CREATE TABLE t (a INT)", ReferenceSQL: "SELECT a FROM t",
			StatementTimeoutMs: 1000, MaxRows: 100, MaxBytes: 1 << 20},
	})
	require.NoError(t, err)
	b.SQLManifest = sm.ID
	return b
}

// SecondReplica is an independent store with its own connection pool on the
// same database, standing in for another control replica.
func (b *Bundle) SecondReplica(t *testing.T) *store.Store {
	st, err := store.New(dbtest.OpenDSN(t, b.DSN), Config())
	require.NoError(t, err)
	return st
}

// Artifact registers content as an artifact and returns its digest.
func (b *Bundle) Artifact(t *testing.T, content string) string {
	sum := sha256.Sum256([]byte(content))
	d := hex.EncodeToString(sum[:])
	require.NoError(t, b.Store.Manifests().RegisterArtifact(b.Ctx, d, int64(len(content))))
	return d
}

// Group creates a host group of capacity slots.
func (b *Bundle) Group(t *testing.T, capacity int) store.HostGroup {
	g, err := b.Store.Nodes().CreateHostGroup(b.Ctx, fmt.Sprintf("host-%d", b.Seq.Add(1)), capacity, "test")
	require.NoError(t, err)
	return g
}

// Node creates, joins and opens a session for a node; enabled runs the real
// verify flow (CHECK job judged AC, heartbeat, enable).
func (b *Bundle) Node(t *testing.T, pool string, groupID int64, slots int, enabled bool) store.Session {
	t.Helper()
	sess, _ := b.NodeWithCredential(t, pool, groupID, slots, enabled)
	return sess
}

// NodeWithCredential is Node, also returning the node's credential (to
// open another session: a restart).
func (b *Bundle) NodeWithCredential(t *testing.T, pool string, groupID int64, slots int, enabled bool) (store.Session, string) {
	t.Helper()
	n, code, err := b.Store.Nodes().CreateNode(b.Ctx, store.NodeSpec{
		Name: fmt.Sprintf("node-%d", b.Seq.Add(1)), Pool: pool, HostGroupID: groupID, Slots: slots}, "test")
	require.NoError(t, err)
	j, err := b.Store.Credentials().Join(b.Ctx, code.Code)
	require.NoError(t, err)
	require.Equal(t, n.ID, j.Node.ID)
	sess, err := b.Store.Credentials().OpenSession(b.Ctx, j.Credential, "boot-"+strconv.FormatInt(b.Seq.Add(1), 10))
	require.NoError(t, err)
	_, err = b.Store.Credentials().Heartbeat(b.Ctx, sess.NodeSession, store.HeartbeatReport{RuntimeVersion: "rt-1"})
	require.NoError(t, err)
	if enabled {
		b.VerifyAndEnable(t, sess, pool)
	}
	return sess, j.Credential
}

// StartJudging sends the start signal of a lease: its first progress
// report (a renewal with progressSeq 1), as a node does when it begins to
// run the job. Only then does the attempt count toward max_attempts.
func (b *Bundle) StartJudging(t *testing.T, st *store.Store, sess store.NodeSession, c store.ClaimedJob) {
	t.Helper()
	rr, err := st.Leases().Renew(b.Ctx, sess, []store.RenewItem{{JobID: c.JobID, LeaseEpoch: c.LeaseEpoch, ProgressSeq: 1, Phase: "COMPILING"}})
	require.NoError(t, err)
	require.Equal(t, store.RenewOK, rr[0].State)
}

// VerifyAndEnable runs the verify flow for a node of pool: a CHECK job
// claimed and judged AC, then the node enabled.
func (b *Bundle) VerifyAndEnable(t *testing.T, sess store.Session, pool string) {
	t.Helper()
	lang, man := map[string]string{"cpp": "cpp17", "java": "java17", "python": "python3", "arkts": "arkts", "mysql": "mysql"}[pool], b.Manifest
	if pool == "mysql" {
		man = b.SQLManifest
	}
	chk, err := b.Store.Nodes().StartCheck(b.Ctx, store.CheckRequest{NodeID: sess.NodeID, ManifestID: man, Language: lang, Source: "check"}, "test", "verify")
	require.NoError(t, err)
	jobs, err := b.Store.Leases().Claim(b.Ctx, sess.NodeSession, 1)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, chk.JobID, jobs[0].JobID)
	require.Equal(t, store.KindCheck, jobs[0].Kind)
	res := ACResult()
	if pool == "mysql" {
		res = store.Result{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{Status: "AC", Score: 100, MaxScore: 100}}
	}
	_, err = b.Store.Leases().Complete(b.Ctx, sess.NodeSession, chk.JobID, jobs[0].LeaseEpoch, res)
	require.NoError(t, err)
	_, err = b.Store.Nodes().Enable(b.Ctx, sess.NodeID, "test", "verified")
	require.NoError(t, err)
}

// Enqueue submits a cpp17 job for the CODE manifest.
func (b *Bundle) Enqueue(t *testing.T, typ, id string) store.EnqueueResult {
	t.Helper()
	r, err := b.Store.Jobs().Enqueue(b.Ctx, store.EnqueueRequest{SubmissionType: typ, SubmissionID: id, Language: "cpp17",
		Source: "int main(){}", ManifestID: b.Manifest})
	require.NoError(t, err)
	return r
}

// EnqueueAndClaim enqueues n ALGO jobs (submission ids prefix-0, prefix-1, …)
// and claims all n for sess, failing the test unless it gets them.
func (b *Bundle) EnqueueAndClaim(t *testing.T, sess store.NodeSession, prefix string, n int) []store.ClaimedJob {
	t.Helper()
	for i := range n {
		b.Enqueue(t, "ALGO", fmt.Sprintf("%s-%d", prefix, i))
	}
	got, err := b.Store.Leases().Claim(b.Ctx, sess, n)
	require.NoError(t, err)
	require.Len(t, got, n)
	return got
}

// ExpireLease moves a job's lease into the past: the fault a lost node causes.
func (b *Bundle) ExpireLease(t *testing.T, jobID int64) {
	t.Helper()
	_, err := b.DB.ExecContext(b.Ctx, `UPDATE judge_job SET lease_until = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, jobID)
	require.NoError(t, err)
}

// ACResult is an accepted verdict on both cases of the CODE manifest.
func ACResult() store.Result {
	return store.Result{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{
		Status: "AC", Score: 100, MaxScore: 100,
		Cases: []store.CaseResult{{CaseID: "c1", Status: "AC", Score: 40, TimeMs: 3}, {CaseID: "c2", Status: "AC", Score: 60, TimeMs: 4}},
	}}
}

// WAResult is a wrong answer on the second case.
func WAResult() store.Result {
	return store.Result{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{
		Status: "WA", Score: 40, MaxScore: 100,
		Cases: []store.CaseResult{{CaseID: "c1", Status: "AC", Score: 40}, {CaseID: "c2", Status: "WA", Score: 0, Message: "line 1"}},
	}}
}

// InfraResult is an infrastructure error (the job is retried).
func InfraResult() store.Result {
	return store.Result{Outcome: store.OutcomeError, Error: &store.ErrorResult{Code: "DAEMON_UNREACHABLE", Message: "docker down"}}
}

// ClaimEventually claims until a job appears (backoff may be pending).
func (b *Bundle) ClaimEventually(t *testing.T, st *store.Store, sess store.NodeSession) store.ClaimedJob {
	t.Helper()
	var got []store.ClaimedJob
	require.Eventually(t, func() bool {
		var err error
		got, err = st.Leases().Claim(b.Ctx, sess, 1)
		require.NoError(t, err)
		return len(got) == 1
	}, 5*time.Second, 5*time.Millisecond)
	return got[0]
}

// Count runs a COUNT query.
func (b *Bundle) Count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.DB.QueryRowContext(b.Ctx, q, args...).Scan(&n))
	return n
}

// Together makes n calls at once (call(i) makes the i-th) while the store's
// batchers hold, then lets what queued go as batches: a test builds a batch
// for certain.
func (b *Bundle) Together(t *testing.T, n int, call func(i int)) {
	t.Helper()
	queued, release := store.HoldBatches(b.Store)
	HeldTogether(t, queued, release, n, call)
}

// ClaimsTogether is Together for the claim batcher of pool (claims, and
// results that carry a claim).
func (b *Bundle) ClaimsTogether(t *testing.T, pool string, n int, call func(i int)) {
	t.Helper()
	queued, release := store.HoldClaims(b.Store, pool)
	HeldTogether(t, queued, release, n, call)
}

// HeldTogether makes the n calls on held batchers, waits until all queued,
// and releases them.
func HeldTogether(t *testing.T, queued func() int, release func(), n int, call func(i int)) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { call(i) })
	}
	require.Eventually(t, func() bool { return queued() == n }, 5*time.Second, time.Millisecond)
	release()
	wg.Wait()
}

// Judging is a renewal of c reporting JUDGING, one case of two done, at
// progress seq.
func Judging(c store.ClaimedJob, seq int64) store.RenewItem {
	return store.RenewItem{JobID: c.JobID, LeaseEpoch: c.LeaseEpoch, ProgressSeq: seq, Phase: "JUDGING", CasesDone: 1, CasesTotal: 2}
}

// Wakes is a Notifier that records the pools it is told about.
type Wakes struct {
	mu    sync.Mutex
	pools []string
}

// Notify records pool.
func (w *Wakes) Notify(pool string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pools = append(w.pools, pool)
}

// Take returns the pools recorded since the last Take, in order.
func (w *Wakes) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.pools
	w.pools = nil
	return out
}

// Explain returns the rows of EXPLAIN q, each as column → value (columns
// that are NULL are left out).
func (b *Bundle) Explain(t *testing.T, q string, args ...any) []map[string]string {
	t.Helper()
	rows, err := b.DB.QueryContext(b.Ctx, "EXPLAIN "+q, args...)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var plans []map[string]string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		plan := map[string]string{}
		for i, c := range cols {
			if v, ok := vals[i].([]byte); ok {
				plan[c] = string(v)
			}
		}
		plans = append(plans, plan)
	}
	require.NoError(t, rows.Err())
	return plans
}
