package worker

// The claim loop (one long-poll in flight) and giving back leases this
// process will not run.

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"sync/atomic"
	"time"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
)

// claimLoop keeps at most one long-poll claim in flight, asking for the free
// slots (the node's slots less the slots its jobs hold: a job holds its
// weight, slots.go), and starts the jobs it gets. Each claim carries a request id that a
// retry after a failed answer sends again, so the control plane answers the
// leases it granted to the lost answer instead of new ones; the id changes
// after every answer received.
func (n *Node) claimLoop(ctx context.Context) {
	backoff := n.cfg.RetryBase
	requestID, retrying := newClaimRequestID(), false
	for {
		n.mu.Lock()
		free := min(n.slotsLocked()-n.busy, contracts.BatchMax)
		may := n.mayClaimLocked() && !n.failed()
		wait := n.timing.claimWait
		n.mu.Unlock()
		if free <= 0 || !may {
			select {
			case <-n.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		tok := n.cl.token.Load()
		sent := time.Now()
		if retrying {
			n.m.claimRetries.Add(1)
		}
		jobs, got, err := n.cl.claim(ctx, free, wait, requestID)
		rtt := time.Since(sent).Seconds()
		switch {
		case err != nil && ctx.Err() == nil:
			n.prom.claimRTT.WithLabelValues("error").Observe(rtt)
		case err == nil && len(jobs) > 0:
			n.prom.claimRTT.WithLabelValues("jobs").Observe(rtt)
		case err == nil:
			n.prom.claimRTT.WithLabelValues("empty").Observe(rtt)
		}
		if ctx.Err() != nil {
			if len(jobs) > 0 {
				n.log.Warn("claim answer arrived after the node stopped claiming; giving its leases back",
					"node_id", n.nodeID, "jobs", len(jobs))
				n.releaseUnrun(jobs, n.stopReason())
			}
			return
		}
		if err != nil {
			n.m.claimFailures.Add(1)
			n.log.Warn("claim failed; retrying with the same request id", "node_id", n.nodeID, "err", err)
			retrying = true
			d, ok := n.handleCallError(ctx, err, tok, &backoff)
			if !ok && n.failed() {
				return
			}
			if !ok {
				d = n.backoffFor(err, &backoff) // a refused request: do not hammer
			}
			if !n.sleep(ctx, d) {
				return
			}
			continue
		}
		requestID, retrying = newClaimRequestID(), false
		backoff = n.cfg.RetryBase
		n.m.claims.Add(1)
		if len(jobs) == 0 {
			// Jitter so that a fleet does not poll in lockstep.
			n.sleep(ctx, jitter(wait/20+time.Millisecond))
			continue
		}
		n.startOrGiveBack(jobs, got, "claimed jobs", nil, nil)
	}
}

// startOrGiveBack starts jobs just leased (since: when the replica that
// leased them answered, or when the try it answered was sent) — or, when the node decided to stop while that call was
// in flight, does not run what it did not plan to: it gives the leases back
// so the jobs run elsewhere now, their attempts not counted. what names the
// jobs in the log; count (if any) counts the jobs that start; from (if any)
// is the finished job whose slot the first of them takes over.
func (n *Node) startOrGiveBack(jobs []machineapi.ClaimedJob, since time.Time, what string, count *atomic.Int64, from *job) {
	n.mu.Lock()
	reason, stop := n.notRunningLocked()
	n.mu.Unlock()
	if stop {
		n.log.Warn(what+" not started; giving their leases back", "node_id", n.nodeID, "jobs", len(jobs), "reason", reason)
		n.releaseUnrun(jobs, reason)
		return
	}
	if count != nil {
		count.Add(int64(len(jobs)))
	}
	for _, cj := range jobs {
		n.start(n.cycle.jobs, n.cycle.hard, n.cycle.wg, cj, since, from)
	}
}

// newClaimRequestID is a fresh random claim request id.
func newClaimRequestID() string {
	var b [12]byte
	_, _ = crand.Read(b[:]) // never fails (crypto/rand)
	return "claim-" + hex.EncodeToString(b[:])
}

// notRunningLocked says whether the node runs no new job now and why, as
// the release reason of the leases it gives back: it drains, it stops (a
// final refusal, or it stopped claiming), or a dependency is down.
func (n *Node) notRunningLocked() (machineapi.ReleaseReason, bool) {
	switch {
	case n.draining:
		return machineapi.ReleaseReasonDraining, true
	case n.failed() || n.cycle.claim.Err() != nil:
		return machineapi.ReleaseReasonShuttingDown, true
	case n.depsDown:
		return machineapi.ReleaseReasonDependencyDown, true
	}
	return "", false
}

// stopReason is the release reason of a node that stopped claiming.
func (n *Node) stopReason() machineapi.ReleaseReason {
	n.mu.Lock()
	defer n.mu.Unlock()
	if r, ok := n.notRunningLocked(); ok {
		return r
	}
	return machineapi.ReleaseReasonShuttingDown
}

// releaseUnrun gives back leases this process will not run.
func (n *Node) releaseUnrun(jobs []machineapi.ClaimedJob, reason machineapi.ReleaseReason) {
	leases := make([]machineapi.LeaseRef, len(jobs))
	for i, j := range jobs {
		leases[i] = machineapi.LeaseRef{JobId: j.JobId, LeaseEpoch: j.LeaseEpoch}
	}
	n.releaseLeases(leases, reason)
}

// releaseLeases gives leases back, retrying network errors and 5xx for a few
// seconds on a context of its own: it runs when the node stops, after its
// other contexts ended. A release that never arrives costs only the wait
// for the leases to run out (or for this node's next boot to take them back).
func (n *Node) releaseLeases(leases []machineapi.LeaseRef, reason machineapi.ReleaseReason) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseBudget)
	defer cancel()
	backoff := n.cfg.RetryBase
	for {
		tok := n.cl.token.Load()
		answers, err := n.cl.release(ctx, machineapi.ReleaseRequest{Leases: leases, Reason: reason})
		if err == nil {
			for _, a := range answers {
				if a.State == machineapi.ReleaseStateReleased {
					n.m.leasesReleased.Add(1)
				}
				n.log.Info("lease given back", "node_id", n.nodeID, "job_id", a.JobId, "lease_epoch", a.LeaseEpoch,
					"reason", reason, "state", a.State)
			}
			return
		}
		if ctx.Err() != nil {
			n.log.Warn("leases not given back; they will run out", "node_id", n.nodeID, "leases", len(leases), "err", err)
			return
		}
		d, ok := n.handleCallError(ctx, err, tok, &backoff)
		if !ok || !n.sleep(ctx, d) {
			n.log.Warn("leases not given back; they will run out", "node_id", n.nodeID, "leases", len(leases), "err", err)
			return
		}
	}
}

// releaseBudget bounds how long a node tries to give leases back.
const releaseBudget = 5 * time.Second
