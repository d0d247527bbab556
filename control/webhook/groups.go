package webhook

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kece-oj/kece/control/store"
)

// RefreshDefault is how often a Dispatcher rereads the webhook groups: a
// change made through the admin API (any replica) reaches every replica's
// sender within it.
const RefreshDefault = 5 * time.Second

// DispatcherConfig configures a Dispatcher.
type DispatcherConfig struct {
	// Groups is where the webhook groups are stored (admin API, kecectl,
	// console); nil: only Legacy.
	Groups *store.WebhookGroups
	// Legacy is the deprecated single webhook of KECE_WEBHOOK_URL and
	// KECE_WEBHOOK_SECRET_FILE for KECE_WEBHOOK_GROUP: an implicit group,
	// run unless the database holds a webhook for the same group (which
	// then wins). Nil: none.
	Legacy *Config
	// Template gives every group's sender what groups do not set
	// themselves: Batch, backoff, poll interval, Observer, Outage.
	Template Config
	// Refresh is how often the groups are reread (default RefreshDefault).
	Refresh time.Duration
}

// Dispatcher is the one webhook sender of a replica: it runs a Sender per
// consumer group that has a webhook, each with its own concurrency, hold and
// backoff, so a receiver that is slow or dead delays only its own group.
// It rereads the groups every Refresh: a new group starts, a deleted or
// disabled one stops, a new URL or secret applies to the next delivery,
// and other changes replace the group's sender (the old one finishes its
// deliveries in flight first; retire).
type Dispatcher struct {
	cfg   DispatcherConfig
	store *store.Store
	log   *slog.Logger

	// mu guards running (Sync writes it, Running reads it).
	mu      sync.Mutex
	running map[string]*groupRun
	// retiring are senders replaced by new settings, finishing their
	// deliveries in flight.
	retiring sync.WaitGroup
	// complained: the last problem logged per group, so a group that stays
	// broken is logged once per change, not once per refresh.
	complained map[string]string
}

type groupRun struct {
	shape  string        // settings whose change restarts the sender
	grace  time.Duration // how long a replaced sender may finish its deliveries
	sender *Sender
	cancel context.CancelFunc
	done   chan struct{}
}

// NewDispatcher checks the configuration; nothing runs until Run.
func NewDispatcher(cfg DispatcherConfig, st *store.Store, log *slog.Logger) (*Dispatcher, error) {
	cfg.Refresh = cmp.Or(cfg.Refresh, RefreshDefault)
	if cfg.Refresh < 10*time.Millisecond {
		return nil, fmt.Errorf("webhook dispatcher: refresh %s is below 10ms", cfg.Refresh)
	}
	if cfg.Legacy != nil {
		if err := cfg.Legacy.Validate(); err != nil {
			return nil, err
		}
	}
	if log == nil {
		log = slog.Default()
	}
	return &Dispatcher{cfg: cfg, store: st, log: log, running: map[string]*groupRun{}, complained: map[string]string{}}, nil
}

// Run serves every group until ctx ends, then stops their senders and
// waits for them.
func (d *Dispatcher) Run(ctx context.Context) {
	defer d.stopAll()
	for {
		d.Sync(ctx)
		if !sleepCtx(ctx, d.cfg.Refresh) {
			return
		}
	}
}

// Sync reads the groups once and starts, updates or stops senders to match.
// A failed read keeps what runs.
func (d *Dispatcher) Sync(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	want, err := d.wanted(ctx)
	if err != nil {
		if ctx.Err() == nil && (d.cfg.Template.Outage == nil || !d.cfg.Template.Outage.Failed("webhook: read groups", err)) {
			d.log.Warn("webhook: reading the webhook groups failed; senders keep their settings", "err", err)
		}
		return
	}
	for group, r := range d.running {
		if _, ok := want[group]; !ok {
			d.stop(group, r)
		}
	}
	for group, cfg := range want {
		r := d.running[group]
		shape := fmt.Sprintf("%d/%s/%d", cfg.Concurrency, cfg.Timeout, cfg.MaxAttempts)
		if r != nil && r.shape == shape {
			r.sender.SetTarget(cfg.URL, cfg.Secrets)
			continue
		}
		if r != nil {
			d.retire(group, r)
		}
		s, err := New(cfg, d.store, d.log)
		if err != nil {
			d.complain(group, "webhook: group cannot run", err)
			continue
		}
		sctx, cancel := context.WithCancel(ctx)
		r = &groupRun{shape: shape, grace: cfg.Timeout + 5*time.Second, sender: s, cancel: cancel, done: make(chan struct{})}
		go func() { defer close(r.done); s.Run(sctx) }()
		d.running[group] = r
		d.log.Info("webhook: delivering group", "consumer_group", group, "concurrency", cfg.Concurrency, "timeout", cfg.Timeout.String())
	}
}

// Concurrency is the delivery slots of the group's running sender; 0 when
// none runs.
func (d *Dispatcher) Concurrency(group string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := d.running[group]; r != nil {
		return r.sender.cfg.Concurrency
	}
	return 0
}

// Running lists the groups whose sender runs, sorted.
func (d *Dispatcher) Running() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.running))
	for g := range d.running {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

// wanted is the sender configuration of every group that should run now.
func (d *Dispatcher) wanted(ctx context.Context) (map[string]Config, error) {
	want := map[string]Config{}
	var groups []store.WebhookGroup
	if d.cfg.Groups != nil {
		var err error
		if groups, err = d.cfg.Groups.List(ctx); err != nil {
			return nil, err
		}
	}
	stored := map[string]bool{}
	for _, g := range groups {
		stored[g.Group] = true
		if !g.Enabled {
			delete(d.complained, g.Group)
			continue
		}
		cfg, err := d.groupConfig(g)
		if err != nil {
			d.complain(g.Group, "webhook: group not delivered", err)
			continue
		}
		delete(d.complained, g.Group)
		want[g.Group] = cfg
	}
	if l := d.cfg.Legacy; l != nil {
		group := cmp.Or(l.Group, store.DefaultConsumerGroup)
		if stored[group] {
			d.complainAs(group+"/legacy", group, "webhook: KECE_WEBHOOK_URL is ignored: the group has a webhook of its own in the database",
				errors.New("remove KECE_WEBHOOK_URL and KECE_WEBHOOK_SECRET_FILE"))
		} else {
			cfg := d.template()
			cfg.URL, cfg.Secrets, cfg.Group = l.URL, l.Secrets, group
			cfg.Timeout, cfg.MaxAttempts, cfg.Concurrency = l.Timeout, l.MaxAttempts, l.Concurrency
			cfg.setDefaults()
			want[group] = cfg
		}
	}
	return want, nil
}

// template is the group-independent part of every sender's Config.
func (d *Dispatcher) template() Config {
	t := d.cfg.Template
	t.URL, t.Secrets, t.Group = "", nil, ""
	return t
}

// groupConfig is a stored group's sender configuration; an error names
// what an operator fixes.
func (d *Dispatcher) groupConfig(g store.WebhookGroup) (Config, error) {
	if err := g.Readable(); err != nil {
		return Config{}, fmt.Errorf("%w; the key that sealed it is not in KECE_WEBHOOK_KEY_FILE or KECE_WEBHOOK_OLD_KEY_FILE: "+
			"restore that key file, or set a new secret with `kecectl webhook rotate %s --overlap 0` (and give it to the receiver)", err, g.Group)
	}
	if len(g.Secrets) == 0 {
		return Config{}, fmt.Errorf("webhook group %q has no secret: `kecectl webhook rotate %s`", g.Group, g.Group)
	}
	lines := make([]string, 0, len(g.Secrets))
	for _, s := range g.Secrets {
		lines = append(lines, s.Value)
	}
	secrets, err := ParseSecrets(strings.Join(lines, "\n"))
	if err != nil {
		return Config{}, fmt.Errorf("webhook group %q: %w", g.Group, err)
	}
	cfg := d.template()
	cfg.URL, cfg.Secrets, cfg.Group = g.URL, secrets, g.Group
	cfg.Concurrency, cfg.Timeout, cfg.MaxAttempts = g.Concurrency, g.Timeout, g.MaxAttempts
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("webhook group %q: %w", g.Group, err)
	}
	return cfg, nil
}

// complain logs a group's problem once while it stays the same.
func (d *Dispatcher) complain(group, msg string, err error) { d.complainAs(group, group, msg, err) }

// complainAs is complain for one subject of a group's problems.
func (d *Dispatcher) complainAs(subject, group, msg string, err error) {
	key := msg + ": " + err.Error()
	if d.complained[subject] == key {
		return
	}
	d.complained[subject] = key
	d.log.Error(msg, "consumer_group", group, "err", err)
}

func (d *Dispatcher) stop(group string, r *groupRun) {
	r.cancel()
	<-r.done
	delete(d.running, group)
	d.log.Info("webhook: stopped delivering group", "consumer_group", group)
}

// retire replaces a group's sender: the old one claims nothing more and
// finishes its deliveries in flight (within its grace) while the new one
// starts, so a settings change leaves no event to wait out its lease.
func (d *Dispatcher) retire(group string, r *groupRun) {
	delete(d.running, group)
	r.sender.Drain()
	d.log.Info("webhook: group settings changed; the previous sender finishes its deliveries in flight", "consumer_group", group)
	d.retiring.Go(func() {
		t := time.NewTimer(r.grace)
		defer t.Stop()
		select {
		case <-r.done:
		case <-t.C:
		}
		r.cancel()
		<-r.done
	})
}

func (d *Dispatcher) stopAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for g, r := range d.running {
		d.stop(g, r)
	}
	d.retiring.Wait()
}
