package lease_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/lease"
	"github.com/kece-oj/kece/control/store"
)

// attemptsOf counts the attempts a node's claim request id was granted.
func attemptsOf(t *testing.T, b *storetest.Bundle, nodeID int64, req string) int {
	return b.Count(t, `SELECT COUNT(*) FROM judge_job_attempt WHERE node_id = ? AND claim_request_id = ?`, nodeID, req)
}

// stateOf is a job's state.
func stateOf(t *testing.T, b *storetest.Bundle, jobID int64) store.JobState {
	j, err := b.Store.Jobs().GetJob(b.Ctx, jobID)
	require.NoError(t, err)
	return j.State
}

// A stale copy of a claim (a proxy kept it open after the node had its
// answer, ran the job and moved on) arrives after the lease it was granted
// has ended: it answers nothing, and leases no job no one waits for.
func TestStaleClaimRequestTakesNoNewLeases(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 8)
	n := b.Node(t, "cpp", g.ID, 1, true)
	first := b.Enqueue(t, "ALGO", "stale-1")
	second := b.Enqueue(t, "ALGO", "stale-2")
	const req = "claim-stale-0001"

	got, err := b.Store.Leases().ClaimRequest(b.Ctx, n.NodeSession, 1, req)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, first.JobID, got[0].JobID)
	again, err := b.Store.Leases().ClaimRequest(b.Ctx, n.NodeSession, 1, req)
	require.NoError(t, err)
	require.Len(t, again, 1, "the answer was lost: the same lease again")
	require.Equal(t, got[0].JobID, again[0].JobID)
	require.Equal(t, got[0].LeaseEpoch, again[0].LeaseEpoch)
	require.NoError(t, completeOK(b, n.NodeSession, again[0]))

	stale, err := b.Store.Leases().ClaimRequest(b.Ctx, n.NodeSession, 1, req)
	require.NoError(t, err)
	require.Empty(t, stale, "its lease ended: the stale copy takes nothing new")
	require.Equal(t, 1, attemptsOf(t, b, n.NodeID, req), "no new attempt")
	require.Equal(t, store.StateQueued, stateOf(t, b, second.JobID))

	// Through another replica, and after a lease that expired rather than
	// finished, the same.
	fresh, err := b.Store.Leases().ClaimRequest(b.Ctx, n.NodeSession, 1, "claim-stale-0002")
	require.NoError(t, err)
	require.Len(t, fresh, 1)
	require.Equal(t, second.JobID, fresh[0].JobID)
	b.ExpireLease(t, second.JobID)
	_, err = b.Store.Leases().Reap(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, store.StateQueued, stateOf(t, b, second.JobID))
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE judge_job SET available_at = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, second.JobID)
	require.NoError(t, err) // its retry backoff over: claimable now
	stale, err = b.SecondReplica(t).Leases().ClaimRequest(b.Ctx, n.NodeSession, 1, "claim-stale-0002")
	require.NoError(t, err)
	require.Empty(t, stale)
	require.Equal(t, 1, attemptsOf(t, b, n.NodeID, "claim-stale-0002"))
	require.Equal(t, store.StateQueued, stateOf(t, b, second.JobID))

	// The plan: a probe of ix_attempt_claim on both columns.
	plans := b.Explain(t, lease.GrantsReadForExplain(), n.NodeID, req)
	require.Len(t, plans, 1, "one table, one row of plan")
	require.Equal(t, "ix_attempt_claim", plans[0]["key"], "plan: %v", plans[0])
	require.Contains(t, []string{"ref", "range"}, plans[0]["type"], "plan: %v", plans[0])
	require.Equal(t, "const,const", plans[0]["ref"], "both columns of the key: %v", plans[0])
}

// In a batch: the stale copy shares its transaction with another node's
// claim; it answers nothing and the other node gets the next queued job.
func TestStaleClaimRequestInABatch(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 8)
	a, other := b.Node(t, "cpp", g.ID, 1, true), b.Node(t, "cpp", g.ID, 1, true)
	b.Enqueue(t, "ALGO", "stale-batch-1")
	queued := b.Enqueue(t, "ALGO", "stale-batch-2")
	left := b.Enqueue(t, "ALGO", "stale-batch-3")
	const req = "claim-stale-batch-a"
	got, err := b.Store.Leases().ClaimRequest(b.Ctx, a.NodeSession, 1, req)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NoError(t, completeOK(b, a.NodeSession, got[0]))

	answers := make([][]lease.ClaimedJob, 2)
	errs := make([]error, 2)
	before := store.CommittedBatches(b.Store)
	b.ClaimsTogether(t, "cpp", 2, func(i int) {
		if i == 0 {
			answers[i], errs[i] = b.Store.Leases().ClaimRequest(b.Ctx, a.NodeSession, 1, req)
		} else {
			answers[i], errs[i] = b.Store.Leases().ClaimRequest(b.Ctx, other.NodeSession, 1, "claim-stale-batch-o")
		}
	})
	require.Equal(t, before+1, store.CommittedBatches(b.Store), "the two claims shared one commit")
	require.NoError(t, errs[0])
	require.Empty(t, answers[0], "the stale copy")
	require.NoError(t, errs[1])
	require.Len(t, answers[1], 1)
	require.Equal(t, queued.JobID, answers[1][0].JobID)
	require.Equal(t, 1, attemptsOf(t, b, a.NodeID, req))
	require.Equal(t, store.StateQueued, stateOf(t, b, left.JobID), "there was a job for the stale copy to take")
}

// The slot cycle's claim is held to the same rule: a stale copy of a
// result with its claim, once the lease that claim granted has ended,
// answers ALREADY_COMMITTED and no job.
func TestStaleCycleClaimTakesNoNewLeases(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 8)
	n := b.Node(t, "cpp", g.ID, 1, true)
	for _, id := range []string{"stale-cycle-1", "stale-cycle-2"} {
		b.Enqueue(t, "ALGO", id)
	}
	third := b.Enqueue(t, "ALGO", "stale-cycle-3")
	c := b.ClaimEventually(t, b.Store, n.NodeSession)
	const req = "claim-stale-cycle-1"
	out, next, err := cycle(b, b.Store, n.NodeSession, c, storetest.ACResult(), 1, req)
	require.NoError(t, err)
	require.NoError(t, out.Err)
	require.Len(t, next, 1)
	// The node runs the next job and posts its result with a claim of its own.
	out, _, err = cycle(b, b.Store, n.NodeSession, next[0], storetest.ACResult(), 1, "claim-stale-cycle-2")
	require.NoError(t, err)
	require.NoError(t, out.Err)
	require.Equal(t, store.StateRunning, stateOf(t, b, third.JobID))
	require.NoError(t, completeOK(b, n.NodeSession, lease.ClaimedJob{JobID: third.JobID, LeaseEpoch: 1}))
	b.Enqueue(t, "ALGO", "stale-cycle-4")

	out, stale, err := cycle(b, b.Store, n.NodeSession, c, storetest.ACResult(), 1, req)
	require.NoError(t, err)
	require.NoError(t, out.Err)
	require.Equal(t, lease.AlreadyCommitted, out.Response.Disposition)
	require.Empty(t, stale, "the lease this claim granted has ended")
	require.Equal(t, 1, attemptsOf(t, b, n.NodeID, req))
	require.Zero(t, runningOn(t, b, n.NodeID))
}
