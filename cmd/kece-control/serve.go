package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/control/console"
	"github.com/kece-oj/kece/control/forwarded"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/maintenance"
	"github.com/kece-oj/kece/control/metrics"
	"github.com/kece-oj/kece/control/probe"
	"github.com/kece-oj/kece/control/ratelimit"
	"github.com/kece-oj/kece/control/replica"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/control/webhook"
	"github.com/kece-oj/kece/migrations"
	"github.com/kece-oj/kece/telemetry"
)

// DBConnsDefault is the default connection budget of one replica.
const DBConnsDefault = 32

// serveFlags are the settings of `kece-control serve`.
type serveFlags struct {
	fs                                                                                            *settings.FlagSet
	dsn, listen, artDir, logFormat, logLevel, metricsListen, probeHosts, probeCIDRs, probePorts   *string
	trustedProxies, hookURL, hookSecret, hookGroup, hookKey, hookOldKey                           *string
	migrate, apiDocs, probeHTTP, consoleOn                                                        *bool
	maxAttempts, maxUnstarted, conns, hookAttempts, bizBurst                                      *int
	bizRate                                                                                       *float64
	leaseTTL, reap, hb, renew, offline, hbTTL, metricsCache, consoleIdle, consoleMax, hookTimeout *time.Duration
}

func newServeFlags(getenv func(string) string) *serveFlags {
	fs := settings.NewFlagSet("serve", getenv)
	f := &serveFlags{fs: fs}
	f.dsn = dbFlags(fs)
	f.listen = fs.String("listen", "KECE_LISTEN", "127.0.0.1:8080", "address to listen on")
	f.artDir = fs.String("artifact-dir", "KECE_ARTIFACT_DIR", "", "artifact store directory (required)")
	f.migrate = fs.Bool("migrate", "KECE_MIGRATE", false, "apply pending migrations before serving")
	f.leaseTTL = fs.Duration("lease-ttl", "KECE_LEASE_TTL", store.LeaseTTLDefault, "lease duration")
	f.maxAttempts = fs.Int("max-attempts", "KECE_MAX_ATTEMPTS", store.MaxAttemptsDefault, "attempts before a job fails (SYSTEM_ERROR)")
	f.reap = fs.Duration("reap-interval", "KECE_REAP_INTERVAL", store.ReapIntervalDefault, "reaper scan interval")
	f.hb = fs.Duration("heartbeat-interval", "KECE_HEARTBEAT_INTERVAL", httpapi.HeartbeatIntervalDefault, "node heartbeat interval")
	f.renew = fs.Duration("renew-interval", "KECE_RENEW_INTERVAL", httpapi.RenewIntervalDefault, "node renew interval")
	f.offline = fs.Duration("offline-after", "KECE_OFFLINE_AFTER", store.OfflineAfterDefault, "a node without heartbeat this long is offline")
	f.hbTTL = fs.Duration("heartbeat-ttl", "KECE_HEARTBEAT_TTL", store.HeartbeatTTLDefault,
		"a node without heartbeat this long loses its leases (at least 2× the heartbeat interval; keep it well under the lease TTL)")
	f.maxUnstarted = fs.Int("max-unstarted-attempts", "KECE_MAX_UNSTARTED_ATTEMPTS", store.MaxUnstartedAttemptsDefault,
		"leases of one job that may end before judging started (not counted as attempts) before it fails NEVER_STARTED")
	f.conns = fs.Int("db-conns", "KECE_DB_CONNS", DBConnsDefault, "maximum database connections of this replica (at least 4)")
	f.logFormat = fs.String("log-format", "KECE_LOG_FORMAT", telemetry.FormatDefault, "log lines as json (default) or text")
	f.logLevel = fs.String("log-level", "KECE_LOG_LEVEL", "info", "debug, info, warn or error")
	f.metricsListen = fs.String("metrics-listen", "KECE_METRICS_LISTEN", "", "serve /metrics on this separate address instead of --listen (empty: /metrics on --listen)")
	f.metricsCache = fs.Duration("metrics-cache-ttl", "KECE_METRICS_CACHE_TTL", metrics.FleetCacheTTLDefault, "reuse the database-backed gauges (queue depth, nodes, events) for this long between scrapes (0..10m)")
	f.apiDocs = fs.Bool("api-docs", "KECE_API_DOCS", true, "serve the OpenAPI specs under /openapi/ and their docs page at /docs/")
	f.probeHosts = fs.String("probe-allow-hosts", "KECE_PROBE_ALLOW_HOSTS", "", "node addresses may name these hosts (comma list, *.suffix allowed)")
	f.probeCIDRs = fs.String("probe-allow-cidrs", "KECE_PROBE_ALLOW_CIDRS", "", "probes may connect only to these networks (comma list); empty: probing is off")
	f.probeHTTP = fs.Bool("probe-allow-http", "KECE_PROBE_ALLOW_HTTP", false, "allow plain http:// node addresses for probes (only for a private judge network; the allowlists still apply)")
	f.probePorts = fs.String("probe-allow-ports", "KECE_PROBE_ALLOW_PORTS", "9464", "probes may connect only to these ports")
	f.consoleOn = fs.Bool("console", "KECE_CONSOLE", true, "serve the admin console under /console/ and the public status page at /status")
	f.consoleIdle = fs.Duration("console-session-idle", "KECE_CONSOLE_SESSION_IDLE", console.SessionIdleDefault, "a console session ends after this long without a request")
	f.consoleMax = fs.Duration("console-session-max", "KECE_CONSOLE_SESSION_MAX", console.SessionMaxDefault, "a console session ends this long after login")
	f.trustedProxies = fs.String("trusted-proxies", "KECE_TRUSTED_PROXIES", "", "reverse proxies (addresses or CIDRs, comma list) whose X-Forwarded-Proto/-For are believed (Secure console cookie, caller address in audit rows); empty: none")
	f.hookURL = fs.String("webhook-url", "KECE_WEBHOOK_URL", "", "deliver settlement events to this URL, signed; empty: consumers pull them")
	f.hookSecret = webhookSecretFlags(fs)
	f.hookTimeout = fs.Duration("webhook-timeout", "KECE_WEBHOOK_TIMEOUT", webhook.TimeoutDefault, "bound on one webhook delivery")
	f.hookAttempts = fs.Int("webhook-max-attempts", "KECE_WEBHOOK_MAX_ATTEMPTS", webhook.MaxAttemptsDefault, "failed deliveries before an event is dead")
	f.hookGroup = fs.String("webhook-group", "KECE_WEBHOOK_GROUP", store.DefaultConsumerGroup,
		"deprecated (webhooks per group: kecectl webhook set): the consumer group KECE_WEBHOOK_URL delivers")
	f.hookKey, f.hookOldKey = webhookKeyFlags(fs)
	f.bizRate = fs.Float("business-rate", "KECE_BUSINESS_RATE", ratelimit.RateDefault,
		"requests per second of a business token without a limit of its own, per replica (0: unlimited)")
	f.bizBurst = fs.Int("business-burst", "KECE_BUSINESS_BURST", ratelimit.BurstDefault,
		"requests a business token without a limit of its own may make at once (0 with --business-rate 0)")
	return f
}

// serveConfig is what the settings describe, checked before anything
// connects.
type serveConfig struct {
	log     telemetry.LogConfig
	console console.Config
	replica replica.Config
	http    httpapi.Config
	limit   ratelimit.Limit
}

func serveCommand(cio cmdIO) *cobra.Command {
	f := newServeFlags(cio.getenv)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the control plane: HTTP APIs, console, reaper and webhook sender",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().AddFlagSet(f.fs.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		// Every bad setting at once: the command line's and the
		// variables' values, then the checks of what they describe.
		cfg, err := f.check(f.fs.Apply())
		if err != nil {
			return err
		}
		return serve(cmd.Context(), f, cfg, cio)
	}
	return cmd
}

// check turns the applied settings into the configuration, reporting
// every bad setting at once (prior: the ones found while applying them).
func (f *serveFlags) check(prior error) (serveConfig, error) {
	errs := []error{prior}
	if *f.artDir == "" {
		errs = append(errs, settings.Errorf("KECE_ARTIFACT_DIR", "no artifact directory: set KECE_ARTIFACT_DIR or --artifact-dir to a writable directory"))
	}
	if _, _, err := net.SplitHostPort(*f.listen); err != nil {
		errs = append(errs, settings.Errorf(f.fs.Source("listen"), "%q is not host:port (e.g. 127.0.0.1:8080)", *f.listen))
	}
	if *f.metricsListen != "" {
		if _, _, err := net.SplitHostPort(*f.metricsListen); err != nil {
			errs = append(errs, settings.Errorf(f.fs.Source("metrics-listen"), "%q is not host:port (e.g. 127.0.0.1:9465)", *f.metricsListen))
		}
	}
	if err := (telemetry.LogConfig{Format: *f.logFormat, Level: *f.logLevel}).Validate(); err != nil {
		errs = append(errs, settings.Errorf(f.fs.Source("log-format")+"/"+f.fs.Source("log-level"), "%v", err))
	}
	metricsCfg := metrics.Config{FleetCacheTTL: *f.metricsCache}
	if err := metricsCfg.Validate(); err != nil {
		errs = append(errs, settings.Errorf(f.fs.Source("metrics-cache-ttl"), "%v", err))
	}
	if *f.leaseTTL < 2**f.renew {
		errs = append(errs, settings.Errorf(f.fs.Source("lease-ttl"), "%s must be at least twice %s %s (3x recommended), or healthy nodes lose their leases",
			*f.leaseTTL, f.fs.Source("renew-interval"), *f.renew))
	}
	if *f.conns < 4 {
		errs = append(errs, settings.Errorf(f.fs.Source("db-conns"), "%d is too few (at least 4)", *f.conns))
	}
	cidrs, err := probe.ParseCIDRs(*f.probeCIDRs)
	if err != nil {
		errs = append(errs, settings.Errorf(f.fs.Source("probe-allow-cidrs"), "%v", err))
	}
	ports, err := probe.ParsePorts(*f.probePorts)
	if err != nil {
		errs = append(errs, settings.Errorf(f.fs.Source("probe-allow-ports"), "%v", err))
	}
	var hosts []string
	for _, h := range strings.Split(*f.probeHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	probeCfg := probe.Config{AllowedHosts: hosts, AllowedCIDRs: cidrs, AllowedPorts: ports, AllowHTTP: *f.probeHTTP}
	hookCfg, err := f.hookConfig()
	errs = append(errs, err)
	keys, err := webhookKeyring(f.fs, *f.hookKey, *f.hookOldKey)
	errs = append(errs, err)
	limit := ratelimit.Limit{Rate: *f.bizRate, Burst: *f.bizBurst}
	errs = append(errs, f.checkLimit(limit))
	// The store and HTTP layer validate the rest when they are built; these
	// are checked here so they are named by their flag.
	if *f.maxAttempts < 1 || *f.maxAttempts > 100 {
		errs = append(errs, settings.Errorf(f.fs.Source("max-attempts"), "%d must be 1..100", *f.maxAttempts))
	}
	if *f.offline < time.Second {
		errs = append(errs, settings.Errorf(f.fs.Source("offline-after"), "%s is below 1s", *f.offline))
	}
	if *f.hbTTL < time.Second || *f.hbTTL < 2**f.hb {
		errs = append(errs, settings.Errorf(f.fs.Source("heartbeat-ttl"), "%s must be at least 1s and at least twice the heartbeat interval (%s)", *f.hbTTL, *f.hb))
	}
	if *f.maxUnstarted < 1 || *f.maxUnstarted > 100 {
		errs = append(errs, settings.Errorf(f.fs.Source("max-unstarted-attempts"), "%d must be 1..100", *f.maxUnstarted))
	}
	proxies, err := forwarded.Parse(*f.trustedProxies)
	if err != nil {
		errs = append(errs, settings.Errorf(f.fs.Source("trusted-proxies"), "%v (want addresses or CIDRs, e.g. 127.0.0.1,10.0.0.0/8)", err))
	}
	consoleCfg := console.Config{SessionIdle: *f.consoleIdle, SessionMax: *f.consoleMax, TrustedProxies: proxies}
	if err := consoleCfg.Validate(); err != nil {
		errs = append(errs, settings.Errorf(f.fs.Source("console-session-idle")+"/"+f.fs.Source("console-session-max"), "%v", err))
	}
	storeCfg := store.Config{LeaseTTL: *f.leaseTTL, MaxAttempts: *f.maxAttempts, OfflineAfter: *f.offline, HeartbeatTTL: *f.hbTTL,
		MaxUnstartedAttempts: *f.maxUnstarted}
	replicaCfg := replica.Config{Store: storeCfg, Maintenance: maintenance.Config{ReapInterval: *f.reap}, Metrics: metricsCfg, Webhook: hookCfg,
		WebhookKeys: keys}
	httpCfg := httpapi.Config{HeartbeatInterval: *f.hb, RenewInterval: *f.renew, Probe: probeCfg, DisableAPIDocs: !*f.apiDocs,
		TrustedProxies: proxies}
	// The rest of the replica's (store, maintenance) and the HTTP layer's
	// settings are checked now too (with their defaults), not after the
	// database connects; when a flag above is already refused, they would
	// only repeat it.
	if errors.Join(errs[1:]...) == nil {
		if err := replicaCfg.WithDefaults().Validate(); err != nil {
			errs = append(errs, settings.Errorf("replica settings", "%v", err))
		}
		if err := httpCfg.WithDefaults().Validate(); err != nil {
			errs = append(errs, settings.Errorf("http settings", "%v", err))
		}
	}
	cfg := serveConfig{log: telemetry.LogConfig{Format: *f.logFormat, Level: *f.logLevel}, console: consoleCfg,
		replica: replicaCfg, http: httpCfg, limit: limit}
	cfg.replica.RateLimit = &ratelimit.Config{Default: limit}
	return cfg, errors.Join(errs...)
}

// checkLimit names the flag of each problem of the default rate limit.
func (f *serveFlags) checkLimit(l ratelimit.Limit) error {
	var errs []error
	for _, e := range unjoin(l.Validate()) {
		var fe *ratelimit.FieldError
		if errors.As(e, &fe) {
			errs = append(errs, settings.Errorf(f.fs.Source("business-"+fe.Field), "%s", fe.Msg))
		}
	}
	return errors.Join(errs...)
}

// unjoin lists the errors of an errors.Join (nil: none).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err != nil {
		return []error{err}
	}
	return nil
}

// hookConfig is the webhook sender's configuration; nil when no URL is set.
func (f *serveFlags) hookConfig() (*webhook.Config, error) {
	if *f.hookURL == "" {
		return nil, nil
	}
	var errs []error
	var hookCfg *webhook.Config
	if *f.hookSecret == "" {
		errs = append(errs, settings.Errorf(f.fs.Source("webhook-url"), "needs a signing secret: set KECE_WEBHOOK_SECRET_FILE or --webhook-secret-file (kece-control webhook-secret new writes one)"))
	} else if secrets, err := parseWebhookSecrets(f.fs, *f.hookSecret); err != nil {
		errs = append(errs, err)
	} else {
		hookCfg = &webhook.Config{URL: *f.hookURL, Secrets: secrets, Timeout: *f.hookTimeout, MaxAttempts: *f.hookAttempts, Group: *f.hookGroup}
		if !store.ValidConsumerGroup(*f.hookGroup) {
			errs = append(errs, settings.Errorf(f.fs.Source("webhook-group"), "%q is not a consumer group name (lowercase letters, digits, . _ -)", *f.hookGroup))
		} else if err := hookCfg.Validate(); err != nil {
			errs = append(errs, settings.Errorf(f.fs.Source("webhook-url"), "%v", err))
		}
	}

	return hookCfg, errors.Join(errs...)
}

// serve runs the control plane until ctx ends or a part of it fails.
func serve(ctx context.Context, f *serveFlags, cfg serveConfig, cio cmdIO) error {
	log, err := telemetry.NewLogger(cio.stderr, cfg.log)
	if err != nil {
		return settings.Errorf(f.fs.Source("log-format"), "%v", err)
	}
	replicaCfg, consoleCfg, httpCfg := cfg.replica, cfg.console, cfg.http
	replicaCfg.Metrics.Logger = log

	arts, db, err := f.openStores(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	// The replica is the application (store, long-poll, maintenance,
	// outage tracker, metrics, webhook sender); the HTTP server serves it.
	rep, err := replica.New(replicaCfg, db, arts, log)
	if err != nil {
		return settings.Errorf("replica settings", "%v", err)
	}
	httpCfg.MetricsElsewhere = *f.metricsListen != ""
	srv, err := httpapi.New(httpCfg, rep.HTTPDeps(), log)
	if err != nil {
		return settings.Errorf("http settings", "%v", err)
	}
	if replicaCfg.Webhook != nil {
		log.Warn("KECE_WEBHOOK_URL is deprecated: give the consumer group a webhook of its own (kecectl webhook set); it becomes an implicit group until then",
			"consumer_group", replicaCfg.Webhook.Group)
	}
	if *f.consoleOn {
		// The console acts through this replica's API handler, in process.
		con, err := console.New(consoleCfg, rep.Store(), srv.Handler(), log)
		if err != nil {
			return settings.Errorf("console settings", "%v", err)
		}
		srv.Mount(console.Prefix, con.Handler())
		srv.Mount(console.StatusPath, con.Handler())
	}
	ln, err := net.Listen("tcp", *f.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := httpapi.NewHTTPServer(srv.Handler())
	// The process is a group of goroutines that run until a signal ends ctx
	// or one of them fails; either way the group's context ends and the
	// shutdown goroutine stops the rest in order: long-polls, then the HTTP
	// servers (in-flight requests finish), then the background work.
	g, gctx := errgroup.WithContext(ctx)
	// Background work (reaper, purge, webhook sender) outlives gctx until
	// the HTTP server has drained, so in-flight requests still see it.
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	var ms *http.Server
	if *f.metricsListen != "" {
		mln, err := net.Listen("tcp", *f.metricsListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("metrics listen: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", rep.Metrics().Handler())
		ms = httpapi.NewHTTPServer(mux)
		g.Go(func() error { return serveHTTP("metrics server", ms, mln) })
		log.Info("metrics on a separate listener", "metrics_listen", mln.Addr().String())
	}
	g.Go(func() error { return rep.Run(runCtx) })
	g.Go(func() error { return serveHTTP("http server", hs, ln) })
	g.Go(func() error {
		<-gctx.Done()
		if ctx.Err() != nil {
			log.Info("shutting down")
		}
		// Long-polls end with an empty answer; nodes simply poll again elsewhere.
		srv.StopLongPolls()
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err := hs.Shutdown(sctx)
		if ms != nil {
			_ = ms.Close()
		}
		stopRun()
		return err
	})
	log.Info("kece-control serving", "listen", ln.Addr().String(), "lease_ttl", *f.leaseTTL, "reap_interval", *f.reap,
		"business_rate_limit", cfg.limit.String())
	return g.Wait()
}

// openStores opens the artifact store and the serving database handle,
// applying migrations first when asked.
func (f *serveFlags) openStores(ctx context.Context) (*artifact.Store, *sql.DB, error) {
	// The artifact directory is a setting: checked before the database, so
	// a bad one is exit 2 even while the database is down (which is exit 1,
	// retried by systemd).
	arts, err := artifact.OpenStore(ctx, artifact.StoreConfig{Root: *f.artDir})
	if err != nil {
		return nil, nil, settings.Errorf(f.fs.Source("artifact-dir"), "%v", err)
	}
	if *f.migrate {
		// On connections of their own with the offline bounds: a migration
		// may run longer than a serving statement may.
		mdb, err := openDB(ctx, f.fs, *f.dsn, 2)
		if err != nil {
			return nil, nil, err
		}
		err = migrations.UpLocked(ctx, mdb)
		mdb.Close()
		if err != nil {
			return nil, nil, err
		}
	}
	db, err := openDBWith(ctx, f.fs, *f.dsn, *f.conns, serveLimits)
	if err != nil {
		return nil, nil, err
	}
	return arts, db, nil
}

// serveHTTP serves until the server is shut down (no error) or fails.
func serveHTTP(what string, hs *http.Server, ln net.Listener) error {
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
