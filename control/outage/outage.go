// Package outage keeps one control replica's view of whether its database is
// reachable, so that an outage is logged once — at WARN, with the cause, when
// the first failure is seen — and its end once, at INFO, with how long it
// lasted and how many failures were absorbed; not one ERROR line per request
// or per background pass. It owns no retry policy: callers still answer 503,
// back off or skip a pass as they would.
package outage

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/kece-oj/kece/control/store"
)

// PingIntervalDefault is how often a replica in an outage pings the database
// to see it recover.
const PingIntervalDefault = time.Second

// Tracker is the outage state of one replica. The zero value is not usable;
// build it with New.
type Tracker struct {
	log      *slog.Logger
	mu       sync.Mutex
	down     bool
	since    time.Time
	failures int64
	began    chan struct{} // closed when an outage begins; replaced at its end
}

// New returns a tracker that logs to log (slog.Default when nil).
func New(log *slog.Logger) *Tracker {
	if log == nil {
		log = slog.Default()
	}
	return &Tracker{log: log, began: make(chan struct{})}
}

// Failed records err from op when it means the database is unreachable
// (store.ErrUnavailable) and reports whether it did; the caller logs other
// errors itself. Only the first failure of an outage is logged.
func (t *Tracker) Failed(op string, err error) bool {
	if !errors.Is(store.Classify(err), store.ErrUnavailable) {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failures++
	if t.down {
		return true
	}
	t.down, t.since, t.failures = true, time.Now(), 1
	close(t.began)
	t.log.Warn("control database unavailable: answering 503 UNAVAILABLE and pausing background work until it answers again",
		"op", op, "cause", err.Error())
	return true
}

// Down reports whether an outage is in progress.
func (t *Tracker) Down() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.down
}

// recovered ends the outage, if any, with one INFO line.
func (t *Tracker) recovered() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.down {
		return
	}
	t.log.Info("control database reachable again", "outage", time.Since(t.since).Round(time.Millisecond).String(),
		"failures", t.failures)
	t.down, t.failures = false, 0
	t.began = make(chan struct{})
}

func (t *Tracker) beginning() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.began
}

// Run watches for recovery until ctx ends: while an outage lasts it pings
// every interval (PingIntervalDefault when 0), and the first ping that
// succeeds ends it. Between outages it does nothing.
func (t *Tracker) Run(ctx context.Context, ping func(context.Context) error, interval time.Duration) {
	if interval <= 0 {
		interval = PingIntervalDefault
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.beginning():
		}
		tick := time.NewTicker(interval)
		for t.Down() {
			select {
			case <-ctx.Done():
				tick.Stop()
				return
			case <-tick.C:
			}
			pctx, cancel := context.WithTimeout(ctx, interval)
			err := ping(pctx)
			cancel()
			if err == nil {
				t.recovered()
			}
		}
		tick.Stop()
	}
}
