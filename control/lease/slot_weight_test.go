package lease_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/lease"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
)

// programManifest publishes a manifest whose checker of type typ is a
// program (an interactor, or a manager of processes copies), with the
// cases of the bundle's CODE manifest, so storetest.ACResult fits it.
func programManifest(t *testing.T, b *storetest.Bundle, typ string, processes int) int64 {
	t.Helper()
	in, out1, out2 := b.Artifact(t, "1 2\n"), b.Artifact(t, "3\n"), b.Artifact(t, "")
	src := b.Artifact(t, "// the problem's program\n")
	pm, err := b.Store.Manifests().PublishManifest(b.Ctx, manifest.Manifest{
		Kind: manifest.KindCode, Limits: manifest.Limits{TimeMs: 1000, MemoryMb: 256, OutputKb: 1024},
		Checker: manifest.Checker{Type: typ, Special: &manifest.SpecialChecker{Language: "cpp17", SourceSha256: src,
			SourceSize: int64(len("// the problem's program\n")), Processes: processes}},
		Cases: []manifest.Case{
			{CaseID: "c1", InputSha256: in, InputSize: 4, OutputSha256: out1, OutputSize: 2, Weight: 40},
			{CaseID: "c2", InputSha256: in, InputSize: 4, OutputSha256: out2, OutputSize: 0, Weight: 60},
		},
	})
	require.NoError(t, err)
	return pm.ID
}

// enqueueOn enqueues a cpp17 ALGO submission id against manifest man.
func enqueueOn(t *testing.T, b *storetest.Bundle, man int64, id string) int64 {
	t.Helper()
	r, err := b.Store.Jobs().Enqueue(b.Ctx, store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: id, Language: "cpp17",
		Source: "int main(){}", ManifestID: man})
	require.NoError(t, err)
	return r.JobID
}

// capableNode is an enabled cpp node of the group that judges every
// problem type (interactive and communication tasks among them).
func capableNode(t *testing.T, b *storetest.Bundle, group int64, slots int) store.Session {
	t.Helper()
	n := b.Node(t, "cpp", group, slots, true)
	_, err := b.Store.Credentials().Heartbeat(b.Ctx, n.NodeSession, store.HeartbeatReport{RuntimeVersion: "rt-1",
		Features: contracts.Features()})
	require.NoError(t, err)
	return n
}

// claimIDs claims for n with free slots and returns the leased job ids.
func claimIDs(t *testing.T, b *storetest.Bundle, n store.Session, free int) []int64 {
	t.Helper()
	got, err := b.Store.Leases().Claim(b.Ctx, n.NodeSession, free)
	require.NoError(t, err)
	ids := make([]int64, len(got))
	for i, j := range got {
		ids[i] = j.JobID
	}
	return ids
}

// done posts an accepted result for job id at lease epoch 1 (its first
// lease).
func done(t *testing.T, b *storetest.Bundle, n store.Session, id int64) {
	t.Helper()
	require.NoError(t, completeOK(b, n.NodeSession, lease.ClaimedJob{JobID: id, LeaseEpoch: 1}))
}

// busySlots sums the slot weights of a node's RUNNING jobs.
func busySlots(t *testing.T, b *storetest.Bundle, nodeID int64) int {
	return b.Count(t, `SELECT COALESCE(SUM(slot_weight), 0) FROM judge_job WHERE state = 'RUNNING' AND node_id = ?`, nodeID)
}

// A job's slot weight is written at enqueue from its manifest — 1, 2 for an
// interactive problem, processes + 1 for a communication task — and worked
// out again by a rejudge.
func TestEnqueueWritesTheSlotWeight(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	plain := b.Enqueue(t, "ALGO", "w-plain").JobID
	inter := enqueueOn(t, b, programManifest(t, b, manifest.CheckerInteractive, 0), "w-inter")
	comm := enqueueOn(t, b, programManifest(t, b, manifest.CheckerCommunication, 3), "w-comm")
	weight := func(id int64) int { return b.Count(t, `SELECT slot_weight FROM judge_job WHERE id = ?`, id) }
	require.Equal(t, 1, weight(plain))
	require.Equal(t, 2, weight(inter))
	require.Equal(t, 4, weight(comm))

	_, err := b.DB.ExecContext(b.Ctx, `UPDATE judge_job SET slot_weight = 1 WHERE id = ?`, comm)
	require.NoError(t, err) // as a job enqueued before slot weights
	r, err := b.Store.Jobs().Rejudge(b.Ctx, "ALGO", "w-comm", "test", "weights")
	require.NoError(t, err)
	require.Equal(t, 4, weight(r.JobID), "a rejudge works the weight out from the manifest")
}

// A node of 4 slots gets one communication job of weight 4 (three
// processes and the manager) and nothing else until it finishes; the
// answer tells it the weight.
func TestCommunicationJobHoldsItsWeight(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 8)
	n := capableNode(t, b, g.ID, 4)
	comm := enqueueOn(t, b, programManifest(t, b, manifest.CheckerCommunication, 3), "comm-1")
	light1, light2 := b.Enqueue(t, "ALGO", "light-1").JobID, b.Enqueue(t, "ALGO", "light-2").JobID

	got, err := b.Store.Leases().Claim(b.Ctx, n.NodeSession, 4)
	require.NoError(t, err)
	require.Len(t, got, 1, "weight 4 fills the node")
	require.Equal(t, comm, got[0].JobID)
	require.Equal(t, 4, got[0].Slots)
	require.Equal(t, 4, busySlots(t, b, n.NodeID))
	require.Empty(t, claimIDs(t, b, n, 4), "nothing else until it finishes")

	done(t, b, n, comm)
	require.ElementsMatch(t, []int64{light1, light2}, claimIDs(t, b, n, 4))
}

// A heavy job at the head of the queue is not overtaken by the lighter
// jobs behind it: it waits until its node has room for it.
func TestHeavyJobIsNotOvertaken(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 8)
	n := capableNode(t, b, g.ID, 4)
	first := b.Enqueue(t, "ALGO", "first").JobID
	require.Equal(t, []int64{first}, claimIDs(t, b, n, 1))
	comm := enqueueOn(t, b, programManifest(t, b, manifest.CheckerCommunication, 3), "comm-2")
	behind := b.Enqueue(t, "ALGO", "behind").JobID

	require.Empty(t, claimIDs(t, b, n, 3), "3 free slots: the job of 4 does not fit, and the one behind it waits")
	done(t, b, n, first)
	require.Equal(t, []int64{comm}, claimIDs(t, b, n, 4))
	done(t, b, n, comm)
	require.Equal(t, []int64{behind}, claimIDs(t, b, n, 4))
}

// A host group's capacity counts weights too: in a group of 4, one node's
// communication job of weight 4 leaves the other node nothing until it
// finishes; two nodes claiming together in one batch share the group's
// room by weight.
func TestHostGroupCountsWeights(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	a, other := capableNode(t, b, g.ID, 4), capableNode(t, b, g.ID, 4)
	man := programManifest(t, b, manifest.CheckerCommunication, 3)
	comm := enqueueOn(t, b, man, "group-comm")
	light := b.Enqueue(t, "ALGO", "group-light").JobID

	require.Equal(t, []int64{comm}, claimIDs(t, b, a, 4))
	require.Empty(t, claimIDs(t, b, other, 4), "the group is full")
	done(t, b, a, comm)
	require.Equal(t, []int64{light}, claimIDs(t, b, other, 4))
	done(t, b, other, light)

	// In one batch: capacity 5, a job of 4 and two of 1 queued, both nodes
	// asking for 4.
	_, err := b.Store.Nodes().ResizeHostGroup(b.Ctx, g.ID, 5, g.Revision, "test", "more room")
	require.NoError(t, err)
	comm2 := enqueueOn(t, b, man, "group-comm-2")
	l1, l2 := b.Enqueue(t, "ALGO", "group-l1").JobID, b.Enqueue(t, "ALGO", "group-l2").JobID
	got := make([][]lease.ClaimedJob, 2)
	before := store.CommittedBatches(b.Store)
	b.ClaimsTogether(t, "cpp", 2, func(i int) {
		var err error
		got[i], err = b.Store.Leases().Claim(b.Ctx, []store.Session{a, other}[i].NodeSession, 4)
		require.NoError(t, err)
	})
	require.Equal(t, before+1, store.CommittedBatches(b.Store), "one commit")
	var leased []int64
	slots := 0
	for _, jobs := range got {
		for _, j := range jobs {
			leased = append(leased, j.JobID)
			slots += j.Slots
		}
	}
	require.Equal(t, 5, slots, "the group's capacity, by weight")
	require.ElementsMatch(t, []int64{comm2, l1}, leased, "in queue order")
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE id = ? AND state = 'QUEUED'`, l2))
}

// A job heavier than its node's slots (a communication task of 8 processes,
// weight 9, on a node of 4) is judged, not refused: it is handed out only
// when the node and its group are idle, holds its full weight while it
// runs, and reconcile finds nothing wrong with it running alone. Beside
// anything else it is over capacity, counted by weight.
func TestJobHeavierThanItsNodeRunsAlone(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 8)
	n, other := capableNode(t, b, g.ID, 4), capableNode(t, b, g.ID, 4)
	first := b.Enqueue(t, "ALGO", "before-heavy").JobID
	require.Equal(t, []int64{first}, claimIDs(t, b, n, 1))
	heavy := enqueueOn(t, b, programManifest(t, b, manifest.CheckerCommunication, manifest.MaxProcesses), "heavy")
	after := b.Enqueue(t, "ALGO", "after-heavy").JobID

	require.Empty(t, claimIDs(t, b, n, 3), "the node is not idle")
	done(t, b, n, first)
	got, err := b.Store.Leases().Claim(b.Ctx, n.NodeSession, 4)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, heavy, got[0].JobID)
	require.Equal(t, manifest.MaxSlotWeight, got[0].Slots)
	require.Equal(t, 9, busySlots(t, b, n.NodeID))
	require.Empty(t, claimIDs(t, b, other, 4), "its group (capacity 8) is full while it runs")

	rep, err := b.Store.Reconcile(b.Ctx)
	require.NoError(t, err)
	require.True(t, rep.OK(), "alone, it is within capacity: %+v", rep.Violations)

	done(t, b, n, heavy)
	require.Equal(t, []int64{after}, claimIDs(t, b, other, 4))
}

// Reconcile counts slots, not jobs: three running jobs of weights 2, 1
// and 1 fill a node of 4; one more slot of weight on them is over capacity
// though the jobs are still three.
func TestReconcileCountsWeights(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	n := capableNode(t, b, g.ID, 4)
	inter := enqueueOn(t, b, programManifest(t, b, manifest.CheckerInteractive, 0), "rec-inter")
	l1, l2 := b.Enqueue(t, "ALGO", "rec-l1").JobID, b.Enqueue(t, "ALGO", "rec-l2").JobID
	require.ElementsMatch(t, []int64{inter, l1, l2}, claimIDs(t, b, n, 4))
	rep, err := b.Store.Reconcile(b.Ctx)
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep.Violations)

	_, err = b.DB.ExecContext(b.Ctx, `UPDATE judge_job SET slot_weight = 2 WHERE id = ?`, l1)
	require.NoError(t, err)
	rep, err = b.Store.Reconcile(b.Ctx)
	require.NoError(t, err)
	rules := map[string]int64{}
	for _, v := range rep.Violations {
		rules[v.Rule] = v.SubjectID
	}
	require.Equal(t, n.NodeID, rules[store.RuleNodeOverCapacity], "%+v", rep.Violations)
	require.Equal(t, g.ID, rules[store.RuleGroupOverCapacity], "%+v", rep.Violations)
}
