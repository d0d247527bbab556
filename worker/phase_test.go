package worker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/store"
)

// slowRenewEnv is a control plane whose periodic renew (30 s) never comes
// round in a test: what a node renews, it renews early.
func slowRenewEnv(t *testing.T) *controltest.Env {
	return controltest.Start(t, controltest.Options{Store: store.Config{LeaseTTL: 2 * time.Minute},
		Replica: fastReap, HTTP: httpapi.Config{RenewInterval: 30 * time.Second,
			HeartbeatInterval: 200 * time.Millisecond, ClaimWaitMax: 2 * time.Second}})
}

// A job that moves to JUDGING shows JUDGING on the business status long
// before the periodic renew comes round (here 30 s): the node reports a new
// phase with an early renew.
func TestPhaseChangeReportedEarly(t *testing.T) {
	t.Parallel()
	e := slowRenewEnv(t)
	man := publishEcho(e)
	nd := e.NewNode("cpp", 1, 1)
	e.ForceEnable(nd.ID)
	fake := newFake(true)
	cfg := nodeConfig(t, e.URL, "cpp", nd.JoinCode, fake)
	cfg.RenewInterval = 30 * time.Second
	cfg.SafetyMargin = 5 * time.Second
	runNode(t, cfg)

	jobID := enqueue(e, "cpp17", man)
	started := fake.waitStarted(t, 10*time.Second)
	require.Equal(t, idStr(jobID), started)
	st := time.Now()
	j := waitJob(t, e, jobID, 5*time.Second, "judging", func(j store.Job) bool { return j.Phase == "JUDGING" })
	require.Equal(t, store.StateRunning, j.State)
	require.Less(t, time.Since(st), 5*time.Second)
	status, _ := j.BusinessStatus()
	require.Equal(t, "JUDGING", status)
	fake.release(idStr(jobID))
	waitJob(t, e, jobID, 10*time.Second, "completed", completed)
}

// A job that ends within the phase-report delay costs no renew: its result
// is its only call after the claim, and the control plane accepts it
// without a start report (kece-bench scheduler models nodes this way).
func TestQuickJobCostsNoRenew(t *testing.T) {
	t.Parallel()
	e := slowRenewEnv(t)
	man := publishEcho(e)
	nd := e.NewNode("cpp", 1, 1)
	e.ForceEnable(nd.ID)
	cfg := nodeConfig(t, e.URL, "cpp", nd.JoinCode, newFake(false))
	cfg.RenewInterval = 30 * time.Second
	cfg.SafetyMargin = 5 * time.Second
	n := runNode(t, cfg)

	var ids []int64
	for range 3 {
		ids = append(ids, enqueue(e, "cpp17", man))
	}
	for _, id := range ids {
		j := waitJob(t, e, id, 10*time.Second, "completed", completed)
		require.Equal(t, 1, j.AttemptCount)
	}
	// The last answer may reach the node just after the job reads completed.
	require.Eventually(t, func() bool { return n.Metrics().ResultsAccepted == 3 }, 5*time.Second, 5*time.Millisecond)
	require.Zero(t, n.Metrics().Renewals, "no job judged past the phase-report delay")
}

// The slot cycle: a result carries the claim for the slot it frees, so a
// node of one slot with work waiting runs it job after job without a claim
// long-poll in between; with NoResultClaims the claim loop leases it all.
func TestResultLeasesTheNextJob(t *testing.T) {
	t.Parallel()
	for _, off := range []bool{false, true} {
		t.Run(map[bool]string{false: "cycle", true: "claim-loop"}[off], func(t *testing.T) {
			t.Parallel()
			e := slowRenewEnv(t)
			man := publishEcho(e)
			nd := e.NewNode("cpp", 1, 1)
			e.ForceEnable(nd.ID)
			var ids []int64
			for range 3 {
				ids = append(ids, enqueue(e, "cpp17", man))
			}
			cfg := nodeConfig(t, e.URL, "cpp", nd.JoinCode, newFake(false))
			cfg.NoResultClaims = off
			n := runNode(t, cfg)
			for _, id := range ids {
				j := waitJob(t, e, id, 10*time.Second, "completed", completed)
				require.Equal(t, 1, j.AttemptCount)
			}
			// The last answer may reach the node just after the job reads
			// completed.
			require.Eventually(t, func() bool { return n.Metrics().ResultsAccepted == 3 }, 5*time.Second, 5*time.Millisecond)
			m := n.Metrics()
			require.Equal(t, int64(3), m.JobsStarted)
			if off {
				require.Zero(t, m.CycleJobs)
			} else {
				require.Equal(t, int64(2), m.CycleJobs, "the first job's result leased the second, its result the third")
			}
		})
	}
}
