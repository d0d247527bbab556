package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/metrics"
	"github.com/kece-oj/kece/control/probe"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/control/webhook"
	"github.com/kece-oj/kece/migrations"
	"github.com/kece-oj/kece/telemetry"
)

// envReader reads flag defaults from the environment and remembers values
// that do not parse, so a typo refuses to start instead of falling back to a
// default.
type envReader struct{ errs []string }

// duration returns the parsed value of name, or def when it is unset.
func (e *envReader) duration(name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		e.errs = append(e.errs, fmt.Sprintf("%s=%q is not a duration such as 60s or 5m", name, v))
		return def
	}
	return d
}

// err reports every environment value that did not parse.
func (e *envReader) err() error {
	if len(e.errs) == 0 {
		return nil
	}
	return usagef("%s", strings.Join(e.errs, "; "))
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var env envReader
	dsn := dsnFlag(fs)
	listen := fs.String("listen", envOr("KECE_LISTEN", "127.0.0.1:8080"), "address to listen on (env KECE_LISTEN)")
	artDir := fs.String("artifact-dir", os.Getenv("KECE_ARTIFACT_DIR"), "artifact store directory (env KECE_ARTIFACT_DIR)")
	migrate := fs.Bool("migrate", os.Getenv("KECE_MIGRATE") == "1", "apply pending migrations before serving (env KECE_MIGRATE=1)")
	leaseTTL := fs.Duration("lease-ttl", env.duration("KECE_LEASE_TTL", store.LeaseTTLDefault), "lease duration (env KECE_LEASE_TTL)")
	maxAttempts := fs.Int("max-attempts", store.MaxAttemptsDefault, "attempts before a job fails")
	reap := fs.Duration("reap-interval", env.duration("KECE_REAP_INTERVAL", httpapi.ReapIntervalDefault), "reaper scan interval (env KECE_REAP_INTERVAL)")
	hb := fs.Duration("heartbeat-interval", env.duration("KECE_HEARTBEAT_INTERVAL", httpapi.HeartbeatIntervalDefault), "node heartbeat interval")
	renew := fs.Duration("renew-interval", env.duration("KECE_RENEW_INTERVAL", httpapi.RenewIntervalDefault), "node renew interval")
	offline := fs.Duration("offline-after", store.OfflineAfterDefault, "a node without heartbeat this long is offline")
	conns := fs.Int("db-conns", 32, "maximum database connections")
	logFormat := fs.String("log-format", envOr("KECE_LOG_FORMAT", telemetry.FormatDefault), "log lines as json (default) or text (env KECE_LOG_FORMAT)")
	logLevel := fs.String("log-level", envOr("KECE_LOG_LEVEL", "info"), "debug, info, warn or error (env KECE_LOG_LEVEL)")
	metricsCache := fs.Duration("metrics-cache-ttl", env.duration("KECE_METRICS_CACHE_TTL", metrics.FleetCacheTTLDefault), "reuse the database-backed gauges (queue depth, nodes, events) for this long between scrapes (env KECE_METRICS_CACHE_TTL)")
	metricsListen := fs.String("metrics-listen", os.Getenv("KECE_METRICS_LISTEN"), "serve /metrics on this separate address instead of --listen (env KECE_METRICS_LISTEN; empty: /metrics on --listen)")
	probeHosts := fs.String("probe-allow-hosts", os.Getenv("KECE_PROBE_ALLOW_HOSTS"), "node addresses may name these hosts (comma list, *.suffix allowed; env KECE_PROBE_ALLOW_HOSTS)")
	probeCIDRs := fs.String("probe-allow-cidrs", os.Getenv("KECE_PROBE_ALLOW_CIDRS"), "probes may connect only to these networks (comma list; env KECE_PROBE_ALLOW_CIDRS); empty: probing is off")
	probeHTTP := fs.Bool("probe-allow-http", os.Getenv("KECE_PROBE_ALLOW_HTTP") == "1", "allow plain http:// node addresses for probes (env KECE_PROBE_ALLOW_HTTP=1; only for a private judge network, the allowlists still apply)")
	probePorts := fs.String("probe-allow-ports", envOr("KECE_PROBE_ALLOW_PORTS", "9464"), "probes may connect only to these ports (env KECE_PROBE_ALLOW_PORTS)")
	hookURL := fs.String("webhook-url", os.Getenv("KECE_WEBHOOK_URL"), "deliver settlement events to this URL, signed (env KECE_WEBHOOK_URL); empty: consumers pull them")
	hookSecret := fs.String("webhook-secret-file", os.Getenv("KECE_WEBHOOK_SECRET_FILE"), "file holding the webhook HMAC secret (env KECE_WEBHOOK_SECRET_FILE)")
	hookTimeout := fs.Duration("webhook-timeout", env.duration("KECE_WEBHOOK_TIMEOUT", webhook.TimeoutDefault), "bound on one webhook delivery (env KECE_WEBHOOK_TIMEOUT)")
	hookAttempts := fs.Int("webhook-max-attempts", webhook.MaxAttemptsDefault, "failed deliveries before an event is dead")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := env.err(); err != nil {
		return err
	}
	if *artDir == "" {
		return usagef("no artifact directory: set KECE_ARTIFACT_DIR or --artifact-dir to a writable directory")
	}
	if _, _, err := net.SplitHostPort(*listen); err != nil {
		return usagef("--listen %q is not host:port (e.g. 127.0.0.1:8080)", *listen)
	}
	if *metricsListen != "" {
		if _, _, err := net.SplitHostPort(*metricsListen); err != nil {
			return usagef("--metrics-listen %q is not host:port (e.g. 127.0.0.1:9465)", *metricsListen)
		}
	}
	if *leaseTTL < 2**renew {
		return usagef("--lease-ttl %s must be at least twice --renew-interval %s (3x recommended), or healthy nodes lose their leases", *leaseTTL, *renew)
	}
	if *conns < 4 {
		return usagef("--db-conns %d is too few (at least 4)", *conns)
	}
	cidrs, err := probe.ParseCIDRs(*probeCIDRs)
	if err != nil {
		return usagef("--probe-allow-cidrs: %v", err)
	}
	ports, err := probe.ParsePorts(*probePorts)
	if err != nil {
		return usagef("--probe-allow-ports: %v", err)
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
			return usagef("--webhook-url needs --webhook-secret-file (env KECE_WEBHOOK_SECRET_FILE) with the HMAC secret")
		}
		secret, err := webhook.ReadSecretFile(*hookSecret)
		if err != nil {
			return usagef("webhook secret: %v", err)
		}
		hookCfg = &webhook.Config{URL: *hookURL, Secret: secret, Timeout: *hookTimeout, MaxAttempts: *hookAttempts}
	}
	log, err := telemetry.NewLogger(stderr, telemetry.LogConfig{Format: *logFormat, Level: *logLevel})
	if err != nil {
		return usagef("--log-format/--log-level: %v", err)
	}
	mcfg := metrics.Config{Logger: log, FleetCacheTTL: *metricsCache}
	if err := mcfg.Validate(); err != nil {
		return usagef("--metrics-cache-ttl: %v", err)
	}

	db, err := openDB(ctx, *dsn, *conns)
	if err != nil {
		return err
	}
	defer db.Close()
	if *migrate {
		if err := migrations.UpLocked(ctx, db); err != nil {
			return err
		}
	}
	st, err := store.New(db, store.Config{LeaseTTL: *leaseTTL, MaxAttempts: *maxAttempts, OfflineAfter: *offline})
	if err != nil {
		return usagef("%v", err)
	}
	arts, err := artifact.OpenStore(ctx, artifact.StoreConfig{Root: *artDir})
	if err != nil {
		return usagef("artifact directory: %v", err)
	}
	mets := metrics.New(telemetry.NewRegistry("control"), st, mcfg)
	srv, err := httpapi.New(httpapi.Config{ReapInterval: *reap, HeartbeatInterval: *hb, RenewInterval: *renew, Probe: probeCfg,
		Metrics: mets, MetricsElsewhere: *metricsListen != ""}, st, arts, log)
	if err != nil {
		return usagef("%v", err)
	}
	var sender *webhook.Sender
	if hookCfg != nil {
		hookCfg.Observer = mets
		if sender, err = webhook.New(*hookCfg, srv.Store(), log); err != nil {
			return usagef("webhook: %v", err)
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	if *metricsListen != "" {
		mln, err := net.Listen("tcp", *metricsListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("metrics listen: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", mets.Handler())
		ms := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = ms.Serve(mln) }()
		defer ms.Close()
		log.Info("metrics on a separate listener", "metrics_listen", mln.Addr().String())
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	bg := make(chan struct{})
	go func() {
		defer close(bg)
		done := make(chan struct{})
		if sender != nil {
			go func() { defer close(done); sender.Run(runCtx) }()
		} else {
			close(done)
		}
		srv.Run(runCtx)
		<-done
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	log.Info("kece-control serving", "listen", ln.Addr().String(), "lease_ttl", *leaseTTL, "reap_interval", *reap)
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-serveErr:
		stopRun()
		<-bg
		return fmt.Errorf("http server: %w", err)
	}
	// Long-polls end with an empty answer; nodes simply poll again elsewhere.
	srv.StopLongPolls()
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = hs.Shutdown(sctx)
	stopRun()
	<-bg
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
