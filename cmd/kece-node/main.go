// Command kece-node is one judge node process: it serves exactly one pool
// (cpp, java, python, arkts or mysql) for the control plane. It only wires
// configuration (environment variables, each overridable by a flag) into
// package worker; see docs/node.md.
//
//	kece-node [run] [flags]     run the node (the default)
//	kece-node join [flags]      exchange a one-time join code for the credential, then exit
//	kece-node healthcheck       exit 0 if the running node's /healthz answers 200, else 1
//	kece-node version           print the build version (also --version)
//
// Exit status (the same across KECE's binaries, docs/operations.md): 0 after
// a drain or stop, or success; 1 a runtime failure (healthcheck: unhealthy);
// 2 a usage or configuration error; 3 the control plane refused this
// process for good (another process of the node took over, the credential
// was revoked, the join code is spent, unknown or of another pool, the
// control plane speaks another protocol version) — a
// supervisor must not restart it blindly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/engine/code"
	"github.com/kece-oj/kece/engine/sqljudge"
	"github.com/kece-oj/kece/internal/buildinfo"
	"github.com/kece-oj/kece/telemetry"
	"github.com/kece-oj/kece/worker"
)

const (
	exitOK      = 0
	exitFailure = 1
	exitConfig  = 2
	exitRefused = 3
)

func main() {
	getenv := func(k string) string { return os.Getenv(k) }
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, getenv))
}

// run dispatches the subcommand; without one it runs the node.
func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	sub := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "run":
		if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
			fmt.Fprintln(stdout, buildinfo.String("kece-node"))
			return exitOK
		}
		return runNode(args, stderr, getenv)
	case "join":
		return runJoin(args, stdout, stderr, getenv)
	case "healthcheck":
		return runHealthcheck(args, stdout, stderr, getenv)
	case "version":
		fmt.Fprintln(stdout, buildinfo.String("kece-node"))
		return exitOK
	case "help":
		fmt.Fprint(stdout, usageText)
		return exitOK
	}
	fmt.Fprintf(stderr, "kece-node: unknown command %q\n%s", sub, usageText)
	return exitConfig
}

const usageText = `usage:
  kece-node [run] [flags]    run the node (kece-node run -h lists the flags and their env variables)
  kece-node join [flags]     exchange a one-time join code for the credential, then exit
  kece-node healthcheck      exit 0 if the running node's /healthz answers 200, else 1
  kece-node version          print the build version
`

func runNode(args []string, stderr io.Writer, getenv func(string) string) int {
	level := new(slog.LevelVar)
	level.Set(logLevel(getenv("KECE_LOG_LEVEL")))
	// JSON lines by default, text only when asked (KECE_LOG_FORMAT=text);
	// attribute names and types are the control plane's (package telemetry).
	log, err := telemetry.NewLogger(stderr, telemetry.LogConfig{Format: getenv("KECE_LOG_FORMAT"), Leveler: level})
	if err != nil {
		fmt.Fprintf(stderr, "kece-node: configuration: KECE_LOG_FORMAT: %v\n", err)
		return exitConfig
	}
	cfg, err := configureLogged(args, getenv, log, level)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "kece-node: configuration: %v\n", err)
		return exitConfig
	}
	node, err := worker.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "kece-node: configuration: %v\n", err)
		return exitConfig
	}
	// First SIGTERM/SIGINT: drain (no new claims, running jobs finish within
	// the grace). Second: stop at once after cleanup.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	log.Info("kece-node starting", "version", buildinfo.Version(), "pool", cfg.Pool, "local_slots", cfg.LocalSlots)
	// The node and its signal watcher run as one group: the watcher ends
	// when the node has stopped (for whatever reason), so neither outlives
	// the process's work.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer stop()
		return node.Run(gctx)
	})
	g.Go(func() error {
		select {
		case s := <-sigs:
			log.Info("signal: draining; send it again to stop at once", "signal", s.String())
			node.Drain()
		case <-gctx.Done():
			return nil
		}
		select {
		case s := <-sigs:
			log.Warn("second signal: stopping at once", "signal", s.String())
			stop()
		case <-gctx.Done():
		}
		return nil
	})
	err = g.Wait()
	switch {
	case err == nil:
		return exitOK
	case refused(err):
		log.Error("kece-node stops and must not be restarted as is", "err", err)
		return exitRefused
	default:
		log.Error("kece-node failed", "err", err)
		return exitFailure
	}
}

// refused: the control plane said no for good; restarting changes nothing.
func refused(err error) bool {
	for _, e := range []error{worker.ErrSuperseded, worker.ErrRevoked, worker.ErrJoinCodeSpent, worker.ErrJoinCodeInvalid,
		worker.ErrPoolMismatch, worker.ErrProtocolUnsupported} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// newFlags is the shared settings loader (cmd/internal/settings): every flag
// has a KECE_ variable, a flag wins, secrets may come from *_FILE.
func newFlags(name string, getenv func(string) string, out io.Writer) *settings.FlagSet {
	fs := settings.NewFlagSet(name, getenv)
	fs.SetOutput(out)
	return fs
}

// parseFlags parses and refuses positional arguments.
func parseFlags(fs *settings.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return settings.Errorf("command line", "unexpected arguments %q", fs.Args())
	}
	return nil
}

// configure reads the environment (getenv) and flags into a worker.Config,
// building only the executor of the configured pool.
func configure(args []string, getenv func(string) string, log *slog.Logger) (worker.Config, error) {
	return configureLogged(args, getenv, log, nil)
}

// configureLogged is configure that also applies --log-level to level.
func configureLogged(args []string, getenv func(string) string, log *slog.Logger, level *slog.LevelVar) (worker.Config, error) {
	st := newFlags("kece-node", getenv, os.Stderr)
	pool := st.String("pool", "KECE_POOL", "", "pool to serve: cpp, java, python, arkts or mysql")
	controlURL := st.String("control-url", "KECE_CONTROL_URL", "", "control plane base URL, or several comma-separated (one per replica: the node moves to the next when one hangs or fails)")
	credFile := st.String("credential-file", "KECE_CREDENTIAL_FILE", "", "where the node credential is kept, mode 0600 (written by 'kece-node join')")
	joinCode := st.Secret("join-code", "KECE_JOIN_CODE", "KECE_JOIN_CODE_FILE", "one-time join code used at first start if there is no credential yet (prefer 'kece-node join')")
	slots := st.String("local-slots", "KECE_LOCAL_SLOTS", "", "jobs this host runs at once (default: from the pool, cores and memory; see docs/node.md)")
	workspace := st.String("workspace", "KECE_WORKSPACE", "", "work directory of code sandboxes (code pools)")
	cacheDir := st.String("cache-dir", "KECE_CACHE_DIR", "", "artifact cache directory")
	cacheMax := st.String("cache-max", "KECE_CACHE_MAX_BYTES", "", "artifact cache budget, bytes or with KiB/MiB/GiB (default 10GiB)")
	listen := st.String("listen", "KECE_LISTEN", worker.ListenDefault, "address of /healthz and /metrics; \"off\" disables")
	image := st.String("runtime-image", "KECE_RUNTIME_IMAGE", "", "sandbox image, pinned by digest (code pools; default: the local build's tag)")
	supervisor := st.String("supervisor", "KECE_SUPERVISOR", "", "static kece-sandbox-init binary (code pools; default: next to kece-node)")
	seccomp := st.String("seccomp-profile", "KECE_SECCOMP_PROFILE", "", "Docker seccomp profile (code pools; default built in)")
	dockerHost := st.String("docker-host", "KECE_DOCKER_HOST", "", "Docker daemon address (code pools)")
	dsnFile := st.String("judge-mysql-dsn-file", "KECE_JUDGE_MYSQL_DSN_FILE", "", "file holding the judge MySQL admin DSN, mode 0600 (mysql pool)")
	controlIdentity := st.String("control-db-identity", "KECE_CONTROL_DB_IDENTITY", "", "control database identity the judge MySQL must not be (mysql pool)")
	logLvl := st.String("log-level", "KECE_LOG_LEVEL", "info", "debug, info, warn or error")
	heartbeat := st.Duration("heartbeat", "KECE_HEARTBEAT_INTERVAL", worker.HeartbeatIntervalDefault, "heartbeat interval (the control plane may shorten it)")
	renew := st.Duration("renew", "KECE_RENEW_INTERVAL", worker.RenewIntervalDefault, "lease renewal interval (the control plane may shorten it)")
	claimWait := st.Duration("claim-wait", "KECE_CLAIM_WAIT", worker.ClaimWaitDefault, "claim long-poll wait, at most 15s")
	margin := st.Duration("safety-margin", "KECE_SAFETY_MARGIN", worker.SafetyMarginDefault, "subtracted from every lease for the local deadline")
	grace := st.Duration("drain-grace", "KECE_DRAIN_GRACE", worker.DrainGraceDefault, "how long running jobs may finish after SIGTERM")
	health := st.Duration("health-interval", "KECE_HEALTH_INTERVAL", worker.HealthIntervalDefault, "dependency probe interval")
	janitor := st.Duration("janitor-interval", "KECE_JANITOR_INTERVAL", worker.JanitorIntervalDefault, "leftover cleanup interval")
	resultClaims := st.Bool("result-claims", "KECE_RESULT_CLAIMS", true, "a result carries the claim for the slot it frees (the slot cycle; false: only the claim loop leases)")
	if err := parseFlags(st, args); err != nil {
		return worker.Config{}, err
	}
	if level != nil {
		var l slog.Level
		if err := l.UnmarshalText([]byte(*logLvl)); err != nil {
			return worker.Config{}, fmt.Errorf("KECE_LOG_LEVEL %q: want debug, info, warn or error", *logLvl)
		}
		level.Set(l)
	}
	cfg := worker.Config{Pool: *pool, ControlURL: *controlURL, CredentialFile: *credFile, JoinCode: *joinCode,
		CacheDir: *cacheDir, Listen: *listen, HeartbeatInterval: *heartbeat, RenewInterval: *renew, ClaimWait: *claimWait,
		SafetyMargin: *margin, DrainGrace: *grace, HealthInterval: *health, JanitorInterval: *janitor,
		NoResultClaims: !*resultClaims,
		Version:        "kece-node " + buildinfo.Version(), Logger: log}
	if cfg.Listen == "off" {
		cfg.Listen = ""
	}
	var errs []error
	if *slots == "" {
		if contracts.ValidPool(*pool) {
			cpus, mem := hostResources()
			cfg.LocalSlots = worker.DefaultLocalSlots(*pool, cpus, mem)
			log.Info("KECE_LOCAL_SLOTS not set; sized from the host", "local_slots", cfg.LocalSlots, "cpus", cpus,
				"memory_bytes", mem, "pool", *pool)
		}
	} else if n, err := strconv.Atoi(*slots); err != nil || n < 1 {
		errs = append(errs, fmt.Errorf("KECE_LOCAL_SLOTS %q must be a positive integer (or unset for the host's default)", *slots))
	} else {
		cfg.LocalSlots = n
	}
	if *cacheMax != "" {
		n, err := parseBytes(*cacheMax)
		if err != nil {
			errs = append(errs, fmt.Errorf("KECE_CACHE_MAX_BYTES: %w", err))
		}
		cfg.CacheMaxBytes = n
	}
	switch {
	case *pool == string(machineapi.PoolMysql):
		// The mysql pool never opens the Docker socket: only the SQL
		// executor is built.
		dsn, err := readSecretFile("KECE_JUDGE_MYSQL_DSN_FILE", *dsnFile)
		if err != nil {
			errs = append(errs, err)
			break
		}
		f, err := worker.NewSQLBackend(worker.SQLBackendConfig{Executor: sqljudge.Config{AdminDSN: dsn,
			ControlServerIdentity: *controlIdentity, Logger: log}})
		if err != nil {
			errs = append(errs, err)
		}
		cfg.NewBackend = f
	case contracts.ValidPool(*pool):
		// Code pools never load SQL credentials: the DSN file is not read.
		if *dsnFile != "" {
			log.Warn("KECE_JUDGE_MYSQL_DSN_FILE is ignored by a code pool", "pool", *pool)
		}
		if *workspace == "" || !filepath.IsAbs(*workspace) {
			errs = append(errs, fmt.Errorf("KECE_WORKSPACE %q must be an absolute directory for the %s pool's sandboxes", *workspace, *pool))
		}
		sup := *supervisor
		if sup == "" {
			if exe, err := os.Executable(); err == nil {
				sup = filepath.Join(filepath.Dir(exe), "kece-sandbox-init")
			}
		}
		// The node serves every language id of its pool; an operator image
		// replaces the local one for all of them.
		f, err := worker.NewCodeBackend(worker.CodeBackendConfig{Pool: *pool, Image: *image, Executor: code.Config{
			Workspace: *workspace, SupervisorPath: sup, SeccompProfilePath: *seccomp, DockerHost: *dockerHost, Logger: log}})
		if err != nil {
			errs = append(errs, err)
		}
		cfg.NewBackend = f
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// readSecretFile reads a one-line secret from a file that only its owner
// (and a reading group) may read, through the shared settings loader.
func readSecretFile(name, path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("%s is required for the mysql pool (a file holding the judge MySQL admin DSN, mode 0600)", name)
	}
	return settings.ReadSecretFile(name, path)
}

// parseBytes reads "1073741824", "512MiB" or "10GiB".
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.m
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a byte size (e.g. 10GiB)", s)
	}
	return n * mult, nil
}

func logLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo
	}
	return l
}
