package sqljudge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kece-oj/kece/engine"
)

// Janitor removes the temporary databases and accounts this node recorded
// for leases that are no longer live: leftovers of a crash (SIGKILL mid-job)
// or of a cleanup that failed. It never touches rows of other nodes, leases
// for which isLive reports true, or leases running in this process. It
// returns how many resources it removed. Run it at node start (before
// claiming) and periodically; isLive should answer from the node's own view
// of its current leases.
func (e *Executor) Janitor(ctx context.Context, isLive func(jobID string, leaseEpoch int64) bool) (int, error) {
	if isLive == nil {
		return 0, engine.Infraf(engine.InfraInternal, "janitor: isLive is nil")
	}
	if _, err := e.preflight(ctx); err != nil {
		return 0, err
	}
	rows, err := e.nodeResources(ctx, e.cfg.NodeID)
	if err != nil {
		return 0, err
	}
	type leaseKey struct {
		job   string
		epoch int64
	}
	groups := map[leaseKey][]resource{}
	var order []leaseKey
	for _, r := range rows {
		k := leaseKey{r.JobID, r.LeaseEpoch}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	removed := 0
	var errs []error
	for _, k := range order {
		if e.isActive(namesFor(e.cfg.NodeID, k.job, k.epoch).DB) || isLive(k.job, k.epoch) {
			continue
		}
		rs := groups[k]
		if err := e.dropAll(ctx, rs); err != nil {
			errs = append(errs, fmt.Errorf("janitor: job %s lease %d: %w", k.job, k.epoch, err))
			continue
		}
		removed += len(rs)
		e.log.Info("sql judge janitor removed leftovers", "node_id", e.cfg.NodeID, "job_id", k.job,
			"lease_epoch", k.epoch, "resources", len(rs))
	}
	return removed, errors.Join(errs...)
}

// RunJanitor runs Janitor now and then every interval until ctx is done,
// logging failures (the next round retries). It returns ctx's error. The
// worker owns the goroutine that calls it.
func (e *Executor) RunJanitor(ctx context.Context, interval time.Duration, isLive func(jobID string, leaseEpoch int64) bool) error {
	if interval <= 0 {
		return fmt.Errorf("janitor: interval must be positive, got %s", interval)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := e.Janitor(ctx, isLive); err != nil && ctx.Err() == nil {
			e.log.Warn("sql judge janitor round failed", "node_id", e.cfg.NodeID, "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
