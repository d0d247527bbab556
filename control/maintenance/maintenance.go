// Package maintenance owns a control replica's periodic background work on
// the database: the lease reaper (expired leases, and the leases of nodes
// that missed their heartbeats for the store's HeartbeatTTL, back to QUEUED,
// or FAILED when attempts are used up), drain deadlines (enforced here, on the control
// plane, whether or not the admin's CLI still waits) and the idempotency-key
// purge. Both are safe in
// every replica at once (the store skips rows another replica holds).
//
// It owns no HTTP and no long-poll state; it calls control/store only.
package maintenance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kece-oj/kece/control/outage"
	"github.com/kece-oj/kece/control/store"
)

// Defaults for Config.
const (
	// PurgeIntervalDefault is how often old idempotency keys are deleted.
	PurgeIntervalDefault = time.Hour
	// IdempotencyKeyTTLDefault is how long an Idempotency-Key is remembered:
	// far longer than any sane client retry.
	IdempotencyKeyTTLDefault = 7 * 24 * time.Hour
)

// Config tunes the background work. Zero fields take their defaults.
type Config struct {
	// ReapInterval: default and bounds are store.ReapIntervalDefault and
	// store.CheckReapInterval, the one home of that fact.
	ReapInterval      time.Duration
	PurgeInterval     time.Duration
	IdempotencyKeyTTL time.Duration
	// Outage, when set, is the replica's outage tracker: a pass that fails
	// because the database is unreachable is logged there, once per outage.
	Outage *outage.Tracker
}

// WithDefaults returns c with every zero field set to its default, as New
// uses it.
func (c Config) WithDefaults() Config {
	c.ReapInterval = cmp.Or(c.ReapInterval, store.ReapIntervalDefault)
	c.PurgeInterval = cmp.Or(c.PurgeInterval, PurgeIntervalDefault)
	c.IdempotencyKeyTTL = cmp.Or(c.IdempotencyKeyTTL, IdempotencyKeyTTLDefault)
	return c
}

// Validate refuses settings that would hammer the database or forget keys
// while clients may still retry; every problem is reported.
func (c Config) Validate() error {
	var errs []error
	if err := store.CheckReapInterval(c.ReapInterval); err != nil {
		errs = append(errs, fmt.Errorf("maintenance config: %w", err))
	}
	if c.PurgeInterval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("maintenance config: purge interval %s is below 10ms", c.PurgeInterval))
	}
	if c.IdempotencyKeyTTL < time.Hour {
		errs = append(errs, fmt.Errorf("maintenance config: idempotency key TTL %s is below 1h", c.IdempotencyKeyTTL))
	}
	return errors.Join(errs...)
}

// Store is what the background work needs of control/store.
type Store interface {
	Reap(ctx context.Context) (store.ReapStats, error)
	ExpireDrainDeadlines(ctx context.Context) (store.DrainExpiry, error)
	PurgeIdempotencyKeys(ctx context.Context, olderThan time.Duration) (int64, error)
}

// Maintainer runs the reaper and the purge until its context ends.
type Maintainer struct {
	cfg     Config
	store   Store
	log     *slog.Logger
	signals *TestSignals
}

// New returns a maintainer over st.
func New(st Store, cfg Config, log *slog.Logger) (*Maintainer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &Maintainer{cfg: cfg, store: st, log: log}, nil
}

// Config returns the effective configuration.
func (m *Maintainer) Config() Config { return m.cfg }

// TestSignals lets tests wait for a pass instead of sleeping: after each
// pass its outcome is offered on the channel (dropped when nobody listens and
// the buffer is full, so production never blocks on them).
type TestSignals struct {
	// Reaped receives each reaper pass's result.
	Reaped chan ReapPass
	// Purged receives each purge pass's result.
	Purged chan PurgePass
}

// ReapPass is one reaper pass: expired leases, then drain deadlines.
type ReapPass struct {
	Stats store.ReapStats
	Drain store.DrainExpiry
	Err   error
}

// PurgePass is one purge pass.
type PurgePass struct {
	Deleted int64
	Err     error
}

// EnableTestSignals turns the test signals on; call it before Run.
func (m *Maintainer) EnableTestSignals() *TestSignals {
	m.signals = &TestSignals{Reaped: make(chan ReapPass, 64), Purged: make(chan PurgePass, 64)}
	return m.signals
}

// Run runs the reaper (with the drain-deadline pass) and the purge, each on
// its own ticker, until ctx ends.
func (m *Maintainer) Run(ctx context.Context) {
	var g errgroup.Group
	g.Go(func() error { m.every(ctx, m.cfg.ReapInterval, m.reap); return nil })
	g.Go(func() error { m.every(ctx, m.cfg.PurgeInterval, m.purge); return nil })
	_ = g.Wait()
}

func (m *Maintainer) every(ctx context.Context, d time.Duration, pass func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pass(ctx)
		}
	}
}

// failed logs a failed pass: an outage once through the tracker, anything
// else at WARN.
func (m *Maintainer) failed(op string, err error) {
	if m.cfg.Outage == nil || !m.cfg.Outage.Failed(op, err) {
		m.log.Warn(op+" failed", "err", err)
	}
}

func (m *Maintainer) reap(ctx context.Context) {
	st, err := m.store.Reap(ctx)
	if err != nil && ctx.Err() == nil {
		m.failed("reaper pass", err)
	}
	if st.Requeued+st.Failed > 0 {
		m.log.Info("reaped leases", "requeued", st.Requeued, "failed", st.Failed, "from_silent_nodes", st.Silent)
	}
	dx, derr := m.store.ExpireDrainDeadlines(ctx)
	if derr != nil && ctx.Err() == nil {
		m.failed("drain deadline pass", derr)
	}
	if dx.Nodes > 0 {
		m.log.Info("drain deadline passed: leases requeued, nodes disabled", "nodes", dx.Nodes, "requeued", dx.Requeued)
	}
	if m.signals != nil {
		select {
		case m.signals.Reaped <- ReapPass{Stats: st, Drain: dx, Err: errors.Join(err, derr)}:
		default:
		}
	}
}

func (m *Maintainer) purge(ctx context.Context) {
	n, err := m.store.PurgeIdempotencyKeys(ctx, m.cfg.IdempotencyKeyTTL)
	if err != nil && ctx.Err() == nil {
		m.failed("purging idempotency keys", err)
	} else if n > 0 {
		m.log.Info("purged idempotency keys", "count", n)
	}
	if m.signals != nil {
		select {
		case m.signals.Purged <- PurgePass{Deleted: n, Err: err}:
		default:
		}
	}
}
