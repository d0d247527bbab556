package replica

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/control/atrest"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/longpoll"
	"github.com/kece-oj/kece/control/maintenance"
	"github.com/kece-oj/kece/control/metrics"
	"github.com/kece-oj/kece/control/outage"
	"github.com/kece-oj/kece/control/ratelimit"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/control/webhook"
	"github.com/kece-oj/kece/telemetry"
)

// Config is one replica's configuration besides HTTP (httpapi.Config).
// Zero fields take their defaults.
type Config struct {
	Store store.Config
	// Maintenance tunes the reaper and the purge; its reap interval is also
	// the one Reconcile assumes. Its Outage is the replica's own (set by New).
	Maintenance maintenance.Config
	// SignalPollInterval is how often waiting claims read the cross-replica
	// pool signal; SettlePollInterval how often waiting status reads ask
	// which of their jobs settled on another replica.
	SignalPollInterval time.Duration
	SettlePollInterval time.Duration
	// Metrics tunes the replica's collectors (its Logger defaults to the
	// replica's).
	Metrics metrics.Config
	// Webhook is the deprecated single webhook of KECE_WEBHOOK_URL (one
	// consumer group), run by the replica's webhook dispatcher as an implicit
	// group until the database holds a webhook for that group; nil: none.
	Webhook *webhook.Config
	// WebhookKeys seal and open the webhook groups' secrets in the database
	// (KECE_WEBHOOK_KEY_FILE); nil: groups cannot be given secrets, and
	// stored ones do not open (each such group logs an error naming it).
	WebhookKeys *atrest.Keyring
	// RateLimit, when set, limits each business token's requests: New
	// builds the replica's one limiter from it and HTTPDeps hands it to
	// httpapi. Nil: business clients are not limited by this replica
	// (kece-control serve always sets it).
	RateLimit *ratelimit.Config
}

// WithDefaults returns c with every zero field set to its default, as New
// uses it.
func (c Config) WithDefaults() Config {
	c.Store = c.Store.WithDefaults()
	c.Maintenance = c.Maintenance.WithDefaults()
	c.SignalPollInterval = cmp.Or(c.SignalPollInterval, longpoll.SignalPollIntervalDefault)
	c.SettlePollInterval = cmp.Or(c.SettlePollInterval, longpoll.SettlePollIntervalDefault)
	return c
}

// Validate reports every bad setting at once (apply WithDefaults first).
func (c Config) Validate() error {
	errs := []error{c.Store.Validate(), c.Maintenance.Validate(), c.Metrics.Validate()}
	if c.SignalPollInterval < time.Millisecond {
		errs = append(errs, fmt.Errorf("replica config: signal poll interval %s is below 1ms", c.SignalPollInterval))
	}
	if c.SettlePollInterval < time.Millisecond {
		errs = append(errs, fmt.Errorf("replica config: settle poll interval %s is below 1ms", c.SettlePollInterval))
	}
	if c.Webhook != nil {
		errs = append(errs, c.Webhook.Validate())
	}
	if c.RateLimit != nil {
		if err := c.RateLimit.Default.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("replica config: rate limit default: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Replica is one control-plane process's application: its store and the
// services around it. Build the HTTP server over HTTPDeps.
type Replica struct {
	cfg         Config
	log         *slog.Logger
	store       *store.Store
	artifacts   *artifact.Store
	hub         *longpoll.Hub
	settlements *longpoll.Settlements
	outage      *outage.Tracker
	maintainer  *maintenance.Maintainer
	metrics     *metrics.Metrics
	webhooks    *store.WebhookGroups
	sender      *webhook.Dispatcher
	limiter     *ratelimit.Buckets
	running     atomic.Bool
}

// New builds a replica over the shared database handle db and the artifact
// store; nothing runs until Run.
func New(cfg Config, db *sql.DB, arts *artifact.Store, log *slog.Logger) (*Replica, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil || arts == nil {
		return nil, errors.New("replica: a database handle and an artifact store are required (internal wiring error)")
	}
	if log == nil {
		log = slog.Default()
	}
	raw, err := store.New(db, cfg.Store)
	if err != nil {
		return nil, err
	}
	mc := cfg.Metrics
	mc.Logger = cmp.Or(mc.Logger, log)
	r := &Replica{cfg: cfg, log: log, artifacts: arts, hub: longpoll.New(), settlements: longpoll.NewSettlements(), outage: outage.New(log)}
	r.metrics = metrics.New(telemetry.NewRegistry("control"), raw, mc)
	// The one decoration of the store: every commit reports to the metrics
	// and wakes this replica's waiters (doc.go, "Who wakes waiters").
	r.store = raw.WithNotifier(wakeups{r.hub, r.settlements}).WithObserver(r.metrics)
	mcfg := cfg.Maintenance
	mcfg.Outage = r.outage
	if r.maintainer, err = maintenance.New(maintenance.StoreOf(r.store), mcfg, log); err != nil {
		return nil, err
	}
	if cfg.RateLimit != nil {
		if r.limiter, err = ratelimit.New(*cfg.RateLimit); err != nil {
			return nil, err
		}
	}
	// One webhook sender for every consumer group with a webhook: each group
	// gets its own delivery slots and backoff (control/webhook).
	r.webhooks = store.NewWebhookGroups(db, cfg.WebhookKeys)
	if r.sender, err = webhook.NewDispatcher(webhook.DispatcherConfig{Groups: r.webhooks, Legacy: cfg.Webhook,
		Template: webhook.Config{Observer: r.metrics, Outage: r.outage}}, r.store, log); err != nil {
		return nil, err
	}
	return r, nil
}

// wakeups is the store's Notifier: pool wake-ups go to the long-poll hub,
// settlements to the waiting status reads.
type wakeups struct {
	*longpoll.Hub
	settlements *longpoll.Settlements
}

func (w wakeups) Settled(job int64) { w.settlements.Settled(job) }

var _ store.SettleNotifier = wakeups{}
var _ store.JobNotifier = wakeups{}

// HTTPDeps is what the HTTP layer serves over.
func (r *Replica) HTTPDeps() httpapi.Deps {
	d := httpapi.Deps{Store: r.store, Artifacts: r.artifacts, Claims: r.hub, Settlements: r.settlements, Outage: r.outage,
		Metrics: r.metrics, Reconciler: r, WebhookGroups: r.webhooks}
	if r.limiter != nil { // a nil *Buckets in the interface would not be nil
		d.RateLimiter = r.limiter
	}
	return d
}

// Store is the replica's store, decorated (metrics, wake-ups): for the
// console and in-process callers such as tests.
func (r *Replica) Store() *store.Store { return r.store }

// WebhookGroups is the replica's webhook group store (keyed with its
// WebhookKeys).
func (r *Replica) WebhookGroups() *store.WebhookGroups { return r.webhooks }

// Metrics are the replica's collectors (serve /metrics with Handler).
func (r *Replica) Metrics() *metrics.Metrics { return r.metrics }

// Maintenance is the replica's reaper and purge (tests enable its signals
// before Run).
func (r *Replica) Maintenance() *maintenance.Maintainer { return r.maintainer }

// Config returns the effective configuration.
func (r *Replica) Config() Config { return r.cfg }

// Reconcile checks the scheduling invariants with this replica's reap
// interval.
func (r *Replica) Reconcile(ctx context.Context) (store.Report, error) {
	return r.store.ReconcileWith(ctx, store.ReconcileOptions{ReapInterval: r.cfg.Maintenance.ReapInterval})
}

// Run runs every background service until ctx ends, then returns once all
// of them have stopped: the long-poll signal poller and the settlement
// poller (control/longpoll), the outage tracker's ping, maintenance, and
// the webhook sender when configured. All are safe in every replica at
// once. A replica runs once.
func (r *Replica) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("replica: Run called twice")
	}
	g, ctx := errgroup.WithContext(ctx)
	for _, svc := range r.services() {
		g.Go(func() error {
			svc.run(ctx)
			r.log.Debug("background service stopped", "service", svc.name)
			return nil
		})
	}
	return g.Wait()
}

// service is one background service of the replica.
type service struct {
	name string
	run  func(context.Context)
}

func (r *Replica) services() []service {
	out := []service{
		{"long-poll signals", func(ctx context.Context) {
			r.hub.Run(ctx, r.store, r.cfg.SignalPollInterval, r.backgroundError("long-poll: reading pool signals"))
		}},
		{"settlement waits", func(ctx context.Context) {
			r.settlements.Run(ctx, r.store.Jobs(), r.cfg.SettlePollInterval, r.backgroundError("status waits: reading settled jobs"))
		}},
		{"outage", func(ctx context.Context) { r.outage.Run(ctx, r.store.DB().PingContext, 0) }},
		{"maintenance", r.maintainer.Run},
		{"webhook", r.sender.Run},
	}
	return out
}

// backgroundError reports a failed background pass: an outage to the
// tracker (logged once), anything else at WARN.
func (r *Replica) backgroundError(op string) func(error) {
	return func(err error) {
		if !r.outage.Failed(op, err) {
			r.log.Warn(op+" failed", "err", err)
		}
	}
}
