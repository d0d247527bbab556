// Package httpapi is the control plane's HTTP surface: the machine protocol
// for judge nodes, the admin API and the business API, each generated from
// its OpenAPI spec in contracts/ and validated against it before a handler
// runs. Handlers translate between the wire types and control/store; they
// never build SQL. Errors are mapped to status + machine code in errors.go.
//
// It only serves HTTP over what it is handed (Deps): the process's replica
// (control/replica) builds the store, the long-poll hub, the settlement
// waiters, the outage tracker and the metrics, and runs their background
// work. This package runs nothing in the background and wakes no waiter:
// the store and the lease engine's decorator do, after the commit
// (control/internal/jobdb/wakeups.go, control/lease/observed.go).
package httpapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	nethttpmiddleware "github.com/oapi-codegen/nethttp-middleware"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/forwarded"
	"github.com/kece-oj/kece/control/metrics"
	"github.com/kece-oj/kece/control/outage"
	"github.com/kece-oj/kece/control/probe"
	"github.com/kece-oj/kece/control/store"
)

// Defaults for Config (DESIGN §6).
const (
	ClaimWaitMaxDefault      = contracts.ClaimWaitMax
	HeartbeatIntervalDefault = contracts.HeartbeatIntervalDefault
	RenewIntervalDefault     = contracts.RenewIntervalDefault
	MaxBodyBytesDefault      = 8 << 20
	machinePrefix            = "/api/v1/internal/judgers/"
	adminPrefix              = "/api/v1/admin/"
	businessPrefix           = "/api/v1/"
)

// Config tunes the HTTP layer.
type Config struct {
	ClaimWaitMax      time.Duration
	HeartbeatInterval time.Duration
	RenewInterval     time.Duration
	MaxBodyBytes      int64
	// BodyReadTimeout, WriteTimeout and BodyMinRate bound slow clients per
	// request (deadlines.go).
	BodyReadTimeout time.Duration
	WriteTimeout    time.Duration
	BodyMinRate     int64
	// Probe is the SSRF allowlist for probing node addresses (admin API).
	// The zero value allows nothing: every probe is ADDRESS_NOT_ALLOWED.
	Probe probe.Config
	// MetricsElsewhere: /metrics is served on a separate listener
	// (kece-control --metrics-listen), not by Handler.
	MetricsElsewhere bool
	// DisableAPIDocs turns off /openapi/*.yaml and /docs/ (apidocs.go).
	DisableAPIDocs bool
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names the
	// caller that audit rows record; default none (the TCP peer).
	TrustedProxies forwarded.Proxies
}

// WithDefaults returns c with every zero field set to its default, as New
// uses it: what a caller validates before connecting anything.
func (c Config) WithDefaults() Config {
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
	c.ClaimWaitMax = cmp.Or(c.ClaimWaitMax, ClaimWaitMaxDefault)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, HeartbeatIntervalDefault)
	c.RenewInterval = cmp.Or(c.RenewInterval, RenewIntervalDefault)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, MaxBodyBytesDefault)
	c.BodyReadTimeout = cmp.Or(c.BodyReadTimeout, BodyReadTimeoutDefault)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, WriteTimeoutDefault)
	c.BodyMinRate = cmp.Or(c.BodyMinRate, BodyMinRateDefault)
}

// Validate refuses nonsensical settings, every one of them at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("http config: "+format, args...)) }
	if c.ClaimWaitMax < 0 || c.ClaimWaitMax > contracts.ClaimWaitMax {
		bad("claim wait max %s must be 0..%s", c.ClaimWaitMax, contracts.ClaimWaitMax)
	}
	if c.HeartbeatInterval < 100*time.Millisecond {
		bad("heartbeat interval %s is below 100ms", c.HeartbeatInterval)
	}
	if c.RenewInterval < 100*time.Millisecond {
		bad("renew interval %s is below 100ms", c.RenewInterval)
	}
	if c.MaxBodyBytes < 64<<10 {
		bad("max body %d is below 64 KiB", c.MaxBodyBytes)
	}
	if c.BodyReadTimeout < 10*time.Millisecond || c.WriteTimeout < 10*time.Millisecond {
		bad("body read timeout %s and write timeout %s must be at least 10ms", c.BodyReadTimeout, c.WriteTimeout)
	}
	if c.BodyMinRate < 1<<10 {
		bad("body min rate %d B/s is below 1 KiB/s", c.BodyMinRate)
	}
	if err := c.Probe.Validate(); err != nil {
		bad("%w", err)
	}
	if err := c.TrustedProxies.Validate(); err != nil {
		bad("%w", err)
	}
	return errors.Join(errs...)
}

// Deps are what the HTTP layer serves over, every one built (and, where it
// has background work, run) by the process's replica (control/replica).
type Deps struct {
	// Store is the replica's store as the replica decorated it: it reports
	// to the metrics and wakes waiters after its commits.
	Store     *store.Store
	Artifacts *artifact.Store
	// Claims parks claim long-polls until the store's commits (or another
	// replica's pool signal) wake them: the replica's long-poll hub.
	Claims ClaimWaiter
	// Settlements parks waiting status reads until their job settles.
	Settlements SettlementWaiter
	// Outage says whether the database is known to be down (error answers
	// and the access log lean on it); the replica runs it.
	Outage *outage.Tracker
	// Metrics are the replica's collectors.
	Metrics *metrics.Metrics
	// Reconciler checks the scheduling invariants with the replica's reap
	// interval (admin Reconcile).
	Reconciler Reconciler
	// WebhookGroups stores the webhooks per consumer group, sealing their
	// secrets with the replica's key; nil: a store over Store's database
	// with no key (lists work, storing a secret answers WEBHOOK_KEY_MISSING).
	WebhookGroups *store.WebhookGroups
	// RateLimiter limits each business token's requests (ratelimit.go),
	// the replica's one, built from its config; nil: business clients are
	// not limited by the control plane.
	RateLimiter RateLimiter
}

// ClaimWaiter parks claim long-polls of a pool (longpoll.Hub).
type ClaimWaiter interface {
	// Watch returns a channel closed when the pool may have work; take it
	// before the claim so a wake-up in between is not missed.
	Watch(pool string) <-chan struct{}
	// Done ends a Watch.
	Done(ch <-chan struct{})
}

// SettlementWaiter parks waiting status reads (longpoll.Settlements).
type SettlementWaiter interface {
	Watch(job int64) (<-chan struct{}, func())
	Waiting() int
}

// Reconciler checks the scheduling invariants now.
type Reconciler interface {
	Reconcile(ctx context.Context) (store.Report, error)
}

// Server serves all three API surfaces of one control replica.
type Server struct {
	cfg       Config
	store     *store.Store
	artifacts *artifact.Store
	claims    ClaimWaiter
	// settlements wakes waiting status reads (status_wait.go).
	settlements SettlementWaiter
	// outage knows whether the database is down (logged once by the replica).
	outage     *outage.Tracker
	reconciler Reconciler
	limiter    RateLimiter
	log        *slog.Logger
	manifests  *wireManifests
	webhooks   *store.WebhookGroups

	// internal is the machine protocol's mux; tests add routes to prove the
	// default-deny middleware covers handlers it does not know.
	internal *http.ServeMux
	admin    http.Handler
	business http.Handler
	// adminMux and businessMux are the inner muxes, kept to name the route
	// pattern of a request for metrics and logs.
	adminMux, businessMux *http.ServeMux
	metrics               *metrics.Metrics
	apiDocs               []apiDoc

	// extra holds handlers mounted by other packages (Mount); nil until
	// the first Mount.
	extra *http.ServeMux

	closing   chan struct{}
	closeOnce sync.Once
	// parkedClaims counts claims that found nothing and wait for a reason
	// to try again, so tests can tell a claim has parked without sleeping.
	parkedClaims atomic.Int64
}

// Mount serves h for pattern (an http.ServeMux pattern outside the API
// prefixes, such as "/console/" or "GET /status") beside the APIs, with the
// same request ids, metrics, access log, slow-client bounds and JSON 404/405
// answers. Call it before Handler.
func (s *Server) Mount(pattern string, h http.Handler) {
	if s.extra == nil {
		s.extra = http.NewServeMux()
	}
	s.extra.Handle(pattern, h)
}

// StopLongPolls makes waiting claims answer (empty) at once; call it before
// http.Server.Shutdown so a restart does not wait out 15 s polls.
func (s *Server) StopLongPolls() { s.closeOnce.Do(func() { close(s.closing) }) }

// New builds a server over what the replica built (d); every field of d
// but RateLimiter is required.
func New(cfg Config, d Deps, log *slog.Logger) (*Server, error) {
	cfg.setDefaults()
	if err := errors.Join(cfg.Validate(), d.validate()); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	if ttl := d.Store.Config().HeartbeatTTL; 2*cfg.HeartbeatInterval > ttl {
		// One late heartbeat must not cost a healthy node its leases.
		return nil, fmt.Errorf("http config: heartbeat interval %s is more than half the store's heartbeat TTL %s", cfg.HeartbeatInterval, ttl)
	}
	s := &Server{cfg: cfg, store: d.Store, artifacts: d.Artifacts, claims: d.Claims, settlements: d.Settlements, outage: d.Outage,
		reconciler: d.Reconciler, limiter: d.RateLimiter, log: log, manifests: newWireManifests(), closing: make(chan struct{}), metrics: d.Metrics}
	s.webhooks = d.WebhookGroups
	if s.webhooks == nil {
		s.webhooks = store.NewWebhookGroups(d.Store.DB(), nil)
	}
	if err := s.mountMachine(); err != nil {
		return nil, err
	}
	if err := s.mountAdmin(); err != nil {
		return nil, err
	}
	if err := s.mountBusiness(); err != nil {
		return nil, err
	}
	if !cfg.DisableAPIDocs {
		docs, err := renderedAPIDocs()
		if err != nil {
			return nil, err
		}
		s.apiDocs = docs
	}
	return s, nil
}

// validate names every missing dependency (a wiring error).
func (d Deps) validate() error {
	var errs []error
	for _, dep := range []struct {
		name    string
		missing bool
	}{{"Store", d.Store == nil}, {"Artifacts", d.Artifacts == nil}, {"Claims", d.Claims == nil}, {"Settlements", d.Settlements == nil},
		{"Outage", d.Outage == nil}, {"Metrics", d.Metrics == nil}, {"Reconciler", d.Reconciler == nil}} {
		if dep.missing {
			errs = append(errs, fmt.Errorf("http deps: no %s (internal wiring error)", dep.name))
		}
	}
	return errors.Join(errs...)
}

// InternalMuxForTest exposes the machine mux so tests can add a route and
// prove the default-deny middleware covers it.
func (s *Server) InternalMuxForTest() *http.ServeMux { return s.internal }

// StatusWaitsForTest is how many jobs waiting status reads wait on, so
// tests can tell a read has parked without sleeping.
func (s *Server) StatusWaitsForTest() int { return s.settlements.Waiting() }

// ParkedClaimsForTest is how many claims found nothing and now wait to be
// woken, so tests can tell a long-poll has parked without sleeping.
func (s *Server) ParkedClaimsForTest() int64 { return s.parkedClaims.Load() }

// Handler is the root handler: one prefix per surface, each authenticated,
// size-bounded and validated before its handlers run; around all of them the
// request id, metrics and access log (observe.go). /metrics is served here
// unless Config.MetricsElsewhere; the nginx example never forwards it.
func (s *Server) Handler() http.Handler {
	root := http.NewServeMux()
	root.Handle(machinePrefix, s.bounded(s.nodeAuth(s.validated(s.internal, machineSpec, surfaceMachine)), surfaceMachine))
	root.Handle(adminPrefix, s.bounded(s.admin, surfaceAdmin))
	root.Handle(businessPrefix, s.bounded(s.business, surfaceBusiness))
	if s.apiDocs != nil {
		mountAPIDocs(root, s.apiDocs)
	}
	// A node parked in a claim long-poll asks this every second or so to
	// tell a stopped replica from a long wait (docs/node.md, "Timing"). It
	// proves only that this process and its HTTP server answer: no
	// database, no authentication, no log line, nothing it answers but "ok".
	root.HandleFunc("GET "+contracts.LivenessPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte("ok\n"))
	})
	root.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := s.store.DB().PingContext(r.Context()); err != nil {
			writeError(w, r, s.log, &Error{Status: http.StatusServiceUnavailable, Code: codeUnavailable,
				Message: "database unreachable", RetryAfter: 1, cause: store.Classify(err)}, surfaceBusiness)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	if !s.cfg.MetricsElsewhere {
		root.Handle("GET /metrics", s.metrics.Handler())
	}
	if s.extra != nil {
		root.Handle("/", s.extra)
		s.extra.Handle("/", s.unrouted(root))
	} else {
		root.Handle("/", s.unrouted(root))
	}
	return s.observed(s.paced(root))
}

// unrouted answers what no route serves, in JSON like every API error: 405
// METHOD_NOT_ALLOWED (with Allow) when the path is served for other methods,
// else 404 NOT_FOUND.
func (s *Server) unrouted(root *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		allow := allowed(r, func(probe *http.Request) bool { return s.routed(root, probe) })
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, r, s.log, apiErr(http.StatusMethodNotAllowed, codeMethodNotAllowed,
				fmt.Errorf("%s is not served for %s (allowed: %s)", r.URL.Path, r.Method, strings.Join(allow, ", "))), surfaceBusiness)
			return
		}
		writeError(w, r, s.log, apiErr(http.StatusNotFound, codeNotFound, fmt.Errorf("no such path: %s", r.URL.Path)), surfaceBusiness)
	})
}

// allowed lists the other methods for which served(r with that method) holds.
func allowed(r *http.Request, served func(*http.Request) bool) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if m != r.Method && served(probe) {
			out = append(out, m)
		}
	}
	return out
}

// routed reports whether a handler other than the fallback serves r.
func (s *Server) routed(root *http.ServeMux, r *http.Request) bool {
	_, pattern := root.Handler(r)
	if pattern != "/" {
		return pattern != ""
	}
	if s.extra == nil {
		return false
	}
	_, pattern = s.extra.Handler(r)
	return pattern != "" && pattern != "/"
}

// bounded caps request bodies before anything reads them (413 on overflow).
func (s *Server) bounded(next http.Handler, sf surface) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit := s.cfg.MaxBodyBytes
		if sf == surfaceBusiness && r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/api/v1/artifacts/") {
			limit = s.artifacts.MaxArtifactBytes()
		}
		if r.ContentLength > limit {
			writeError(w, r, s.log, apiErr(http.StatusRequestEntityTooLarge, codePayloadTooLarge,
				fmt.Errorf("body of %d bytes is above the limit of %d", r.ContentLength, limit)), sf)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}

type specFunc func() (*openapi3.T, error)

func machineSpec() (*openapi3.T, error) { return machineapi.GetSpec() }

// validated checks requests against the surface's spec before handlers run.
// Authentication is done by our own middleware; the validator only checks
// that a bearer is present where the spec asks for one.
func (s *Server) validated(next http.Handler, spec specFunc, sf surface) http.Handler {
	sw, err := spec()
	if err != nil {
		panic(fmt.Sprintf("embedded spec does not load: %v", err))
	}
	sw.Servers = nil // match paths regardless of host
	return nethttpmiddleware.OapiRequestValidatorWithOptions(sw, &nethttpmiddleware.Options{
		Options: openapi3filter.Options{
			AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
				r := in.RequestValidationInput.Request
				if bearer(r) == "" && tokenFrom(r.Context()).ID == 0 {
					return errors.New("missing bearer token")
				}
				return nil
			},
			MultiError: false,
		},
		Skipper: func(r *http.Request) bool {
			// Artifact uploads are streamed and verified by the handler.
			return r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/api/v1/artifacts/")
		},
		ErrorHandlerWithOpts: func(_ context.Context, err error, w http.ResponseWriter, r *http.Request, opts nethttpmiddleware.ErrorHandlerOpts) {
			status, code := opts.StatusCode, codeRequestInvalid
			var mbe *http.MaxBytesError
			switch {
			case errors.As(err, &mbe):
				status, code = http.StatusRequestEntityTooLarge, codePayloadTooLarge
			case status == http.StatusNotFound:
				code = codeNotFound
				// The validator does not tell an unknown path from a known
				// one with another method; the surface's mux does.
				if mux, ok := next.(*http.ServeMux); ok {
					if allow := allowed(r, func(p *http.Request) bool { _, pat := mux.Handler(p); return pat != "" }); len(allow) > 0 {
						status, code = http.StatusMethodNotAllowed, codeMethodNotAllowed
						w.Header().Set("Allow", strings.Join(allow, ", "))
					}
				}
			case status == http.StatusUnauthorized || status == http.StatusForbidden:
				status, code = http.StatusUnauthorized, codeUnauthenticated
				if sf == surfaceMachine {
					code = codeSessionInvalid
				}
			case status == http.StatusMethodNotAllowed:
				code = codeMethodNotAllowed
			default:
				status = http.StatusBadRequest
			}
			// The validator appends the whole schema; the first line says what is wrong.
			msg, _, _ := strings.Cut(err.Error(), "\nSchema:")
			writeError(w, r, s.log, &Error{Status: status, Code: code, Message: msg, cause: err}, sf)
		},
	})(next)
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}
