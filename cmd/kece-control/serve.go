package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/control/console"
	"github.com/kece-oj/kece/control/forwarded"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/metrics"
	"github.com/kece-oj/kece/control/probe"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/control/webhook"
	"github.com/kece-oj/kece/migrations"
	"github.com/kece-oj/kece/telemetry"
)

// DBConnsDefault is the default connection budget of one replica.
const DBConnsDefault = 32

func serve(ctx context.Context, args []string, cio cmdIO) error {
	fs := settings.NewFlagSet("serve", cio.getenv)
	fs.SetOutput(cio.stdout)
	dsn := dbFlags(fs)
	listen := fs.String("listen", "KECE_LISTEN", "127.0.0.1:8080", "address to listen on")
	artDir := fs.String("artifact-dir", "KECE_ARTIFACT_DIR", "", "artifact store directory (required)")
	migrate := fs.Bool("migrate", "KECE_MIGRATE", false, "apply pending migrations before serving")
	leaseTTL := fs.Duration("lease-ttl", "KECE_LEASE_TTL", store.LeaseTTLDefault, "lease duration")
	maxAttempts := fs.Int("max-attempts", "KECE_MAX_ATTEMPTS", store.MaxAttemptsDefault, "attempts before a job fails (SYSTEM_ERROR)")
	reap := fs.Duration("reap-interval", "KECE_REAP_INTERVAL", httpapi.ReapIntervalDefault, "reaper scan interval")
	hb := fs.Duration("heartbeat-interval", "KECE_HEARTBEAT_INTERVAL", httpapi.HeartbeatIntervalDefault, "node heartbeat interval")
	renew := fs.Duration("renew-interval", "KECE_RENEW_INTERVAL", httpapi.RenewIntervalDefault, "node renew interval")
	offline := fs.Duration("offline-after", "KECE_OFFLINE_AFTER", store.OfflineAfterDefault, "a node without heartbeat this long is offline")
	hbTTL := fs.Duration("heartbeat-ttl", "KECE_HEARTBEAT_TTL", store.HeartbeatTTLDefault,
		"a node without heartbeat this long loses its leases (at least 2× the heartbeat interval; keep it well under the lease TTL)")
	maxUnstarted := fs.Int("max-unstarted-attempts", "KECE_MAX_UNSTARTED_ATTEMPTS", store.MaxUnstartedAttemptsDefault,
		"leases of one job that may end before judging started (not counted as attempts) before it fails NEVER_STARTED")
	conns := fs.Int("db-conns", "KECE_DB_CONNS", DBConnsDefault, "maximum database connections of this replica (at least 4)")
	logFormat := fs.String("log-format", "KECE_LOG_FORMAT", telemetry.FormatDefault, "log lines as json (default) or text")
	logLevel := fs.String("log-level", "KECE_LOG_LEVEL", "info", "debug, info, warn or error")
	metricsListen := fs.String("metrics-listen", "KECE_METRICS_LISTEN", "", "serve /metrics on this separate address instead of --listen (empty: /metrics on --listen)")
	metricsCache := fs.Duration("metrics-cache-ttl", "KECE_METRICS_CACHE_TTL", metrics.FleetCacheTTLDefault, "reuse the database-backed gauges (queue depth, nodes, events) for this long between scrapes (0..10m)")
	apiDocs := fs.Bool("api-docs", "KECE_API_DOCS", true, "serve the OpenAPI specs under /openapi/ and their docs page at /docs/")
	probeHosts := fs.String("probe-allow-hosts", "KECE_PROBE_ALLOW_HOSTS", "", "node addresses may name these hosts (comma list, *.suffix allowed)")
	probeCIDRs := fs.String("probe-allow-cidrs", "KECE_PROBE_ALLOW_CIDRS", "", "probes may connect only to these networks (comma list); empty: probing is off")
	probeHTTP := fs.Bool("probe-allow-http", "KECE_PROBE_ALLOW_HTTP", false, "allow plain http:// node addresses for probes (only for a private judge network; the allowlists still apply)")
	probePorts := fs.String("probe-allow-ports", "KECE_PROBE_ALLOW_PORTS", "9464", "probes may connect only to these ports")
	consoleOn := fs.Bool("console", "KECE_CONSOLE", true, "serve the admin console under /console/ and the public status page at /status")
	consoleIdle := fs.Duration("console-session-idle", "KECE_CONSOLE_SESSION_IDLE", console.SessionIdleDefault, "a console session ends after this long without a request")
	consoleMax := fs.Duration("console-session-max", "KECE_CONSOLE_SESSION_MAX", console.SessionMaxDefault, "a console session ends this long after login")
	trustedProxies := fs.String("trusted-proxies", "KECE_TRUSTED_PROXIES", "", "reverse proxies (addresses or CIDRs, comma list) whose X-Forwarded-Proto/-For are believed (Secure console cookie, caller address in audit rows); empty: none")
	hookURL := fs.String("webhook-url", "KECE_WEBHOOK_URL", "", "deliver settlement events to this URL, signed; empty: consumers pull them")
	hookSecret := webhookSecretFlags(fs)
	hookTimeout := fs.Duration("webhook-timeout", "KECE_WEBHOOK_TIMEOUT", webhook.TimeoutDefault, "bound on one webhook delivery")
	hookAttempts := fs.Int("webhook-max-attempts", "KECE_WEBHOOK_MAX_ATTEMPTS", webhook.MaxAttemptsDefault, "failed deliveries before an event is dead")
	hookGroup := fs.String("webhook-group", "KECE_WEBHOOK_GROUP", store.DefaultConsumerGroup, "the consumer group whose settlement events the webhook delivers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	var errs []error
	if *artDir == "" {
		errs = append(errs, settings.Errorf("KECE_ARTIFACT_DIR", "no artifact directory: set KECE_ARTIFACT_DIR or --artifact-dir to a writable directory"))
	}
	if _, _, err := net.SplitHostPort(*listen); err != nil {
		errs = append(errs, settings.Errorf(fs.Source("listen"), "%q is not host:port (e.g. 127.0.0.1:8080)", *listen))
	}
	if *metricsListen != "" {
		if _, _, err := net.SplitHostPort(*metricsListen); err != nil {
			errs = append(errs, settings.Errorf(fs.Source("metrics-listen"), "%q is not host:port (e.g. 127.0.0.1:9465)", *metricsListen))
		}
	}
	if err := (telemetry.LogConfig{Format: *logFormat, Level: *logLevel}).Validate(); err != nil {
		errs = append(errs, settings.Errorf(fs.Source("log-format")+"/"+fs.Source("log-level"), "%v", err))
	}
	metricsCfg := metrics.Config{FleetCacheTTL: *metricsCache}
	if err := metricsCfg.Validate(); err != nil {
		errs = append(errs, settings.Errorf(fs.Source("metrics-cache-ttl"), "%v", err))
	}
	if *leaseTTL < 2**renew {
		errs = append(errs, settings.Errorf(fs.Source("lease-ttl"), "%s must be at least twice %s %s (3x recommended), or healthy nodes lose their leases",
			*leaseTTL, fs.Source("renew-interval"), *renew))
	}
	if *conns < 4 {
		errs = append(errs, settings.Errorf(fs.Source("db-conns"), "%d is too few (at least 4)", *conns))
	}
	cidrs, err := probe.ParseCIDRs(*probeCIDRs)
	if err != nil {
		errs = append(errs, settings.Errorf(fs.Source("probe-allow-cidrs"), "%v", err))
	}
	ports, err := probe.ParsePorts(*probePorts)
	if err != nil {
		errs = append(errs, settings.Errorf(fs.Source("probe-allow-ports"), "%v", err))
	}
	var hosts []string
	for _, h := range strings.Split(*probeHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	probeCfg := probe.Config{AllowedHosts: hosts, AllowedCIDRs: cidrs, AllowedPorts: ports, AllowHTTP: *probeHTTP}
	var hookCfg *webhook.Config
	if *hookURL != "" {
		if *hookSecret == "" {
			errs = append(errs, settings.Errorf(fs.Source("webhook-url"), "needs a signing secret: set KECE_WEBHOOK_SECRET_FILE or --webhook-secret-file (kece-control webhook-secret new writes one)"))
		} else if secrets, err := parseWebhookSecrets(fs, *hookSecret); err != nil {
			errs = append(errs, err)
		} else {
			hookCfg = &webhook.Config{URL: *hookURL, Secrets: secrets, Timeout: *hookTimeout, MaxAttempts: *hookAttempts, Group: *hookGroup}
			if !store.ValidConsumerGroup(*hookGroup) {
				errs = append(errs, settings.Errorf(fs.Source("webhook-group"), "%q is not a consumer group name (lowercase letters, digits, . _ -)", *hookGroup))
			} else if err := hookCfg.Validate(); err != nil {
				errs = append(errs, settings.Errorf(fs.Source("webhook-url"), "%v", err))
			}
		}
	}
	// The store and HTTP layer validate the rest when they are built; these
	// are checked here so they are named by their flag.
	if *maxAttempts < 1 || *maxAttempts > 100 {
		errs = append(errs, settings.Errorf(fs.Source("max-attempts"), "%d must be 1..100", *maxAttempts))
	}
	if *offline < time.Second {
		errs = append(errs, settings.Errorf(fs.Source("offline-after"), "%s is below 1s", *offline))
	}
	if *hbTTL < time.Second || *hbTTL < 2**hb {
		errs = append(errs, settings.Errorf(fs.Source("heartbeat-ttl"), "%s must be at least 1s and at least twice the heartbeat interval (%s)", *hbTTL, *hb))
	}
	if *maxUnstarted < 1 || *maxUnstarted > 100 {
		errs = append(errs, settings.Errorf(fs.Source("max-unstarted-attempts"), "%d must be 1..100", *maxUnstarted))
	}
	proxies, err := forwarded.Parse(*trustedProxies)
	if err != nil {
		errs = append(errs, settings.Errorf(fs.Source("trusted-proxies"), "%v (want addresses or CIDRs, e.g. 127.0.0.1,10.0.0.0/8)", err))
	}
	consoleCfg := console.Config{SessionIdle: *consoleIdle, SessionMax: *consoleMax, TrustedProxies: proxies}
	if err := consoleCfg.Validate(); err != nil {
		errs = append(errs, settings.Errorf(fs.Source("console-session-idle")+"/"+fs.Source("console-session-max"), "%v", err))
	}
	storeCfg := store.Config{LeaseTTL: *leaseTTL, MaxAttempts: *maxAttempts, OfflineAfter: *offline, HeartbeatTTL: *hbTTL,
		MaxUnstartedAttempts: *maxUnstarted}
	httpCfg := httpapi.Config{ReapInterval: *reap, HeartbeatInterval: *hb, RenewInterval: *renew, Probe: probeCfg, DisableAPIDocs: !*apiDocs,
		TrustedProxies: proxies}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	log, err := telemetry.NewLogger(cio.stderr, telemetry.LogConfig{Format: *logFormat, Level: *logLevel})
	if err != nil {
		return settings.Errorf(fs.Source("log-format"), "%v", err)
	}
	metricsCfg.Logger = log

	if *migrate {
		// On connections of their own with the offline bounds: a migration
		// may run longer than a serving statement may.
		mdb, err := openDB(ctx, fs, *dsn, 2)
		if err != nil {
			return err
		}
		err = migrations.UpLocked(ctx, mdb)
		mdb.Close()
		if err != nil {
			return err
		}
	}
	db, err := openDBWith(ctx, fs, *dsn, *conns, serveLimits)
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := store.New(db, storeCfg)
	if err != nil {
		return settings.Errorf("store settings", "%v", err)
	}
	arts, err := artifact.OpenStore(ctx, artifact.StoreConfig{Root: *artDir})
	if err != nil {
		return settings.Errorf(fs.Source("artifact-dir"), "%v", err)
	}
	mets := metrics.New(telemetry.NewRegistry("control"), st, metricsCfg)
	httpCfg.Metrics, httpCfg.MetricsElsewhere = mets, *metricsListen != ""
	srv, err := httpapi.New(httpCfg, st, arts, log)
	if err != nil {
		return settings.Errorf("http settings", "%v", err)
	}
	var sender *webhook.Sender
	if hookCfg != nil {
		hookCfg.Observer, hookCfg.Outage = mets, srv.Outage()
		if sender, err = webhook.New(*hookCfg, srv.Store(), log); err != nil {
			return settings.Errorf(fs.Source("webhook-url"), "%v", err)
		}
	}
	if *consoleOn {
		// The console acts through this replica's API handler, in process.
		con, err := console.New(consoleCfg, srv.Store(), srv.Handler(), log)
		if err != nil {
			return settings.Errorf("console settings", "%v", err)
		}
		srv.Mount(console.Prefix, con.Handler())
		srv.Mount(console.StatusPath, con.Handler())
	}
	ln, err := net.Listen("tcp", *listen)
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
	if *metricsListen != "" {
		mln, err := net.Listen("tcp", *metricsListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("metrics listen: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", mets.Handler())
		ms = httpapi.NewHTTPServer(mux)
		g.Go(func() error { return serveHTTP("metrics server", ms, mln) })
		log.Info("metrics on a separate listener", "metrics_listen", mln.Addr().String())
	}
	g.Go(func() error { srv.Run(runCtx); return nil })
	if sender != nil {
		g.Go(func() error { sender.Run(runCtx); return nil })
	}
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
	log.Info("kece-control serving", "listen", ln.Addr().String(), "lease_ttl", *leaseTTL, "reap_interval", *reap)
	return g.Wait()
}

// serveHTTP serves until the server is shut down (no error) or fails.
func serveHTTP(what string, hs *http.Server, ln net.Listener) error {
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
