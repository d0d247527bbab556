package worker

// Leases: the local deadline of each lease this process holds, and the
// batched renewal that moves it forward.

import (
	"context"
	"time"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
)

// localDeadline is when the job's lease ends locally.
func (j *job) localDeadline() time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.deadline
}

// extend moves the local deadline to sent + remaining − margin (never back).
func (j *job) extend(sent time.Time, remaining, margin time.Duration) {
	d := sent.Add(remaining - margin)
	j.mu.Lock()
	defer j.mu.Unlock()
	if d.After(j.deadline) {
		j.deadline = d
		j.timer.Reset(time.Until(d))
	}
}

// phaseReportDelay is how long a job's new phase (COMPILING → JUDGING) may
// wait before an early renew reports it. Jobs that finish within it cost no
// extra call; the others add one batched renew for all such jobs, so a
// business reading the status sees JUDGING while a job judges, not only
// once the periodic renew (15 s) comes round.
const phaseReportDelay = 100 * time.Millisecond

// phaseChanged asks the renew loop for an early round. It never blocks.
func (n *Node) phaseChanged() {
	select {
	case n.phaseCh <- struct{}{}:
	default:
	}
}

// renewLoop renews every running lease in one batched call per interval,
// and reports phase changes early (phaseReportDelay).
func (n *Node) renewLoop(ctx context.Context) {
	backoff := n.cfg.RetryBase
	periodic := time.NewTimer(n.times().renew)
	defer periodic.Stop()
	for {
		early := false
		select {
		case <-ctx.Done():
			return
		case <-periodic.C:
		case <-n.phaseCh:
			if !n.sleep(ctx, phaseReportDelay) {
				return
			}
			early = true
		}
		n.mu.Lock()
		jobs := make([]*job, 0, len(n.jobs))
		for _, j := range n.jobs {
			if !early || j.unreportedPhase() {
				jobs = append(jobs, j)
			}
		}
		n.mu.Unlock()
		if early {
			// The periodic round keeps its own schedule.
			for len(jobs) > 0 {
				batch := jobs[:min(len(jobs), contracts.BatchMax)]
				jobs = jobs[len(batch):]
				n.renewBatch(ctx, batch, &backoff)
			}
			continue
		}
		next := n.times().renew
		for len(jobs) > 0 {
			batch := jobs[:min(len(jobs), contracts.BatchMax)]
			jobs = jobs[len(batch):]
			if d, ok := n.renewBatch(ctx, batch, &backoff); !ok {
				// Retry soon: every failed round eats into the lease.
				next = min(d, n.times().renew)
			}
		}
		periodic.Reset(next)
	}
}

func (n *Node) renewBatch(ctx context.Context, batch []*job, backoff *time.Duration) (time.Duration, bool) {
	leases := make([]machineapi.LeaseProgress, len(batch))
	byKey := make(map[string]*job, len(batch))
	sentProgress := make(map[string]machineapi.LeaseProgress, len(batch))
	var by time.Time // the earliest local deadline: the renew must answer before it
	for i, j := range batch {
		if d := j.localDeadline(); by.IsZero() || d.Before(by) {
			by = d
		}
		leases[i] = j.progress()
		byKey[j.key] = j
		sentProgress[j.key] = leases[i]
	}
	tok := n.cl.token.Load()
	answers, sent, err := n.cl.renew(ctx, leases, by)
	if err != nil {
		if ctx.Err() != nil {
			return 0, true
		}
		n.m.renewFailures.Add(1)
		n.log.Warn("renew failed", "node_id", n.nodeID, "leases", len(batch), "err", err)
		d, _ := n.handleCallError(ctx, err, tok, backoff)
		return max(d, time.Millisecond), false
	}
	*backoff = n.cfg.RetryBase
	n.m.renewals.Add(1)
	for _, a := range answers {
		j := byKey[jobKey(a.JobId, a.LeaseEpoch)]
		if j == nil {
			continue
		}
		switch a.State {
		case machineapi.LeaseStateOk:
			j.acknowledged(sentProgress[j.key])
			if a.LeaseRemainingMs != nil {
				j.extend(sent, time.Duration(*a.LeaseRemainingMs)*time.Millisecond, n.times().margin)
			}
		case machineapi.LeaseStateLost, machineapi.LeaseStateCancelled:
			cause := errLeaseLost
			if a.State == machineapi.LeaseStateCancelled {
				cause = errJobCancelled
			}
			j.mu.Lock()
			if !j.posting && j.lost == nil {
				// Still executing: stop the sandbox, post nothing. Once
				// posting, LOST may mean our own result committed (its
				// answer lost); the poster resolves that with the server.
				j.lost = cause
				j.cancelExec(cause)
				n.log.Warn("lease ended by the control plane; stopping the job", "node_id", n.nodeID,
					"job_id", a.JobId, "lease_epoch", a.LeaseEpoch, "state", a.State)
			}
			j.mu.Unlock()
		}
	}
	return 0, true
}
