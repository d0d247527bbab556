package store_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
)

// capsBundle is a cpp pool with a file-I/O manifest and a way to enqueue on
// it, in any language.
type capsBundle struct {
	*testBundle
	fileIO int64
}

func setupCaps(t *testing.T) capsBundle {
	t.Helper()
	b := setup(t)
	in := b.Artifact(t, "1")
	m := tinyManifest(in)
	m.Limits.MemoryMb = 64
	m.IO = &manifest.FileIO{InputFile: "sum.in", OutputFile: "sum.out"}
	pm, err := b.Store.Manifests().PublishManifest(b.Ctx, m)
	require.NoError(t, err)
	return capsBundle{testBundle: b, fileIO: pm.ID}
}

func (b capsBundle) enqueueOn(t *testing.T, id, language string, manifestID int64) int64 {
	t.Helper()
	r, err := b.Store.Jobs().Enqueue(b.Ctx, store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: id, Language: language,
		Source: "int main(){}", ManifestID: manifestID})
	require.NoError(t, err)
	return r.JobID
}

// report makes a node report languages and problem types, as a current
// node's heartbeat does.
func (b capsBundle) report(t *testing.T, sess store.Session, languages []string, features []string) {
	t.Helper()
	reps := make([]store.LanguageReport, len(languages))
	for i, id := range languages {
		reps[i] = store.LanguageReport{ID: id, Pool: "cpp"}
	}
	_, err := b.Store.Credentials().Heartbeat(b.Ctx, sess.NodeSession, store.HeartbeatReport{RuntimeVersion: "rt-2",
		Languages: reps, Features: features})
	require.NoError(t, err)
}

func jobIDsOf(jobs []store.ClaimedJob) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.JobID
	}
	return out
}

// A node is handed a job only if it reported the job's language and every
// problem type the job needs; a node that reports nothing (an older node)
// keeps judging classic batch jobs of any language of its pool, and a job
// queued before capabilities existed (required_caps 0) still goes to it.
func TestClaimHandsNodesOnlyWhatTheyCanRun(t *testing.T) {
	t.Parallel()
	b := setupCaps(t)
	g := b.Group(t, 16)
	old := b.Node(t, "cpp", g.ID, 4, true)
	fresh := b.Node(t, "cpp", g.ID, 4, true)
	b.report(t, fresh, []string{"cpp17", "cpp20"}, []string{contracts.FeatureBatch, contracts.FeatureFileIO})

	fileJob := b.enqueueOn(t, "f1", "cpp17", b.fileIO)
	classic := b.enqueueOn(t, "c1", "cpp17", b.Manifest)
	cJob := b.enqueueOn(t, "l1", "c11", b.Manifest)
	fileBit, err := contracts.FeatureCaps([]string{contracts.FeatureFileIO})
	require.NoError(t, err)
	cppBit, _ := contracts.LanguageCap("cpp17")
	require.Equal(t, int(fileBit|cppBit), b.Count(t, `SELECT required_caps FROM judge_job WHERE id = ?`, fileJob),
		"derived at enqueue from the language and the manifest's file I/O")

	got, err := b.Store.Leases().Claim(b.Ctx, old.NodeSession, 4)
	require.NoError(t, err)
	require.ElementsMatch(t, []int64{classic, cJob}, jobIDsOf(got),
		"the old node reported nothing: classic batch, every language of its pool, never the file-I/O job")

	again, err := b.Store.Leases().Claim(b.Ctx, old.NodeSession, 2)
	require.NoError(t, err)
	require.Empty(t, again, "the file-I/O job waits rather than going to a node without file I/O")

	cJob2 := b.enqueueOn(t, "l2", "c11", b.Manifest)
	got, err = b.Store.Leases().Claim(b.Ctx, fresh.NodeSession, 4)
	require.NoError(t, err)
	require.Equal(t, []int64{fileJob}, jobIDsOf(got), "file I/O reported; c11 not reported, so not its job")
	got, err = b.Store.Leases().Claim(b.Ctx, old.NodeSession, 4)
	require.NoError(t, err)
	require.Equal(t, []int64{cJob2}, jobIDsOf(got))

	// A job queued before the capability columns (required_caps 0) is
	// classic batch: every node of the pool takes it.
	legacy := b.enqueueOn(t, "f2", "cpp17", b.fileIO)
	b.exec(t, `UPDATE judge_job SET required_caps = 0 WHERE id = ?`, legacy)
	got, err = b.Store.Leases().Claim(b.Ctx, old.NodeSession, 4)
	require.NoError(t, err)
	require.Equal(t, []int64{legacy}, jobIDsOf(got))
}

// Nodes with different capabilities in one claim batch each get only what
// they can run, and no job is leased twice (the second pick skips the jobs
// the first locked).
func TestClaimBatchOfMixedCapabilities(t *testing.T) {
	t.Parallel()
	b := setupCaps(t)
	g := b.Group(t, 16)
	old := b.Node(t, "cpp", g.ID, 4, true)
	fresh := b.Node(t, "cpp", g.ID, 4, true)
	b.report(t, fresh, []string{"cpp17"}, []string{contracts.FeatureFileIO})
	var files, classic []int64
	for i := range 3 {
		files = append(files, b.enqueueOn(t, "f"+string(rune('a'+i)), "cpp17", b.fileIO))
		classic = append(classic, b.enqueueOn(t, "c"+string(rune('a'+i)), "cpp17", b.Manifest))
	}
	before := store.CommittedBatches(b.Store)
	got := make([][]store.ClaimedJob, 2)
	b.ClaimsTogether(t, "cpp", 2, func(i int) {
		sess := []store.Session{fresh, old}[i]
		jobs, err := b.Store.Leases().Claim(b.Ctx, sess.NodeSession, 4)
		require.NoError(t, err)
		got[i] = jobs
	})
	require.Equal(t, before+1, store.CommittedBatches(b.Store), "one transaction for both")
	freshIDs, oldIDs := jobIDsOf(got[0]), jobIDsOf(got[1])
	require.NotEmpty(t, oldIDs)
	require.Subset(t, classic, oldIDs, "the old node only gets classic jobs")
	for _, id := range freshIDs {
		require.NotContains(t, oldIDs, id, "leased twice")
	}
	// Which claim of the batch picks first depends on arrival: either the
	// fresh node filled its four slots, or the old node took the classic
	// jobs first and the fresh node got every file-I/O job. Either way the
	// old node got each classic job the fresh node left.
	if len(freshIDs) < 4 {
		require.Subset(t, freshIDs, files, "the fresh node had room but a file-I/O job stayed queued")
	}
	for _, id := range classic {
		if !slices.Contains(freshIDs, id) {
			require.Contains(t, oldIDs, id, "a classic job stayed queued while the old node had room")
		}
	}
	for _, id := range files {
		require.NotContains(t, oldIDs, id, "a file-I/O job went to the old node")
	}
	require.Equal(t, 6, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE state = 'RUNNING' AND kind = 'SUBMISSION'`)+
		b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE state = 'QUEUED'`))
}

// A job no ready node can run waits, and the public summary says why.
func TestSummarySaysNoCapableNode(t *testing.T) {
	t.Parallel()
	b := setupCaps(t)
	g := b.Group(t, 16)
	old := b.Node(t, "cpp", g.ID, 4, true)
	b.enqueueOn(t, "f1", "cpp17", b.fileIO)
	b.enqueueOn(t, "c1", "cpp17", b.Manifest)
	b.enqueueOn(t, "j1", "java17", b.Manifest)

	poolOf := func(sum store.Summary, pool string) store.PoolSummary {
		for _, p := range sum.Pools {
			if p.Pool == pool {
				return p
			}
		}
		t.Fatalf("no pool %s", pool)
		return store.PoolSummary{}
	}
	sum, err := b.Store.Summary(b.Ctx)
	require.NoError(t, err)
	cpp := poolOf(sum, "cpp")
	require.Equal(t, 2, cpp.QueuedSubmissions)
	require.Equal(t, contracts.WaitNoCapableNode, cpp.WaitReason)
	require.Equal(t, 1, cpp.Unrunnable)
	require.Equal(t, []string{contracts.FeatureFileIO}, cpp.Missing)
	java := poolOf(sum, "java")
	require.Equal(t, contracts.WaitNoReadyNode, java.WaitReason)
	require.Zero(t, java.Unrunnable)

	b.report(t, old, []string{"cpp17"}, []string{contracts.FeatureFileIO})
	sum, err = b.Store.Summary(b.Ctx)
	require.NoError(t, err)
	cpp = poolOf(sum, "cpp")
	require.Empty(t, cpp.WaitReason, "the node now reports file I/O")
	require.Zero(t, cpp.Unrunnable)
	require.Empty(t, cpp.Missing)
}

// A heartbeat with an unknown problem type is refused and names the known ones.
func TestHeartbeatRefusesUnknownFeature(t *testing.T) {
	t.Parallel()
	b := setupCaps(t)
	n := b.Node(t, "cpp", b.Group(t, 4).ID, 1, false)
	_, err := b.Store.Credentials().Heartbeat(b.Ctx, n.NodeSession, store.HeartbeatReport{Features: []string{"telepathy"}})
	var ve *store.ValidationError
	require.ErrorAs(t, err, &ve)
	require.ErrorContains(t, err, `unknown problem type "telepathy"`)
	require.ErrorContains(t, err, contracts.FeatureGrader)
}

// wakeRecorder records how this replica's waiters are woken.
type wakeRecorder struct {
	mu    sync.Mutex
	calls []string
}

func (w *wakeRecorder) Notify(pool string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, "all "+pool)
}

func (w *wakeRecorder) NotifyN(pool string, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, fmt.Sprintf("%d %s", n, pool))
}

// A classic job wakes one waiter; a job that needs a problem type wakes
// them all, since the longest waiting may be a node that cannot run it.
func TestJobNeedingAFeatureWakesEveryWaiter(t *testing.T) {
	t.Parallel()
	b := setupCaps(t)
	w := &wakeRecorder{}
	st := b.Store.WithNotifier(w)
	for _, m := range []int64{b.Manifest, b.fileIO} {
		_, err := st.Jobs().Enqueue(b.Ctx, store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: fmt.Sprint("w", m),
			Language: "cpp17", Source: "int main(){}", ManifestID: m})
		require.NoError(t, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Equal(t, []string{"1 cpp", "all cpp"}, w.calls)
}
