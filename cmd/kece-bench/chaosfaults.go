package main

// The chaos run's fault schedule and the faults themselves.

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/kece-oj/kece/worker/faultproxy"
)

func (r *chaosRun) noteFault(kind string, end time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faultCount[kind]++
	if end.After(r.lastFaultEnd) {
		r.lastFaultEnd = end
	}
}

// faultSchedule runs faults one after another from warmup to duration.
func (r *chaosRun) faultSchedule(ctx context.Context, start time.Time) error {
	sleepCtx(ctx, r.cfg.warmup)
	if r.galera != nil {
		// One fault: kill the node replica A writes to (node 1) in the
		// middle of the run; the cluster goes on with two nodes.
		sleepCtx(ctx, (r.cfg.duration-r.cfg.warmup)/2)
		if err := r.galera.run(ctx, "kill", 1); err != nil {
			return err
		}
		r.noteFault(faultGaleraKill, time.Now())
		sleepCtx(ctx, time.Until(start.Add(r.cfg.duration)))
		return ctx.Err()
	}
	longAt := r.cfg.longFreezeAt()
	for ctx.Err() == nil {
		if len(longAt) > 0 && time.Since(start) >= longAt[0] {
			// Quiet before and after, so what the freeze costs is its own;
			// a backlog from the quiet before to the freeze's end, so the
			// jobs leased before and during it are the fleet's capacity.
			longAt = longAt[1:]
			stopBacklog := r.keepBacklog(ctx)
			sleepCtx(ctx, r.freezeQuiet())
			err := r.faulting(func() error { return r.longFreeze(ctx) })
			stopBacklog()
			if err != nil {
				return fmt.Errorf("fault %s: %w", faultReplicaLongFreeze, err)
			}
			r.noteFault(faultReplicaLongFreeze, time.Now())
			sleepCtx(ctx, r.freezeQuiet())
			continue
		}
		r.mu.Lock()
		gap := time.Duration(float64(r.cfg.every) * (0.5 + r.faultRng.Float64()))
		kind := r.cfg.faultList[r.faultRng.IntN(len(r.cfg.faultList))]
		r.mu.Unlock()
		if time.Since(start)+gap >= r.cfg.duration {
			if len(longAt) > 0 {
				continue // a long freeze is still due
			}
			break
		}
		t0 := time.Now()
		if err := r.faulting(func() error { return r.fault(ctx, kind) }); err != nil {
			return fmt.Errorf("fault %s: %w", kind, err)
		}
		r.noteFault(kind, time.Now())
		if kind == faultReplicaFreeze {
			gap = max(gap, time.Since(t0)+r.freezeQuiet())
		}
		sleepCtx(ctx, gap-time.Since(t0))
	}
	if r.lastFaultEnd.IsZero() {
		r.lastFaultEnd = time.Now()
	}
	return ctx.Err()
}

func (r *chaosRun) pick(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.faultRng.IntN(n)
}

func (r *chaosRun) pause(ctx context.Context, lo, hi time.Duration) {
	sleepCtx(ctx, lo+time.Duration(r.pick(int((hi-lo)/time.Millisecond)+1))*time.Millisecond)
}

// fault runs one fault to its end (the process is back, the freeze over).
func (r *chaosRun) fault(ctx context.Context, kind string) error {
	switch kind {
	case faultNodeKill, faultNodeRestart:
		n := r.nodes[r.pick(len(r.nodes))]
		r.stopping(n)
		if kind == faultNodeKill {
			_ = n.cmd.Process.Signal(syscall.SIGKILL)
			<-n.exited
		} else {
			stopChild(n.child)
		}
		r.pause(ctx, 500*time.Millisecond, 3*time.Second)
		return r.startNode(n)
	case faultReplicaKill:
		rep := r.replicas[r.pick(len(r.replicas))]
		r.scrapeRetries(ctx, rep)
		_ = rep.proc.cmd.Process.Signal(syscall.SIGKILL)
		<-rep.proc.exited
		r.pause(ctx, 500*time.Millisecond, 3*time.Second)
		return r.startReplica(ctx, rep)
	case faultDockerDown:
		var code []*chaosNode
		for _, n := range r.nodes {
			if n.docker != nil {
				code = append(code, n)
			}
		}
		if len(code) == 0 {
			return nil
		}
		n := code[r.pick(len(code))]
		n.docker.Cut()
		r.pause(ctx, 2*time.Second, 6*time.Second)
		return n.docker.Up()
	case faultReplicaFreeze:
		rep := r.replicas[r.pick(len(r.replicas))]
		if err := rep.proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		return r.frozen(ctx, rep, freezeWindow{replica: rep.name}, 2*time.Second+time.Duration(r.pick(4000))*time.Millisecond)
	case faultDBRestart:
		r.controlDB.crash()
		r.pause(ctx, time.Second, 3*time.Second)
		return r.controlDB.start(ctx)
	case faultLateClaims:
		return r.lateClaims(ctx)
	case faultDropAnswers, faultDelayAnswers:
		rep := r.replicas[r.pick(len(r.replicas))]
		path := []string{"/jobs/claim", "/jobs/renew", "/result", "/heartbeat"}[r.pick(4)]
		times := 1 + r.pick(4)
		rule := faultproxy.Rule{Method: "POST", PathContains: path, Action: faultproxy.DropResponse, Times: times}
		if kind == faultDelayAnswers {
			rule.Action, rule.Delay = faultproxy.DelayResponse, time.Duration(1000+r.pick(3000))*time.Millisecond
		}
		h := rep.proxy.Add(rule)
		// The fault lasts until its answers were spoiled (or 20 s without
		// such a call).
		select {
		case <-h.Fired():
		case <-time.After(20 * time.Second):
		case <-ctx.Done():
		}
		for end := time.Now().Add(20 * time.Second); h.Hits() < times && time.Now().Before(end) && ctx.Err() == nil; {
			sleepCtx(ctx, 100*time.Millisecond)
		}
		if kind == faultDelayAnswers {
			sleepCtx(ctx, rule.Delay)
		}
		return nil
	}
	return fmt.Errorf("unknown fault %q", kind)
}
