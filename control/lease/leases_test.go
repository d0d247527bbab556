package lease_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/lease"
	"github.com/kece-oj/kece/control/store"
)

func TestClaimUsesTheClaimIndexForWhereAndOrder(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	for i := range 50 {
		b.Enqueue(t, "ALGO", "e"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	plans := b.Explain(t, lease.ClaimQueryForExplain(), "cpp", 0, ^uint64(1<<16|1), 8)
	require.Len(t, plans, 1, "one table, one row of plan")
	plan := plans[0]
	require.Equal(t, "ix_job_claim", plan["key"], "plan: %v", plan)
	require.Equal(t, "ref", plan["type"], "equality on pool, state, required_node_id: %v", plan)
	require.NotContains(t, plan["Extra"], "filesort", "ORDER BY must be served by the index: %v", plan)
	require.Contains(t, plan["Extra"], "Using index", "the capability filter is checked in the index: %v", plan)
	require.Contains(t, lease.ClaimQueryForExplain(), "ORDER BY priority, created_at, id",
		"ready jobs go in enqueue order; available_at (backoff) only filters")
}

// The in-flight count reads the RUNNING range of ix_job_lease: there is no
// key on the job's host group (migration 00017).
func TestBusyCountReadsTheLeaseIndex(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g1, g2 := b.Group(t, 8), b.Group(t, 8)
	for i, g := range []int64{g1.ID, g2.ID} {
		b.EnqueueAndClaim(t, b.Node(t, "cpp", g, 4, true).NodeSession, fmt.Sprintf("busy-%d", i), 2)
	}
	b.Enqueue(t, "ALGO", "busy-queued")
	plans := b.Explain(t, lease.BusyCountForExplain(), g1.ID, g2.ID)
	require.Len(t, plans, 1, "one table, one row of plan")
	require.Equal(t, "ix_job_lease", plans[0]["key"], "plan: %v", plans[0])
	require.Equal(t, "ref", plans[0]["type"], "equality on state: %v", plans[0])
}

// A claim reads its candidates without locks and then locks them by
// primary key: a candidate another transaction holds is passed over, the
// claim still fills its room from the queue behind it, and the held job is
// claimed once it is free.
func TestClaimPassesOverAHeldCandidate(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 8)
	sess := b.Node(t, "cpp", g.ID, 4, true)
	head := b.Enqueue(t, "ALGO", "held-1")
	b.Enqueue(t, "ALGO", "held-2")
	b.Enqueue(t, "ALGO", "held-3")
	tx, err := b.DB.BeginTx(b.Ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	var held int64
	require.NoError(t, tx.QueryRowContext(b.Ctx, `SELECT id FROM judge_job WHERE id = ? FOR UPDATE`, head.JobID).Scan(&held))

	got, err := b.Store.Leases().Claim(b.Ctx, sess.NodeSession, 2)
	require.NoError(t, err)
	require.Len(t, got, 2, "the room is filled from behind the held candidate")
	for _, j := range got {
		require.NotEqual(t, head.JobID, j.JobID)
	}
	require.NoError(t, tx.Rollback())
	rest, err := b.Store.Leases().Claim(b.Ctx, sess.NodeSession, 2)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	require.Equal(t, head.JobID, rest[0].JobID)
}

// T04: many nodes on two replicas race for the same jobs. Every job is leased
// exactly once, and node and host-group capacity are never exceeded at any
// sampled instant while the race runs.
func TestConcurrentClaimsNeverExceedCapacity(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	replicas := []*store.Store{b.Store, b.SecondReplica(t)}
	type nodeInfo struct {
		sess  store.Session
		group store.HostGroup
		slots int
	}
	gA, gB := b.Group(t, 5), b.Group(t, 4)
	var nodes []nodeInfo
	for i := range 3 {
		nodes = append(nodes, nodeInfo{b.Node(t, "cpp", gA.ID, 3, true), gA, 3})
		_ = i
	}
	for range 2 {
		nodes = append(nodes, nodeInfo{b.Node(t, "cpp", gB.ID, 4, true), gB, 4})
	}
	const jobs = 80
	for i := range jobs {
		b.Enqueue(t, "ALGO", fmt.Sprintf("t04-%d", i))
	}

	ctx, cancel := context.WithCancel(b.Ctx)
	defer cancel()
	var violations atomic.Int64
	var samples atomic.Int64
	var samplerDone sync.WaitGroup
	samplerDone.Add(1)
	go func() {
		defer samplerDone.Done()
		for ctx.Err() == nil {
			rows, err := b.DB.QueryContext(ctx,
				`SELECT n.id, n.slots, g.slot_capacity, n.host_group_id,
				        (SELECT COUNT(*) FROM judge_job j WHERE j.node_id = n.id AND j.state = 'RUNNING'),
				        (SELECT COUNT(*) FROM judge_job j WHERE j.host_group_id = n.host_group_id AND j.state = 'RUNNING')
				 FROM judge_node n JOIN judge_host_group g ON g.id = n.host_group_id`)
			if err != nil {
				return
			}
			for rows.Next() {
				var id, slots, capacity, gid, nodeBusy, groupBusy int
				if rows.Scan(&id, &slots, &capacity, &gid, &nodeBusy, &groupBusy) == nil &&
					(nodeBusy > slots || groupBusy > capacity) {
					violations.Add(1)
				}
			}
			rows.Close()
			samples.Add(1)
		}
	}()

	var done atomic.Int64
	var wg sync.WaitGroup
	for i, n := range nodes {
		for w := range 3 { // three claim loops per node, alternating replicas
			wg.Add(1)
			go func() {
				defer wg.Done()
				st := replicas[(i+w)%2]
				for done.Load() < jobs && ctx.Err() == nil {
					got, err := st.Leases().Claim(ctx, n.sess.NodeSession, 2)
					if err != nil {
						t.Errorf("claim: %v", err)
						return
					}
					for _, j := range got {
						time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond) // jitter: a judge's run time, so results interleave
						r, err := st.Leases().Complete(ctx, n.sess.NodeSession, j.JobID, j.LeaseEpoch, storetest.ACResult())
						if err != nil || r.Disposition != lease.Accepted {
							t.Errorf("complete %d: %v %v", j.JobID, r, err)
							return
						}
						done.Add(1)
					}
					if len(got) == 0 {
						time.Sleep(time.Millisecond) // a node's pace between empty claims, not a wait for another goroutine
					}
				}
			}()
		}
	}
	wg.Wait()
	cancel()
	samplerDone.Wait()
	require.EqualValues(t, jobs, done.Load())
	require.Zero(t, violations.Load(), "capacity exceeded at a sampled instant")
	require.Positive(t, samples.Load())
	require.Equal(t, jobs, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE kind = 'SUBMISSION' AND state = 'COMPLETED'`))
	require.Equal(t, 0, b.Count(t,
		`SELECT COUNT(*) FROM (SELECT job_id FROM judge_job_attempt a JOIN judge_job j ON j.id = a.job_id
		  WHERE j.kind = 'SUBMISSION' GROUP BY job_id HAVING COUNT(*) <> 1) x`), "each job leased exactly once")
	require.Equal(t, jobs, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event`))
	t.Logf("capacity samples=%d retried_tx=%d", samples.Load(), b.Store.RetriedTransactions())
}

// T06: a claim whose response is lost. The lease keeps the job and the slot
// until it expires; then the reaper requeues it and another node claims it
// with a higher lease epoch; the attempt history shows both.
func TestLostClaimResponseIsReapedAndReclaimed(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	n1 := b.Node(t, "cpp", g.ID, 1, true)
	n2 := b.Node(t, "cpp", g.ID, 1, true)
	job := b.Enqueue(t, "ALGO", "t06")
	other := b.Enqueue(t, "ALGO", "t06-other")

	lost, err := b.Store.Leases().Claim(b.Ctx, n1.NodeSession, 1) // the response never reaches n1
	require.NoError(t, err)
	require.Len(t, lost, 1)
	require.Equal(t, job.JobID, lost[0].JobID)

	// While the lease lives nobody else gets it, and n1's only slot stays taken.
	got, err := b.Store.Leases().Claim(b.Ctx, n1.NodeSession, 1)
	require.NoError(t, err)
	require.Empty(t, got, "n1's slot is still held by the lost lease")
	got, err = b.Store.Leases().Claim(b.Ctx, n2.NodeSession, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, other.JobID, got[0].JobID, "n2 gets the other job, never the leased one")
	_, err = b.Store.Leases().Complete(b.Ctx, n2.NodeSession, other.JobID, got[0].LeaseEpoch, storetest.ACResult())
	require.NoError(t, err)
	st, err := b.Store.Leases().Reap(b.Ctx)
	require.NoError(t, err)
	require.Zero(t, st.Requeued, "a live lease is never reaped")

	b.ExpireLease(t, job.JobID)
	st, err = b.Store.Leases().Reap(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Requeued)
	again := b.ClaimEventually(t, b.Store, n2.NodeSession)
	require.Equal(t, job.JobID, again.JobID)
	require.Greater(t, again.LeaseEpoch, lost[0].LeaseEpoch)
	_, err = b.Store.Leases().Complete(b.Ctx, n2.NodeSession, job.JobID, again.LeaseEpoch, storetest.ACResult())
	require.NoError(t, err)

	atts, err := b.Store.Jobs().Attempts(b.Ctx, job.JobID)
	require.NoError(t, err)
	require.Len(t, atts, 2)
	require.Equal(t, n1.NodeID, atts[0].NodeID)
	require.Equal(t, "EXPIRED", atts[0].Outcome)
	require.Equal(t, n2.NodeID, atts[1].NodeID)
	require.Equal(t, "COMPLETED", atts[1].Outcome)
}

// T07: a result whose ACK was lost is sent again: ALREADY_COMMITTED, one
// settlement event; a different payload for the same lease is a conflict.
func TestDuplicateResultIsAlreadyCommitted(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	n := b.Node(t, "cpp", g.ID, 2, true)
	job := b.Enqueue(t, "ALGO", "t07")
	c := b.ClaimEventually(t, b.Store, n.NodeSession)
	r1, err := b.Store.Leases().Complete(b.Ctx, n.NodeSession, job.JobID, c.LeaseEpoch, storetest.WAResult())
	require.NoError(t, err)
	require.Equal(t, lease.Accepted, r1.Disposition)
	r2, err := b.Store.Leases().Complete(b.Ctx, n.NodeSession, job.JobID, c.LeaseEpoch, storetest.WAResult())
	require.NoError(t, err)
	require.Equal(t, lease.AlreadyCommitted, r2.Disposition)
	require.Equal(t, store.StateCompleted, r2.JobState)
	_, err = b.Store.Leases().Complete(b.Ctx, n.NodeSession, job.JobID, c.LeaseEpoch, storetest.ACResult())
	require.ErrorIs(t, err, store.ErrResultConflict)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE job_id = ?`, job.JobID))
	s, err := b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "t07")
	require.NoError(t, err)
	require.Equal(t, "WA", s.Status)
}

// T08: a stale lease (expired, re-claimed by another node) posts its result:
// refused; the new lease's result stands.
func TestStaleLeaseResultIsRefused(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	n1 := b.Node(t, "cpp", g.ID, 1, true)
	n2 := b.Node(t, "cpp", g.ID, 1, true)
	job := b.Enqueue(t, "ALGO", "t08")
	c1 := b.ClaimEventually(t, b.Store, n1.NodeSession)
	// n1's renewals stop reaching the server; its lease expires.
	b.ExpireLease(t, job.JobID)
	rr, err := b.Store.Leases().Renew(b.Ctx, n1.NodeSession, []lease.RenewItem{{JobID: job.JobID, LeaseEpoch: c1.LeaseEpoch, ProgressSeq: 1}})
	require.NoError(t, err)
	require.Equal(t, lease.RenewLost, rr[0].State, "an expired lease is lost even before it is reaped")
	_, err = b.Store.Leases().Reap(b.Ctx)
	require.NoError(t, err)
	c2 := b.ClaimEventually(t, b.Store, n2.NodeSession)
	require.Equal(t, job.JobID, c2.JobID)

	_, err = b.Store.Leases().Complete(b.Ctx, n1.NodeSession, job.JobID, c1.LeaseEpoch, storetest.ACResult())
	require.ErrorIs(t, err, store.ErrLeaseLost)
	r, err := b.Store.Leases().Complete(b.Ctx, n2.NodeSession, job.JobID, c2.LeaseEpoch, storetest.WAResult())
	require.NoError(t, err)
	require.Equal(t, lease.Accepted, r.Disposition)
	// n1 trying n2's epoch is refused too: the lease is (node, session, epoch).
	_, err = b.Store.Leases().Complete(b.Ctx, n1.NodeSession, job.JobID, c2.LeaseEpoch, storetest.WAResult())
	require.ErrorIs(t, err, store.ErrLeaseLost)
	s, err := b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "t08")
	require.NoError(t, err)
	require.Equal(t, "WA", s.Status)
}

// T09: repeated lease expiry ends in FAILED after max attempts; the business
// sees SYSTEM_ERROR; every attempt is recorded; one settlement event.
//
// Attempt accounting changed on purpose (issue 14): only leases on which
// judging started count toward max_attempts, so each lease here reports its
// start before it expires. Leases that expire unstarted have their own cap
// (TestNeverStartedLeasesEndAtTheirOwnCap).
func TestRepeatedExpiryFailsAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	n := b.Node(t, "cpp", g.ID, 1, true)
	job := b.Enqueue(t, "ALGO", "t09")
	for i := 1; i <= 3; i++ {
		c := b.ClaimEventually(t, b.Store, n.NodeSession)
		require.EqualValues(t, i, c.Attempt)
		b.StartJudging(t, b.Store, n.NodeSession, c)
		b.ExpireLease(t, job.JobID)
		st, err := b.Store.Leases().Reap(b.Ctx)
		require.NoError(t, err)
		if i < 3 {
			require.Equal(t, 1, st.Requeued)
			s, err := b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "t09")
			require.NoError(t, err)
			require.Equal(t, "PENDING", s.Status)
		} else {
			require.Equal(t, 1, st.Failed)
		}
	}
	s, err := b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "t09")
	require.NoError(t, err)
	require.Equal(t, "SYSTEM_ERROR", s.Status)
	atts, err := b.Store.Jobs().Attempts(b.Ctx, job.JobID)
	require.NoError(t, err)
	require.Len(t, atts, 3)
	for _, a := range atts {
		require.Equal(t, "EXPIRED", a.Outcome)
		require.NotNil(t, a.JudgingStarted)
		require.True(t, *a.JudgingStarted, "recorded as started")
	}
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE job_id = ?`, job.JobID))
	got, err := b.Store.Leases().Claim(b.Ctx, n.NodeSession, 1)
	require.NoError(t, err)
	require.Empty(t, got, "terminal jobs are never claimed again")
}

// Infrastructure errors retry with backoff, then fail; user verdicts never retry.
func TestInfrastructureErrorRetriesWithBackoffThenFails(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	n := b.Node(t, "cpp", g.ID, 1, true)
	job := b.Enqueue(t, "ALGO", "infra")
	for i := 1; i <= 3; i++ {
		c := b.ClaimEventually(t, b.Store, n.NodeSession)
		r, err := b.Store.Leases().Complete(b.Ctx, n.NodeSession, job.JobID, c.LeaseEpoch, storetest.InfraResult())
		require.NoError(t, err)
		if i < 3 {
			require.Equal(t, store.StateQueued, r.JobState)
		} else {
			require.Equal(t, store.StateFailed, r.JobState)
		}
	}
	j, err := b.Store.Jobs().GetJob(b.Ctx, job.JobID)
	require.NoError(t, err)
	require.Equal(t, "DAEMON_UNREACHABLE", j.LastErrorCode)
	atts, err := b.Store.Jobs().Attempts(b.Ctx, job.JobID)
	require.NoError(t, err)
	require.Len(t, atts, 3)
	require.Equal(t, "INFRA_ERROR", atts[0].Outcome)
	require.Equal(t, "DAEMON_UNREACHABLE", atts[0].ErrorClass)
}

// T10: drain and resize while jobs run: no new claims beyond the new limit;
// running jobs finish and settle.
func TestDrainAndResizeNeverKillRunningJobs(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 8)
	n := b.Node(t, "cpp", g.ID, 3, true)
	for i := range 6 {
		b.Enqueue(t, "ALGO", fmt.Sprintf("t10-%d", i))
	}
	running, err := b.Store.Leases().Claim(b.Ctx, n.NodeSession, 8)
	require.NoError(t, err)
	require.Len(t, running, 3, "node slots bound the claim")

	node, err := b.Store.Nodes().GetNode(b.Ctx, n.NodeID)
	require.NoError(t, err)
	_, err = b.Store.Nodes().ResizeNode(b.Ctx, n.NodeID, 1, node.Revision-1, "admin", "stale")
	require.ErrorIs(t, err, store.ErrConflict, "a stale revision is refused")
	_, err = b.Store.Nodes().ResizeNode(b.Ctx, n.NodeID, 9, node.Revision, "admin", "too big")
	require.ErrorIs(t, err, store.ErrValidation, "a node cannot exceed its host group")
	_, err = b.Store.Nodes().ResizeNode(b.Ctx, n.NodeID, 1, node.Revision, "admin", "shrink")
	require.NoError(t, err)

	complete := func(c lease.ClaimedJob) {
		t.Helper()
		r, err := b.Store.Leases().Complete(b.Ctx, n.NodeSession, c.JobID, c.LeaseEpoch, storetest.ACResult())
		require.NoError(t, err)
		require.Equal(t, store.StateCompleted, r.JobState)
	}
	got, err := b.Store.Leases().Claim(b.Ctx, n.NodeSession, 8)
	require.NoError(t, err)
	require.Empty(t, got)
	complete(running[0])
	complete(running[1])
	got, err = b.Store.Leases().Claim(b.Ctx, n.NodeSession, 8)
	require.NoError(t, err)
	require.Empty(t, got, "one job still in flight fills the new limit of 1")
	complete(running[2])
	got, err = b.Store.Leases().Claim(b.Ctx, n.NodeSession, 8)
	require.NoError(t, err)
	require.Len(t, got, 1)

	// Disable is refused while a lease lives; forcing needs a reason.
	_, err = b.Store.Nodes().Disable(b.Ctx, n.NodeID, false, "admin", "")
	require.ErrorIs(t, err, store.ErrConflict)
	_, err = b.Store.Nodes().Disable(b.Ctx, n.NodeID, true, "admin", "")
	require.ErrorIs(t, err, store.ErrValidation)

	// Drain: the running job finishes and settles; nothing new is claimed.
	_, err = b.Store.Nodes().Drain(b.Ctx, n.NodeID, "admin", "maintenance")
	require.NoError(t, err)
	complete(got[0])
	more, err := b.Store.Leases().Claim(b.Ctx, n.NodeSession, 8)
	require.NoError(t, err)
	require.Empty(t, more, "a draining node gets no new pool work")
	require.Equal(t, 4, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event`))
	_, err = b.Store.Nodes().Disable(b.Ctx, n.NodeID, false, "admin", "drained")
	require.NoError(t, err)

	// Host-group capacity bounds nodes together, and shrinking it stops claims.
	g2 := b.Group(t, 2)
	a := b.Node(t, "cpp", g2.ID, 2, true)
	c := b.Node(t, "cpp", g2.ID, 2, true)
	ga, err := b.Store.Leases().Claim(b.Ctx, a.NodeSession, 2)
	require.NoError(t, err)
	require.Len(t, ga, 2)
	gc, err := b.Store.Leases().Claim(b.Ctx, c.NodeSession, 2)
	require.NoError(t, err)
	require.Empty(t, gc, "group capacity is used up by the other node")
}

// T22: a rejudge while the old lease runs: the old lease can no longer post
// and never touches the new generation.
func TestRejudgeWhileOldLeaseRuns(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	n1 := b.Node(t, "cpp", g.ID, 1, true)
	n2 := b.Node(t, "cpp", g.ID, 1, true)
	old := b.Enqueue(t, "ALGO", "t22")
	c1 := b.ClaimEventually(t, b.Store, n1.NodeSession)
	nw, err := b.Store.Jobs().Rejudge(b.Ctx, "ALGO", "t22", "admin", "tests fixed")
	require.NoError(t, err)

	rr, err := b.Store.Leases().Renew(b.Ctx, n1.NodeSession, []lease.RenewItem{{JobID: old.JobID, LeaseEpoch: c1.LeaseEpoch, ProgressSeq: 1}})
	require.NoError(t, err)
	require.Equal(t, lease.RenewCancelled, rr[0].State)
	_, err = b.Store.Leases().Complete(b.Ctx, n1.NodeSession, old.JobID, c1.LeaseEpoch, storetest.ACResult())
	require.ErrorIs(t, err, store.ErrSuperseded)

	c2 := b.ClaimEventually(t, b.Store, n2.NodeSession)
	require.Equal(t, nw.JobID, c2.JobID)
	_, err = b.Store.Leases().Complete(b.Ctx, n2.NodeSession, nw.JobID, c2.LeaseEpoch, storetest.WAResult())
	require.NoError(t, err)
	s, err := b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "t22")
	require.NoError(t, err)
	require.Equal(t, "WA", s.Status)
	require.Equal(t, 2, s.Generation)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE job_id = ? AND payload LIKE '%"status":"CANCELLED"%' AND payload LIKE '%SUPERSEDED%'`, old.JobID),
		"the superseded generation ends with one CANCELLED event")
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE job_id = ?`, nw.JobID))
	atts, err := b.Store.Jobs().Attempts(b.Ctx, old.JobID)
	require.NoError(t, err)
	require.Equal(t, "SUPERSEDED", atts[0].Outcome)
}

// T23: two reapers in two replicas race over the same expired leases: each
// lease is reaped exactly once.
func TestTwoReapersRacingReapEachLeaseOnce(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 64)
	n := b.Node(t, "cpp", g.ID, 40, true)
	for i := range 40 {
		b.Enqueue(t, "ALGO", fmt.Sprintf("t23-%d", i))
	}
	got, err := b.Store.Leases().Claim(b.Ctx, n.NodeSession, 40)
	require.NoError(t, err)
	require.Len(t, got, store.ClaimBatchMaxDefault)
	more, err := b.Store.Leases().Claim(b.Ctx, n.NodeSession, 40)
	require.NoError(t, err)
	got = append(got, more...)
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE judge_job SET lease_until = NOW(6) - INTERVAL 1 SECOND WHERE state = 'RUNNING'`)
	require.NoError(t, err)

	replicas := []*store.Store{b.Store, b.SecondReplica(t)}
	var requeued atomic.Int64
	var wg sync.WaitGroup
	for _, st := range replicas {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := st.Leases().Reap(b.Ctx)
				require.NoError(t, err)
				requeued.Add(int64(r.Requeued))
			}()
		}
	}
	wg.Wait()
	// Whatever a racing pass skipped (locked by the other), a later pass reaps.
	r, err := b.Store.Leases().Reap(b.Ctx)
	require.NoError(t, err)
	requeued.Add(int64(r.Requeued))
	require.EqualValues(t, len(got), requeued.Load())
	require.Equal(t, len(got), b.Count(t, `SELECT COUNT(*) FROM judge_job_attempt WHERE outcome = 'EXPIRED'`))
	// None of these leases reported a start: since issue 14 they are not
	// counted as attempts (attempt_count back to 0) but as unstarted ones.
	require.Equal(t, len(got), b.Count(t, `SELECT COUNT(*) FROM judge_job
		WHERE state = 'QUEUED' AND attempt_count = 0 AND unstarted_attempts = 1 AND kind = 'SUBMISSION'`))
}

// Renew moves progress only forward and answers per job.
func TestRenewProgressOnlyForward(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	n := b.Node(t, "cpp", g.ID, 2, true)
	job := b.Enqueue(t, "ALGO", "renew")
	c := b.ClaimEventually(t, b.Store, n.NodeSession)
	rr, err := b.Store.Leases().Renew(b.Ctx, n.NodeSession, []lease.RenewItem{
		{JobID: job.JobID, LeaseEpoch: c.LeaseEpoch, ProgressSeq: 5, Phase: "JUDGING", CasesDone: 1, CasesTotal: 2},
		{JobID: 999999, LeaseEpoch: 1, ProgressSeq: 1},
	})
	require.NoError(t, err)
	require.Equal(t, lease.RenewOK, rr[0].State)
	require.Positive(t, rr[0].Remaining)
	require.Equal(t, lease.RenewLost, rr[1].State)
	_, err = b.Store.Leases().Renew(b.Ctx, n.NodeSession, []lease.RenewItem{
		{JobID: job.JobID, LeaseEpoch: c.LeaseEpoch, ProgressSeq: 3, Phase: "COMPILING", CasesDone: 0, CasesTotal: 2},
	})
	require.NoError(t, err)
	j, err := b.Store.Jobs().GetJob(b.Ctx, job.JobID)
	require.NoError(t, err)
	require.Equal(t, "JUDGING", j.Phase, "an older progress report does not move the phase back")
	require.Equal(t, 1, j.CasesDone)
	s, err := b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "renew")
	require.NoError(t, err)
	require.Equal(t, "JUDGING", s.Status)
}

// Concurrent results share one transaction, and each still gets the answer
// it would get alone: a fenced-out result (expired lease) does not sink the
// others, a repeated result is ALREADY_COMMITTED, and every accepted job has
// exactly one settlement event.
func TestBatchedCompletionsAnswerEachResult(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 8)
	sess := b.Node(t, "cpp", g.ID, 8, true)
	for i := range 6 {
		b.Enqueue(t, "ALGO", fmt.Sprintf("batch-%d", i))
	}
	jobs, err := b.Store.Leases().Claim(b.Ctx, sess.NodeSession, 6)
	require.NoError(t, err)
	require.Len(t, jobs, 6)
	type answer struct {
		resp lease.CompleteResponse
		err  error
	}
	// completeTogether posts one result per target while the batchers hold,
	// then lets them run as one batch.
	completeTogether := func(targets []lease.ClaimedJob) []answer {
		answers := make([]answer, len(targets))
		b.Together(t, len(targets), func(i int) {
			r, err := b.Store.Leases().Complete(b.Ctx, sess.NodeSession, targets[i].JobID, targets[i].LeaseEpoch, storetest.ACResult())
			answers[i] = answer{r, err}
		})
		return answers
	}

	// A batch whose fences all hold commits as one.
	before := store.CommittedBatches(b.Store)
	for _, a := range completeTogether(jobs[3:]) {
		require.NoError(t, a.err)
		require.Equal(t, lease.Accepted, a.resp.Disposition)
		require.Equal(t, store.StateCompleted, a.resp.JobState)
	}
	require.Equal(t, 3, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event`))
	require.Equal(t, before+1, store.CommittedBatches(b.Store), "the three results shared one commit")

	// A batch with an expired lease and a result sent twice: it falls back
	// item by item, and each caller gets its own answer.
	b.ExpireLease(t, jobs[0].JobID)
	answers := completeTogether([]lease.ClaimedJob{jobs[0], jobs[1], jobs[2], jobs[1]})
	require.ErrorIs(t, answers[0].err, store.ErrLeaseLost, "the expired lease is refused")
	require.NoError(t, answers[2].err)
	require.Equal(t, lease.Accepted, answers[2].resp.Disposition)
	require.NoError(t, answers[1].err)
	require.NoError(t, answers[3].err)
	require.ElementsMatch(t, []lease.Disposition{lease.Accepted, lease.AlreadyCommitted},
		[]lease.Disposition{answers[1].resp.Disposition, answers[3].resp.Disposition}, "one of the repeated results commits")

	require.Equal(t, 5, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event`))
	require.Equal(t, 5, b.Count(t, `SELECT COUNT(*) FROM judge_job_attempt a JOIN judge_job j ON j.id = a.job_id
		WHERE j.kind = 'SUBMISSION' AND a.outcome = 'COMPLETED' AND a.receipt_digest IS NOT NULL`))
	again, err := b.Store.Leases().Complete(b.Ctx, sess.NodeSession, jobs[1].JobID, jobs[1].LeaseEpoch, storetest.ACResult())
	require.NoError(t, err)
	require.Equal(t, lease.AlreadyCommitted, again.Disposition)
}

// Claims of several nodes that arrive together share one transaction, and
// each node gets exactly what it would get alone: its group's capacity
// shared with the group's other nodes, its own slots, its own refusal (a
// superseded session), and a repeated claim request answered with the
// leases that request already granted.
func TestConcurrentClaimsShareOneTransaction(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g1, g2 := b.Group(t, 3), b.Group(t, 10)
	nodeA := b.Node(t, "cpp", g1.ID, 3, true)
	nodeB := b.Node(t, "cpp", g1.ID, 3, true)
	nodeC := b.Node(t, "cpp", g2.ID, 2, true)
	stale, cred := b.NodeWithCredential(t, "cpp", g2.ID, 2, true)
	_, err := b.Store.Credentials().OpenSession(b.Ctx, cred, "boot-restarted")
	require.NoError(t, err)
	for i := range 10 {
		b.Enqueue(t, "ALGO", fmt.Sprintf("batch-%d", i))
	}
	// Node A's first claim is answered, but say the answer was lost.
	first, err := b.Store.Leases().ClaimRequest(b.Ctx, nodeA.NodeSession, 2, "claim-batch-a1")
	require.NoError(t, err)
	require.Len(t, first, 2)

	type call struct {
		sess    store.NodeSession
		free    int
		request string
	}
	type answer struct {
		jobs []lease.ClaimedJob
		err  error
	}
	calls := []call{
		{nodeA.NodeSession, 3, "claim-batch-a1"}, // the same request again
		{nodeB.NodeSession, 3, "claim-batch-b1"}, // group 1 has room for one more
		{nodeC.NodeSession, 4, "claim-batch-c1"}, // two slots
		{stale.NodeSession, 2, "claim-batch-s1"}, // its node opened a new session
	}
	queued, release := store.HoldClaims(b.Store, "cpp")
	before := store.CommittedBatches(b.Store)
	answers := make([]answer, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jobs, err := b.Store.Leases().ClaimRequest(b.Ctx, c.sess, c.free, c.request)
			answers[i] = answer{jobs, err}
		}()
	}
	require.Eventually(t, func() bool { return queued() == len(calls) }, 5*time.Second, time.Millisecond)
	release()
	wg.Wait()
	require.Equal(t, before+1, store.CommittedBatches(b.Store), "the claims shared one commit")

	require.NoError(t, answers[0].err)
	require.Len(t, answers[0].jobs, 2)
	for i, j := range answers[0].jobs {
		require.True(t, j.Replayed)
		require.Equal(t, first[i].JobID, j.JobID)
		require.Equal(t, first[i].LeaseEpoch, j.LeaseEpoch)
	}
	require.NoError(t, answers[1].err)
	require.Len(t, answers[1].jobs, 1, "group capacity 3, node A holds 2")
	require.NoError(t, answers[2].err)
	require.Len(t, answers[2].jobs, 2, "node C has two slots")
	require.ErrorIs(t, answers[3].err, store.ErrSessionSuperseded)

	leased := map[int64]bool{}
	for _, a := range answers[1:3] {
		for _, j := range a.jobs {
			require.False(t, j.Replayed)
			require.EqualValues(t, 1, j.LeaseEpoch)
			require.False(t, leased[j.JobID] || j.JobID == first[0].JobID || j.JobID == first[1].JobID, "job %d leased twice", j.JobID)
			leased[j.JobID] = true
		}
	}
	require.Equal(t, 3, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE host_group_id = ? AND state = 'RUNNING'`, g1.ID))
	require.Equal(t, 2, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE node_id = ? AND state = 'RUNNING'`, nodeC.NodeSession.NodeID))
	require.Equal(t, 5, b.Count(t, `SELECT COUNT(*) FROM judge_job_attempt a JOIN judge_job j ON j.id = a.job_id WHERE j.kind = 'SUBMISSION'`),
		"one attempt per leased job; the replay added none")
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_job_attempt WHERE node_id = ? AND claim_request_id = 'claim-batch-b1'`, nodeB.NodeSession.NodeID))

	// Two fresh nodes of one group in one batch share its room: 2 + 2 slots,
	// capacity 3.
	g3 := b.Group(t, 3)
	nodeD, nodeE := b.Node(t, "cpp", g3.ID, 2, true), b.Node(t, "cpp", g3.ID, 2, true)
	queued, release = store.HoldClaims(b.Store, "cpp")
	got := make([][]lease.ClaimedJob, 2)
	for i, n := range []store.Session{nodeD, nodeE} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jobs, err := b.Store.Leases().Claim(b.Ctx, n.NodeSession, 2)
			assert.NoError(t, err)
			got[i] = jobs
		}()
	}
	require.Eventually(t, func() bool { return queued() == 2 }, 5*time.Second, time.Millisecond)
	release()
	wg.Wait()
	require.Equal(t, before+2, store.CommittedBatches(b.Store))
	require.Equal(t, 3, len(got[0])+len(got[1]), "group capacity 3 shared by the batch")
	require.Equal(t, 3, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE host_group_id = ? AND state = 'RUNNING'`, g3.ID))
}

// Concurrent renewals of several nodes share one UPDATE (one commit), and
// each still gets the answer it would get alone: a batch with a lease its
// node no longer holds falls back call by call, so the other node's leases
// renew and only the stale item is reported lost.
func TestBatchedRenewalsAnswerEachCall(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 4)
	nodeA, nodeB := b.Node(t, "cpp", g.ID, 2, true), b.Node(t, "cpp", g.ID, 2, true)
	b.Enqueue(t, "ALGO", "renew-a")
	b.Enqueue(t, "ALGO", "renew-b")
	ca := b.ClaimEventually(t, b.Store, nodeA.NodeSession)
	cb := b.ClaimEventually(t, b.Store, nodeB.NodeSession)

	renewTogether := func(items map[store.NodeSession][]lease.RenewItem) map[store.NodeSession][]lease.RenewResult {
		sessions := slices.Collect(maps.Keys(items))
		out := make(map[store.NodeSession][]lease.RenewResult)
		var mu sync.Mutex
		b.Together(t, len(sessions), func(i int) {
			rr, err := b.Store.Leases().Renew(b.Ctx, sessions[i], items[sessions[i]])
			assert.NoError(t, err)
			mu.Lock()
			out[sessions[i]] = rr
			mu.Unlock()
		})
		return out
	}
	progress := storetest.Judging

	before := store.CommittedBatches(b.Store)
	got := renewTogether(map[store.NodeSession][]lease.RenewItem{
		nodeA.NodeSession: {progress(ca, 1)},
		nodeB.NodeSession: {progress(cb, 1)},
	})
	require.Equal(t, before+1, store.CommittedBatches(b.Store), "two nodes' renewals shared one commit")
	require.Equal(t, lease.RenewOK, got[nodeA.NodeSession][0].State)
	require.Equal(t, lease.RenewOK, got[nodeB.NodeSession][0].State)

	// Node B also names a lease it does not hold (another node's job, and a
	// job that is gone): the batch does not renew everything, so each call
	// runs alone and gets its own answers.
	for _, stale := range []lease.RenewItem{{JobID: 999999, LeaseEpoch: 1, ProgressSeq: 9}, {JobID: ca.JobID, LeaseEpoch: ca.LeaseEpoch, ProgressSeq: 9}} {
		got = renewTogether(map[store.NodeSession][]lease.RenewItem{
			nodeA.NodeSession: {progress(ca, 2)},
			nodeB.NodeSession: {progress(cb, 2), stale},
		})
		require.Equal(t, before+1, store.CommittedBatches(b.Store), "a batch that did not renew everything is not counted")
		require.Equal(t, lease.RenewOK, got[nodeA.NodeSession][0].State)
		require.Len(t, got[nodeB.NodeSession], 2)
		for _, r := range got[nodeB.NodeSession] {
			want := lease.RenewOK
			if r.JobID == stale.JobID {
				want = lease.RenewLost
			}
			require.Equal(t, want, r.State, "job %d", r.JobID)
		}
	}
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE id = ? AND node_id = ? AND progress_seq = 2`, ca.JobID, nodeA.NodeSession.NodeID),
		"node B's report for node A's job changed nothing")
}

// Renewals and results that arrive together share one transaction (one
// UPDATE of their jobs, fenced alike), and each still gets the answer it
// would get alone: a renewed lease keeps running with its progress, a
// result completes its job with one settlement event, and a batch where
// either kind fails its fence falls back so only that item is refused.
func TestRenewalsAndResultsShareOneTransaction(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 8)
	nodeA, nodeB := b.Node(t, "cpp", g.ID, 4, true), b.Node(t, "cpp", g.ID, 4, true)
	for i := range 6 {
		b.Enqueue(t, "ALGO", fmt.Sprintf("write-%d", i))
	}
	a, err := b.Store.Leases().Claim(b.Ctx, nodeA.NodeSession, 3)
	require.NoError(t, err)
	require.Len(t, a, 3)
	bj, err := b.Store.Leases().Claim(b.Ctx, nodeB.NodeSession, 3)
	require.NoError(t, err)
	require.Len(t, bj, 3)

	type call struct {
		sess   store.NodeSession
		renew  []lease.RenewItem
		result lease.ClaimedJob
	}
	type answer struct {
		renew  []lease.RenewResult
		result lease.CompleteResponse
		err    error
	}
	together := func(calls []call) []answer {
		out := make([]answer, len(calls))
		b.Together(t, len(calls), func(i int) {
			c := calls[i]
			if c.renew != nil {
				out[i].renew, out[i].err = b.Store.Leases().Renew(b.Ctx, c.sess, c.renew)
				return
			}
			out[i].result, out[i].err = b.Store.Leases().Complete(b.Ctx, c.sess, c.result.JobID, c.result.LeaseEpoch, storetest.ACResult())
		})
		return out
	}
	progress := storetest.Judging

	// All fences hold: one commit for two renewals and two results.
	before := store.CommittedBatches(b.Store)
	got := together([]call{
		{sess: nodeA.NodeSession, renew: []lease.RenewItem{progress(a[0], 1), progress(a[1], 1)}},
		{sess: nodeB.NodeSession, result: bj[0]},
		{sess: nodeA.NodeSession, result: a[2]},
		{sess: nodeB.NodeSession, renew: []lease.RenewItem{progress(bj[1], 1)}},
	})
	require.Equal(t, before+1, store.CommittedBatches(b.Store), "renewals and results shared one commit")
	for i, g := range got {
		require.NoError(t, g.err, "call %d", i)
	}
	for _, r := range append(got[0].renew, got[3].renew...) {
		require.Equal(t, lease.RenewOK, r.State)
	}
	require.Equal(t, lease.Accepted, got[1].result.Disposition)
	require.Equal(t, lease.Accepted, got[2].result.Disposition)
	for _, c := range []lease.ClaimedJob{a[0], a[1], bj[1]} {
		require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE id = ? AND state = 'RUNNING' AND phase = 'JUDGING'
			AND progress_seq = 1 AND cases_done = 1 AND cases_total = 2 AND verdict IS NULL AND finished_at IS NULL
			AND lease_until > NOW(6) + INTERVAL 4 SECOND`, c.JobID), "job %d renewed with its progress", c.JobID)
	}
	for _, c := range []lease.ClaimedJob{bj[0], a[2]} {
		require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE id = ? AND state = 'COMPLETED' AND verdict = 'AC'
			AND lease_until IS NULL AND finished_at IS NOT NULL AND result_digest IS NOT NULL`, c.JobID), "job %d completed", c.JobID)
		require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_job_attempt WHERE job_id = ? AND outcome = 'COMPLETED'
			AND receipt_digest IS NOT NULL`, c.JobID))
	}
	require.Equal(t, 2, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event`))
	s, err := b.Store.Jobs().SubmissionStatus(b.Ctx, "ALGO", "write-0")
	require.NoError(t, err)
	require.Equal(t, "JUDGING", s.Status, "the renewal's phase change reaches the business")

	// A lease that ran out fails its fence, whichever kind names it: the
	// batch writes nothing and each call goes alone.
	b.ExpireLease(t, a[0].JobID)
	got = together([]call{
		{sess: nodeA.NodeSession, renew: []lease.RenewItem{progress(a[0], 2), progress(a[1], 2)}},
		{sess: nodeB.NodeSession, result: bj[1]},
	})
	require.NoError(t, got[0].err)
	require.Equal(t, []lease.RenewState{lease.RenewLost, lease.RenewOK}, []lease.RenewState{got[0].renew[0].State, got[0].renew[1].State})
	require.NoError(t, got[1].err)
	require.Equal(t, lease.Accepted, got[1].result.Disposition)
	b.ExpireLease(t, bj[2].JobID)
	got = together([]call{
		{sess: nodeA.NodeSession, renew: []lease.RenewItem{progress(a[1], 3)}},
		{sess: nodeB.NodeSession, result: bj[2]},
	})
	require.NoError(t, got[0].err)
	require.Equal(t, lease.RenewOK, got[0].renew[0].State)
	require.ErrorIs(t, got[1].err, store.ErrLeaseLost)
	require.Equal(t, before+1, store.CommittedBatches(b.Store), "batches that fell back are not counted")
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE id = ? AND state = 'RUNNING' AND progress_seq = 3`, a[1].JobID))
	require.Equal(t, 3, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event`))
	require.Equal(t, 3, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE kind = 'SUBMISSION' AND state = 'COMPLETED'`))
}
