package lease_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/lease"
	"github.com/kece-oj/kece/control/store"
)

// withPhases is r with the node's timing p.
func withPhases(r lease.Result, p lease.Phases) lease.Result {
	r.Phases = &p
	return r
}

func phasesOf(t *testing.T, b *storetest.Bundle, jobID int64) []*lease.Phases {
	t.Helper()
	atts, err := b.Store.Jobs().Attempts(b.Ctx, jobID)
	require.NoError(t, err)
	out := make([]*lease.Phases, len(atts))
	for i, a := range atts {
		out[i] = a.Phases()
	}
	return out
}

// A result's phases are stored on its attempt by every way a result
// commits — alone, in a batch beside a result without phases, with a slot
// cycle's claim, an infrastructure error, a CHECK job's verdict (the slow
// path) — and never enter the normalized result: the stored result and its
// digest are those of the same result without phases, and the same verdict
// posted again with other timings is ALREADY_COMMITTED, keeping the first
// timings; a different verdict is still a conflict.
func TestResultPhasesStoredApartFromTheDigest(t *testing.T) {
	t.Parallel()
	b := storetest.Setup(t)
	g := b.Group(t, 8)
	n := b.Node(t, "cpp", g.ID, 8, true)
	queued := int64(12)
	p1 := lease.Phases{QueueMs: &queued, DownloadMs: 3, SandboxMs: 140, CompileMs: 900, RunMs: 25, CheckMs: 2,
		ExecuteMs: 1080, TotalMs: 1100, CompileCached: true}
	p2 := lease.Phases{DownloadMs: 1, SandboxMs: 2, CompileMs: 3, RunMs: 4, CheckMs: 5, ExecuteMs: 6, TotalMs: 7, SandboxWarm: true}
	jobs := b.EnqueueAndClaim(t, n.NodeSession, "phases", 4)

	// Alone.
	r, err := b.Store.Leases().Complete(b.Ctx, n.NodeSession, jobs[0].JobID, jobs[0].LeaseEpoch, withPhases(storetest.ACResult(), p1))
	require.NoError(t, err)
	require.Equal(t, lease.Accepted, r.Disposition)
	require.Equal(t, []*lease.Phases{&p1}, phasesOf(t, b, jobs[0].JobID))
	body, digest, err := storetest.ACResult().Normalize()
	require.NoError(t, err)
	var stored, storedDigest string
	require.NoError(t, b.DB.QueryRowContext(b.Ctx, `SELECT result, result_digest FROM judge_job WHERE id = ?`, jobs[0].JobID).Scan(&stored, &storedDigest))
	require.Equal(t, string(body), stored, "the stored result carries no timings")
	require.Equal(t, digest, storedDigest)
	require.False(t, strings.Contains(stored, "sandbox"), stored)

	// Sent again with other timings: the same result; the first timings stay.
	r, err = b.Store.Leases().Complete(b.Ctx, n.NodeSession, jobs[0].JobID, jobs[0].LeaseEpoch, withPhases(storetest.ACResult(), p2))
	require.NoError(t, err)
	require.Equal(t, lease.AlreadyCommitted, r.Disposition)
	r, err = b.Store.Leases().Complete(b.Ctx, n.NodeSession, jobs[0].JobID, jobs[0].LeaseEpoch, storetest.ACResult())
	require.NoError(t, err)
	require.Equal(t, lease.AlreadyCommitted, r.Disposition, "and without any")
	require.Equal(t, []*lease.Phases{&p1}, phasesOf(t, b, jobs[0].JobID))
	_, err = b.Store.Leases().Complete(b.Ctx, n.NodeSession, jobs[0].JobID, jobs[0].LeaseEpoch, withPhases(storetest.WAResult(), p1))
	require.ErrorIs(t, err, store.ErrResultConflict, "the same timings do not make another verdict the same result")

	// In one batch, one result with phases and one without.
	before := store.CommittedBatches(b.Store)
	results := []lease.Result{withPhases(storetest.ACResult(), p2), storetest.ACResult()}
	b.Together(t, 2, func(i int) {
		_, err := b.Store.Leases().Complete(b.Ctx, n.NodeSession, jobs[1+i].JobID, jobs[1+i].LeaseEpoch, results[i])
		require.NoError(t, err)
	})
	require.Equal(t, before+1, store.CommittedBatches(b.Store), "the two results shared one commit")
	require.Equal(t, []*lease.Phases{&p2}, phasesOf(t, b, jobs[1].JobID))
	require.Equal(t, []*lease.Phases{nil}, phasesOf(t, b, jobs[2].JobID), "a node that sends no phases stores none")

	// With the slot cycle's claim.
	outs, _, err := b.Store.Leases().CompleteClaim(b.Ctx, n.NodeSession,
		[]store.CycleResult{{JobID: jobs[3].JobID, LeaseEpoch: jobs[3].LeaseEpoch, Result: withPhases(storetest.WAResult(), p1)}}, 1, "phases-cycle-1")
	require.NoError(t, err)
	require.NoError(t, outs[0].Err)
	require.Equal(t, lease.Accepted, outs[0].Response.Disposition)
	require.Equal(t, []*lease.Phases{&p1}, phasesOf(t, b, jobs[3].JobID))

	// An infrastructure error keeps its attempt's phases; the retry's
	// attempt has its own.
	job := b.Enqueue(t, "ALGO", "phases-infra")
	c := b.ClaimEventually(t, b.Store, n.NodeSession)
	require.Equal(t, job.JobID, c.JobID)
	_, err = b.Store.Leases().Complete(b.Ctx, n.NodeSession, c.JobID, c.LeaseEpoch, withPhases(storetest.InfraResult(), p2))
	require.NoError(t, err)
	c = b.ClaimEventually(t, b.Store, n.NodeSession)
	_, err = b.Store.Leases().Complete(b.Ctx, n.NodeSession, c.JobID, c.LeaseEpoch, withPhases(storetest.ACResult(), p1))
	require.NoError(t, err)
	require.Equal(t, []*lease.Phases{&p2, &p1}, phasesOf(t, b, job.JobID))

	// A CHECK job's verdict commits on the slow path.
	chk, err := b.Store.Nodes().StartCheck(b.Ctx, store.CheckRequest{NodeID: n.NodeID, ManifestID: b.Manifest, Language: "cpp17",
		Source: "check"}, "test", "phases")
	require.NoError(t, err)
	cj := b.ClaimEventually(t, b.Store, n.NodeSession)
	require.Equal(t, chk.JobID, cj.JobID)
	_, err = b.Store.Leases().Complete(b.Ctx, n.NodeSession, cj.JobID, cj.LeaseEpoch, withPhases(storetest.ACResult(), p2))
	require.NoError(t, err)
	require.Equal(t, []*lease.Phases{&p2}, phasesOf(t, b, chk.JobID))

	// A negative duration is refused before anything is written.
	neg := int64(-1)
	job = b.Enqueue(t, "ALGO", "phases-negative")
	c = b.ClaimEventually(t, b.Store, n.NodeSession)
	_, err = b.Store.Leases().Complete(b.Ctx, n.NodeSession, c.JobID, c.LeaseEpoch, withPhases(storetest.ACResult(), lease.Phases{QueueMs: &neg}))
	require.ErrorIs(t, err, store.ErrValidation)
	require.Equal(t, []*lease.Phases{nil}, phasesOf(t, b, job.JobID))
}
