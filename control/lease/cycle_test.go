package lease_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/lease"
	"github.com/kece-oj/kece/control/store"
)

// cycle posts c's result (res) with a claim of free slots.
func cycle(b *storetest.Bundle, st *store.Store, sess store.NodeSession, c lease.ClaimedJob, res lease.Result, free int, req string) (lease.CycleOutcome, []lease.ClaimedJob, error) {
	outs, jobs, err := st.Leases().CompleteClaim(b.Ctx, sess, []lease.CycleResult{{JobID: c.JobID, LeaseEpoch: c.LeaseEpoch, Result: res}}, free, req)
	if err != nil {
		return lease.CycleOutcome{}, nil, err
	}
	return outs[0], jobs, nil
}

// runningOn counts the RUNNING jobs of a node.
func runningOn(t *testing.T, b *storetest.Bundle, nodeID int64) int {
	return b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE state = 'RUNNING' AND node_id = ?`, nodeID)
}

// A result with a claim commits the result and leases the slot it frees in
// one call: a node of one slot, busy with the job, gets the next job, and
// the finished job has its verdict, its attempt's receipt and its
// settlement event.
func TestCompleteClaimLeasesTheSlotTheResultFrees(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	sess := b.Node(t, "cpp", g.ID, 1, true)
	first := b.Enqueue(t, "ALGO", "cycle-1")
	second := b.Enqueue(t, "ALGO", "cycle-2")
	c := b.ClaimEventually(t, b.Store, sess.NodeSession)
	require.Equal(t, first.JobID, c.JobID)
	// Without the result the node has no room.
	none, err := b.Store.Leases().Claim(b.Ctx, sess.NodeSession, 1)
	require.NoError(t, err)
	require.Empty(t, none)

	out, jobs, err := cycle(b, b.Store, sess.NodeSession, c, storetest.ACResult(), 1, "cycle-req-0001")
	require.NoError(t, err)
	require.NoError(t, out.Err)
	require.Equal(t, lease.CompleteResponse{Disposition: lease.Accepted, JobState: store.StateCompleted}, out.Response)
	require.Len(t, jobs, 1)
	require.Equal(t, second.JobID, jobs[0].JobID)
	require.False(t, jobs[0].Replayed)

	st, err := b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "cycle-1")
	require.NoError(t, err)
	require.Equal(t, "AC", st.Status)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_job_attempt WHERE job_id = ? AND outcome = 'COMPLETED' AND receipt_digest IS NOT NULL`, c.JobID))
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE job_id = ?`, c.JobID))
	require.Equal(t, 1, runningOn(t, b, sess.NodeID))
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_job_attempt WHERE job_id = ? AND outcome = 'RUNNING' AND claim_request_id = 'cycle-req-0001'`, second.JobID))
}

// Cycles of several nodes, two of them from one node, share one claim
// transaction: every result commits, every job is leased once, and no node
// or host group runs more than its slots.
func TestCompleteClaimBatchKeepsCapacityExact(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 3)
	a := b.Node(t, "cpp", g.ID, 2, true)
	c := b.Node(t, "cpp", g.ID, 1, true)
	for i := range 8 {
		b.Enqueue(t, "ALGO", fmt.Sprintf("cap-%d", i))
	}
	held := map[int64][]lease.ClaimedJob{}
	for _, s := range []store.Session{a, a, c} {
		held[s.NodeID] = append(held[s.NodeID], b.ClaimEventually(t, b.Store, s.NodeSession))
	}
	type call struct {
		sess store.NodeSession
		job  lease.ClaimedJob
		free int
	}
	calls := []call{{a.NodeSession, held[a.NodeID][0], 1}, {a.NodeSession, held[a.NodeID][1], 2}, {c.NodeSession, held[c.NodeID][0], 1}}
	var mu sync.Mutex
	got := map[int64][]lease.ClaimedJob{}
	b.ClaimsTogether(t, "cpp", len(calls), func(i int) {
		k := calls[i]
		out, jobs, err := cycle(b, b.Store, k.sess, k.job, storetest.ACResult(), k.free, fmt.Sprintf("cap-req-%04d", i))
		if assert.NoError(t, err) && assert.NoError(t, out.Err) {
			assert.Equal(t, store.StateCompleted, out.Response.JobState)
		}
		mu.Lock()
		got[k.sess.NodeID] = append(got[k.sess.NodeID], jobs...)
		mu.Unlock()
	})

	require.Len(t, got[a.NodeID], 2, "node a frees two slots and has two")
	require.Len(t, got[c.NodeID], 1)
	seen := map[int64]bool{}
	for _, js := range got {
		for _, j := range js {
			require.False(t, seen[j.JobID], "job %d leased twice", j.JobID)
			seen[j.JobID] = true
		}
	}
	require.Equal(t, 2, runningOn(t, b, a.NodeID))
	require.Equal(t, 1, runningOn(t, b, c.NodeID))
	require.Equal(t, 3, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE state = 'COMPLETED' AND submission_type = 'ALGO'`))
	require.Equal(t, 3, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE submission_type = 'ALGO'`))
}

// One fenced-out result in a batch of cycles writes nothing of the batch;
// each call then gets exactly its own answer: the lost lease is refused and
// claims nothing, the live one commits and gets the next job.
func TestCompleteClaimFencedResultClaimsNothing(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	live := b.Node(t, "cpp", g.ID, 1, true)
	lost := b.Node(t, "cpp", g.ID, 1, true)
	for i := range 4 {
		b.Enqueue(t, "ALGO", fmt.Sprintf("fence-%d", i))
	}
	lj := b.ClaimEventually(t, b.Store, live.NodeSession)
	xj := b.ClaimEventually(t, b.Store, lost.NodeSession)
	b.ExpireLease(t, xj.JobID)

	type cycleCall struct {
		sess store.NodeSession
		job  lease.ClaimedJob
		req  string
	}
	calls := []cycleCall{{live.NodeSession, lj, "fence-req-live"}, {lost.NodeSession, xj, "fence-req-lost"}}
	outs := make([]lease.CycleOutcome, len(calls))
	jobs := make([][]lease.ClaimedJob, len(calls))
	b.ClaimsTogether(t, "cpp", len(calls), func(i int) {
		var err error
		outs[i], jobs[i], err = cycle(b, b.Store, calls[i].sess, calls[i].job, storetest.ACResult(), 1, calls[i].req)
		assert.NoError(t, err)
	})
	liveOut, liveJobs, lostOut, lostJobs := outs[0], jobs[0], outs[1], jobs[1]

	require.NoError(t, liveOut.Err)
	require.Equal(t, store.StateCompleted, liveOut.Response.JobState)
	require.Len(t, liveJobs, 1)
	require.ErrorIs(t, lostOut.Err, store.ErrLeaseLost)
	require.Empty(t, lostJobs, "a refused result claims nothing")
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE job_id = ?`, xj.JobID))
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE id = ? AND state = 'COMPLETED'`, xj.JobID))
	require.Equal(t, 1, runningOn(t, b, lost.NodeID), "only the unreaped lost lease; nothing new")
}

// A cycle resent after its answer was lost (same result, same request id)
// answers ALREADY_COMMITTED and the same lease, not a second one.
func TestCompleteClaimRetryAnswersTheSameLease(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	sess := b.Node(t, "cpp", g.ID, 1, true)
	for i := range 3 {
		b.Enqueue(t, "ALGO", fmt.Sprintf("retry-%d", i))
	}
	c := b.ClaimEventually(t, b.Store, sess.NodeSession)
	out, jobs, err := cycle(b, b.Store, sess.NodeSession, c, storetest.ACResult(), 1, "retry-req-0001")
	require.NoError(t, err)
	require.NoError(t, out.Err)
	require.Len(t, jobs, 1)

	again, replay, err := cycle(b, b.Store, sess.NodeSession, c, storetest.ACResult(), 1, "retry-req-0001")
	require.NoError(t, err)
	require.NoError(t, again.Err)
	require.Equal(t, lease.AlreadyCommitted, again.Response.Disposition)
	require.Len(t, replay, 1)
	require.Equal(t, jobs[0].JobID, replay[0].JobID)
	require.Equal(t, jobs[0].LeaseEpoch, replay[0].LeaseEpoch)
	require.True(t, replay[0].Replayed)
	require.Equal(t, 1, runningOn(t, b, sess.NodeID))

	// A different result for the committed lease is a conflict, and claims
	// nothing.
	conflict, none, err := cycle(b, b.Store, sess.NodeSession, c, storetest.WAResult(), 1, "retry-req-0002")
	require.NoError(t, err)
	require.ErrorIs(t, conflict.Err, store.ErrResultConflict)
	require.Empty(t, none)
	require.Equal(t, 1, runningOn(t, b, sess.NodeID))
}

// An infrastructure error is not the fast kind: it closes its attempt on its
// own (the job goes back to the queue), then the claim runs.
func TestCompleteClaimAfterAnErrorResult(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	sess := b.Node(t, "cpp", g.ID, 1, true)
	b.Enqueue(t, "ALGO", "err-0")
	b.Enqueue(t, "ALGO", "err-1")
	c := b.ClaimEventually(t, b.Store, sess.NodeSession)
	out, jobs, err := cycle(b, b.Store, sess.NodeSession, c, storetest.InfraResult(), 1, "err-req-0001")
	require.NoError(t, err)
	require.NoError(t, out.Err)
	require.Equal(t, store.StateQueued, out.Response.JobState)
	require.Len(t, jobs, 1)
	require.Equal(t, 1, runningOn(t, b, sess.NodeID))
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_job_attempt WHERE job_id = ? AND outcome <> 'RUNNING'`, c.JobID),
		"the error closed its attempt")
}

// Bad input to the call as a whole is refused before anything is written.
func TestCompleteClaimRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	sess := b.Node(t, "cpp", g.ID, 2, true)
	b.Enqueue(t, "ALGO", "bad-0")
	c := b.ClaimEventually(t, b.Store, sess.NodeSession)
	r := lease.CycleResult{JobID: c.JobID, LeaseEpoch: c.LeaseEpoch, Result: storetest.ACResult()}
	_, _, err := b.Store.Leases().CompleteClaim(b.Ctx, sess.NodeSession, []lease.CycleResult{r, r}, 1, "")
	require.ErrorIs(t, err, store.ErrValidation)
	_, _, err = b.Store.Leases().CompleteClaim(b.Ctx, sess.NodeSession, []lease.CycleResult{r}, 1, "bad id!")
	require.ErrorIs(t, err, store.ErrValidation)
	require.Equal(t, 1, runningOn(t, b, sess.NodeID), "nothing was written")
}
