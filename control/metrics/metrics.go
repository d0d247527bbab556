// Package metrics is the control plane's Prometheus instrumentation: the
// collectors of one replica, the store observer that moves them, the HTTP
// request metrics and the fleet gauges read from the database on scrape
// (queue depth and oldest wait per pool, nodes, settlement backlog).
//
// It owns metric names and labels and nothing else: the store reports what
// happened through store.Observer, the HTTP layer through ObserveRequest.
// Labels are bounded (pools, states, verdicts, route patterns, error codes
// from closed sets); ids never become labels. Each label name means one
// thing across KECE's metrics (status_code: an HTTP status; error_code: an
// API or protocol error code; reason: why something was refused or
// retried; outcome: what became of a job; result: how one operation ended;
// kind: submission or rejudge; state: a configured or delivery state), and
// every label value is lower case (label, below).
package metrics

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kece-oj/kece/control/store"
)

// Defaults for Config.
const (
	// FleetCacheTTLDefault bounds how often a scrape reads the database: a
	// scrape within this long of the last one reuses its answer.
	FleetCacheTTLDefault = 5 * time.Second
	// FleetTimeoutDefault bounds the database read of one scrape.
	FleetTimeoutDefault = 3 * time.Second
)

// Config tunes the metrics of one replica.
type Config struct {
	FleetCacheTTL time.Duration
	FleetTimeout  time.Duration
	Logger        *slog.Logger
}

// Validate refuses settings that would make every scrape wait or hammer
// the database.
func (c Config) Validate() error {
	var errs []error
	if c.FleetCacheTTL < 0 || c.FleetCacheTTL > 10*time.Minute {
		errs = append(errs, fmt.Errorf("metrics: fleet cache TTL %s must be 0..10m", c.FleetCacheTTL))
	}
	if c.FleetTimeout < 0 || c.FleetTimeout > time.Minute {
		errs = append(errs, fmt.Errorf("metrics: fleet timeout %s must be 0..1m", c.FleetTimeout))
	}
	return errors.Join(errs...)
}

func (c *Config) withDefaults() {
	c.FleetCacheTTL = cmp.Or(c.FleetCacheTTL, FleetCacheTTLDefault)
	c.FleetTimeout = cmp.Or(c.FleetTimeout, FleetTimeoutDefault)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// FleetSource reads the database-backed gauges (the store implements it).
type FleetSource interface {
	FleetStats(ctx context.Context) (store.FleetStats, error)
}

// Metrics are the collectors of one control replica. It implements
// store.Observer.
type Metrics struct {
	reg *prometheus.Registry
	cfg Config

	enqueued      *prometheus.CounterVec
	claimed       *prometheus.CounterVec
	completed     *prometheus.CounterVec
	infraRetries  *prometheus.CounterVec
	systemErrors  *prometheus.CounterVec
	refused       *prometheus.CounterVec
	claimTx       prometheus.Histogram
	pickup        *prometheus.HistogramVec
	claimWait     *prometheus.HistogramVec
	expired       *prometheus.CounterVec
	reaperPasses  *prometheus.CounterVec
	delivered     prometheus.Counter
	deadLettered  prometheus.Counter
	webhook       *prometheus.CounterVec
	dbErrors      *prometheus.CounterVec
	txRetries     *prometheus.CounterVec
	httpDuration  *prometheus.HistogramVec
	fleetFailures prometheus.Counter
}

// New registers the replica's collectors on reg (which should come from
// telemetry.NewRegistry, with the go_ and process_ collectors) and reads the
// fleet gauges from src on scrape.
func New(reg *prometheus.Registry, src FleetSource, cfg Config) *Metrics {
	cfg.withDefaults()
	m := &Metrics{reg: reg, cfg: cfg}
	m.enqueued = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kece_control_jobs_enqueued_total",
		Help: "Jobs written by this replica, by pool and kind (submission, rejudge)."}, []string{"pool", "kind"})
	m.claimed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kece_control_jobs_claimed_total",
		Help: "Leases granted by this replica, by pool."}, []string{"pool"})
	m.completed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kece_control_jobs_completed_total",
		Help: "Results accepted by this replica, by pool and outcome (the verdict, system_error, retry, already_committed; lower case)."},
		[]string{"pool", "outcome"})
	m.infraRetries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kece_control_infra_retries_total",
		Help: "Jobs requeued after an infrastructure error reported by a node, by pool and error code (lower case)."}, []string{"pool", "error_code"})
	m.systemErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kece_control_jobs_system_error_total",
		Help: "Jobs failed to SYSTEM_ERROR (attempts exhausted), by pool and last error code (lower case)."}, []string{"pool", "error_code"})
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kece_control_results_refused_total",
		Help: "Results refused (stale, fenced or invalid), by reason."}, []string{"reason"})
	m.claimTx = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kece_control_claim_transaction_seconds",
		Help:    "Latency of one claim transaction (lock host group and node, pick, lease).",
		Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5}})
	m.pickup = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kece_control_job_pickup_seconds",
		Help:    "How long a job had been ready (enqueued or out of retry backoff) when a node claimed it, by pool and kind.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}}, []string{"pool", "kind"})
	m.claimWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kece_control_claim_wait_seconds",
		Help:    "Time a claim long-poll was held before it answered, by pool and result (jobs, empty).",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 20}}, []string{"pool", "result"})
	m.expired = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kece_control_lease_expiries_total",
		Help: "Expired leases taken back by this replica's reaper, by outcome (requeued, failed)."}, []string{"outcome"})
	m.reaperPasses = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kece_control_reaper_passes_total",
		Help: "Reaper passes, by result (ok, error)."}, []string{"result"})
	m.delivered = prometheus.NewCounter(prometheus.CounterOpts{Name: "kece_control_settlement_events_delivered_total",
		Help: "Settlement events acknowledged (pulled and acked, or pushed by webhook) through this replica."})
	m.deadLettered = prometheus.NewCounter(prometheus.CounterOpts{Name: "kece_control_settlement_events_dead_lettered_total",
		Help: "Settlement events dead-lettered after their last failed push delivery."})
	m.webhook = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kece_control_webhook_deliveries_total",
		Help: "Webhook delivery attempts, by result (delivered, failed, dead)."}, []string{"result"})
	m.dbErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kece_control_db_errors_total",
		Help: "Database failures (server errors, lost connections), by operation."}, []string{"op"})
	m.txRetries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kece_control_db_tx_retries_total",
		Help: "Transactions retried after a deadlock (1213) or lock-wait timeout (1205), by reason (deadlock, lock_wait_timeout)."}, []string{"reason"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kece_control_http_request_duration_seconds",
		Help:    "HTTP requests by surface (machine, admin, business, ops), route pattern, method and HTTP status code.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20}},
		[]string{"surface", "route", "method", "status_code"})
	m.fleetFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "kece_control_fleet_scrape_errors_total",
		Help: "Scrapes whose database read of the fleet gauges failed (the gauges are then missing)."})
	// Series an alert or a panel sums over exist from the start (at 0), so
	// an expression over them returns series before the first event.
	for _, op := range []string{"claim", "complete", "reap", "enqueue", "ack_events", "fail_event", "fleet_stats"} {
		m.dbErrors.WithLabelValues(op)
	}
	for _, code := range []string{"deadlock", "lock_wait_timeout"} {
		m.txRetries.WithLabelValues(code)
	}
	for _, r := range []string{"delivered", "failed", "dead"} {
		m.webhook.WithLabelValues(r)
	}
	for _, o := range []string{"requeued", "failed"} {
		m.expired.WithLabelValues(o)
	}
	for _, r := range []string{"ok", "error"} {
		m.reaperPasses.WithLabelValues(r)
	}
	for _, r := range []string{store.RefusedLeaseLost, store.RefusedConflict, store.RefusedCancelled, store.RefusedSuperseded,
		store.RefusedSessionSuperseded, store.RefusedRevoked, store.RefusedInvalid, store.RefusedNotFound, store.RefusedOther} {
		m.refused.WithLabelValues(r)
	}
	reg.MustRegister(m.enqueued, m.claimed, m.completed, m.infraRetries, m.systemErrors, m.refused, m.claimTx, m.pickup,
		m.claimWait, m.expired, m.reaperPasses, m.delivered, m.deadLettered, m.webhook, m.dbErrors, m.txRetries,
		m.httpDuration, m.fleetFailures, newFleetCollector(src, m))
	return m
}

// Registry returns the registry the metrics live in.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, ErrorLog: slogErrorLog{m.cfg.Logger}})
}

type slogErrorLog struct{ l *slog.Logger }

func (e slogErrorLog) Println(v ...any) { e.l.Warn("metrics: scrape error", "err", v) }

// Surfaces of ObserveRequest.
const (
	SurfaceMachine  = "machine"
	SurfaceAdmin    = "admin"
	SurfaceBusiness = "business"
	SurfaceOps      = "ops"
)

// RouteClaim is the route pattern of the claim long-poll.
const RouteClaim = "/api/v1/internal/judgers/jobs/claim"

// ObserveRequest records one HTTP request. route must be a registered
// pattern (or "unmatched"), never a raw path. A claim long-poll also feeds
// the claim wait histogram with the pool and result the store reported for
// ctx.
func (m *Metrics) ObserveRequest(ctx context.Context, surface, route, method string, code int, d time.Duration) {
	m.httpDuration.WithLabelValues(surface, route, label(method), strconv.Itoa(code)).Observe(d.Seconds())
	if route != RouteClaim || code != http.StatusOK {
		return
	}
	ri := requestInfoFrom(ctx)
	if ri == nil {
		return
	}
	ri.mu.Lock()
	pool, claimed := ri.pool, ri.claimed
	ri.mu.Unlock()
	result := "empty"
	if claimed > 0 {
		result = "jobs"
	}
	m.claimWait.WithLabelValues(pool, result).Observe(d.Seconds())
}

// WebhookDelivery counts one webhook delivery attempt (delivered, failed,
// dead); control/webhook reports it.
func (m *Metrics) WebhookDelivery(result string) { m.webhook.WithLabelValues(label(result)).Inc() }

// RequestInfo is what the store tells about one HTTP request (through its
// context) that the request's metrics need: the claim's pool and count.
type RequestInfo struct {
	mu      sync.Mutex
	pool    string
	claimed int
}

type requestInfoKey struct{}

// WithRequestInfo returns ctx carrying a fresh RequestInfo.
func WithRequestInfo(ctx context.Context) context.Context {
	return context.WithValue(ctx, requestInfoKey{}, &RequestInfo{})
}

func requestInfoFrom(ctx context.Context) *RequestInfo {
	ri, _ := ctx.Value(requestInfoKey{}).(*RequestInfo)
	return ri
}

var _ store.Observer = (*Metrics)(nil)

// JobsEnqueued implements store.Observer.
func (m *Metrics) JobsEnqueued(_ context.Context, pool, kind string, n int) {
	m.enqueued.WithLabelValues(pool, label(kind)).Add(float64(n))
}

// ClaimTransaction implements store.Observer.
func (m *Metrics) ClaimTransaction(ctx context.Context, pool string, claimed int, d time.Duration, err error) {
	m.claimTx.Observe(d.Seconds())
	if err != nil {
		return
	}
	if claimed > 0 {
		m.claimed.WithLabelValues(pool).Add(float64(claimed))
	}
	if ri := requestInfoFrom(ctx); ri != nil {
		ri.mu.Lock()
		if pool != "" {
			ri.pool = pool
		}
		ri.claimed += claimed
		ri.mu.Unlock()
	}
}

// SetRequestPool tells the request's metrics which pool the calling node
// serves (the claim wait histogram is labelled by it even when nothing was
// claimed).
func SetRequestPool(ctx context.Context, pool string) {
	if ri := requestInfoFrom(ctx); ri != nil {
		ri.mu.Lock()
		ri.pool = pool
		ri.mu.Unlock()
	}
}

// JobPickedUp implements store.Observer.
func (m *Metrics) JobPickedUp(_ context.Context, pool, kind string, wait time.Duration) {
	m.pickup.WithLabelValues(pool, label(kind)).Observe(max(wait, 0).Seconds())
}

// ResultRecorded implements store.Observer.
func (m *Metrics) ResultRecorded(_ context.Context, pool, outcome, code string) {
	m.completed.WithLabelValues(pool, label(outcome)).Inc()
	switch outcome {
	case "RETRY":
		m.infraRetries.WithLabelValues(pool, label(code)).Inc()
	case "SYSTEM_ERROR":
		m.systemErrors.WithLabelValues(pool, label(code)).Inc()
	}
}

// ResultRefused implements store.Observer.
func (m *Metrics) ResultRefused(_ context.Context, reason string) {
	m.refused.WithLabelValues(label(reason)).Inc()
}

// LeasesExpired implements store.Observer.
func (m *Metrics) LeasesExpired(_ context.Context, requeued, failed int, err error) {
	m.expired.WithLabelValues("requeued").Add(float64(requeued))
	m.expired.WithLabelValues("failed").Add(float64(failed))
	if failed > 0 {
		// Lease expiries with no attempts left end as SYSTEM_ERROR too.
		m.systemErrors.WithLabelValues("", "lease_expired").Add(float64(failed))
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.reaperPasses.WithLabelValues(result).Inc()
}

// EventsDelivered implements store.Observer.
func (m *Metrics) EventsDelivered(_ context.Context, n int) { m.delivered.Add(float64(n)) }

// EventDeliveryFailed implements store.Observer.
func (m *Metrics) EventDeliveryFailed(_ context.Context, dead bool) {
	if dead {
		m.deadLettered.Inc()
	}
}

// TxRetried implements store.Observer.
func (m *Metrics) TxRetried(_ context.Context, reason string) {
	m.txRetries.WithLabelValues(label(reason)).Inc()
}

// label is a label value as every KECE metric writes it: lower case
// (verdicts, outcomes, error codes and states arrive upper case from the
// store and the API).
func label(v string) string { return strings.ToLower(v) }

// DBError implements store.Observer.
func (m *Metrics) DBError(_ context.Context, op string) { m.dbErrors.WithLabelValues(op).Inc() }
