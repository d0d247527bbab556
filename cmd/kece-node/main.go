// Command kece-node is one judge node process: it serves exactly one pool
// (cpp, java, python, arkts or mysql) for the control plane. It only wires
// configuration (environment variables, each overridable by a flag) into
// package worker; see docs/node.md.
//
// Exit status: 0 after a drain or stop; 2 for a configuration error; 3 when
// the control plane refused this process for good (another process of the
// node took over, or the credential was revoked) — a supervisor must not
// restart it blindly; 1 for anything else.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/kece-oj/kece/engine/code"
	"github.com/kece-oj/kece/engine/sqljudge"
	"github.com/kece-oj/kece/telemetry"
	"github.com/kece-oj/kece/worker"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

const (
	exitFailure = 1
	exitConfig  = 2
	exitRefused = 3
)

func main() { os.Exit(run()) }

func run() int {
	// JSON lines by default, text only when asked (KECE_LOG_FORMAT=text);
	// attribute names and types are the control plane's (package telemetry).
	log, err := telemetry.NewLogger(os.Stderr, telemetry.LogConfig{Format: os.Getenv("KECE_LOG_FORMAT"), Level: os.Getenv("KECE_LOG_LEVEL")})
	if err != nil {
		fmt.Fprintf(os.Stderr, "kece-node: configuration: KECE_LOG_FORMAT/KECE_LOG_LEVEL: %v\n", err)
		return exitConfig
	}
	cfg, err := configure(os.Args[1:], os.Getenv, log)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kece-node: configuration: %v\n", err)
		return exitConfig
	}
	node, err := worker.New(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kece-node: configuration: %v\n", err)
		return exitConfig
	}
	// First SIGTERM/SIGINT: drain (no new claims, running jobs finish within
	// the grace). Second: stop at once after cleanup.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	go func() {
		s, ok := <-sigs
		if !ok {
			return
		}
		log.Info("signal: draining; send it again to stop at once", "signal", s.String())
		node.Drain()
		s, ok = <-sigs
		if !ok {
			return
		}
		log.Warn("second signal: stopping at once", "signal", s.String())
		stop()
	}()
	err = node.Run(ctx)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, worker.ErrSuperseded), errors.Is(err, worker.ErrRevoked),
		errors.Is(err, worker.ErrJoinCodeSpent), errors.Is(err, worker.ErrJoinCodeInvalid):
		log.Error("kece-node stops and must not be restarted as is", "err", err)
		return exitRefused
	default:
		log.Error("kece-node failed", "err", err)
		return exitFailure
	}
}

// configure reads the environment (getenv) and flags into a worker.Config,
// building only the executor of the configured pool.
func configure(args []string, getenv func(string) string, log *slog.Logger) (worker.Config, error) {
	fs := flag.NewFlagSet("kece-node", flag.ContinueOnError)
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	pool := fs.String("pool", env("KECE_POOL", ""), "pool to serve: cpp, java, python, arkts or mysql (KECE_POOL)")
	controlURL := fs.String("control-url", env("KECE_CONTROL_URL", ""), "control plane base URL (KECE_CONTROL_URL)")
	credFile := fs.String("credential-file", env("KECE_CREDENTIAL_FILE", ""), "where the node credential is kept, mode 0600 (KECE_CREDENTIAL_FILE)")
	joinCode := fs.String("join-code", env("KECE_JOIN_CODE", ""), "one-time join code, first start only (KECE_JOIN_CODE)")
	slots := fs.String("local-slots", env("KECE_LOCAL_SLOTS", ""), "jobs this host runs at once; required (KECE_LOCAL_SLOTS)")
	workspace := fs.String("workspace", env("KECE_WORKSPACE", ""), "work directory of code sandboxes (KECE_WORKSPACE; code pools)")
	cacheDir := fs.String("cache-dir", env("KECE_CACHE_DIR", ""), "artifact cache directory (KECE_CACHE_DIR)")
	cacheMax := fs.String("cache-max", env("KECE_CACHE_MAX_BYTES", ""), "artifact cache budget, bytes or with KiB/MiB/GiB (KECE_CACHE_MAX_BYTES; default 10GiB)")
	listen := fs.String("listen", env("KECE_LISTEN", worker.ListenDefault), "address of /healthz and /metrics; \"off\" disables (KECE_LISTEN)")
	image := fs.String("runtime-image", env("KECE_RUNTIME_IMAGE", ""), "sandbox image, pinned by digest (KECE_RUNTIME_IMAGE; code pools; default: the local build's tag)")
	supervisor := fs.String("supervisor", env("KECE_SUPERVISOR", ""), "static kece-sandbox-init binary (KECE_SUPERVISOR; code pools; default: next to kece-node)")
	seccomp := fs.String("seccomp-profile", env("KECE_SECCOMP_PROFILE", ""), "Docker seccomp profile (KECE_SECCOMP_PROFILE; code pools; default built in)")
	dockerHost := fs.String("docker-host", env("KECE_DOCKER_HOST", ""), "Docker daemon address (KECE_DOCKER_HOST; code pools)")
	dsnFile := fs.String("judge-mysql-dsn-file", env("KECE_JUDGE_MYSQL_DSN_FILE", ""), "file holding the judge MySQL admin DSN, mode 0600 (KECE_JUDGE_MYSQL_DSN_FILE; mysql pool)")
	controlIdentity := fs.String("control-db-identity", env("KECE_CONTROL_DB_IDENTITY", ""), "control database identity the judge MySQL must not be (KECE_CONTROL_DB_IDENTITY; mysql pool)")
	heartbeat := fs.Duration("heartbeat", worker.HeartbeatIntervalDefault, "heartbeat interval (the control plane may shorten it)")
	renew := fs.Duration("renew", worker.RenewIntervalDefault, "lease renewal interval (the control plane may shorten it)")
	claimWait := fs.Duration("claim-wait", worker.ClaimWaitDefault, "claim long-poll wait, at most 15s")
	margin := fs.Duration("safety-margin", worker.SafetyMarginDefault, "subtracted from every lease for the local deadline")
	grace := fs.Duration("drain-grace", worker.DrainGraceDefault, "how long running jobs may finish after SIGTERM")
	health := fs.Duration("health-interval", worker.HealthIntervalDefault, "dependency probe interval")
	janitor := fs.Duration("janitor-interval", worker.JanitorIntervalDefault, "leftover cleanup interval")
	if err := fs.Parse(args); err != nil {
		return worker.Config{}, err
	}
	if fs.NArg() > 0 {
		return worker.Config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg := worker.Config{Pool: *pool, ControlURL: *controlURL, CredentialFile: *credFile, JoinCode: *joinCode,
		CacheDir: *cacheDir, Listen: *listen, HeartbeatInterval: *heartbeat, RenewInterval: *renew, ClaimWait: *claimWait,
		SafetyMargin: *margin, DrainGrace: *grace, HealthInterval: *health, JanitorInterval: *janitor,
		Version: "kece-node " + version, Logger: log}
	if cfg.Listen == "off" {
		cfg.Listen = ""
	}
	var errs []error
	if *slots == "" {
		errs = append(errs, errors.New("KECE_LOCAL_SLOTS is required (a positive number of jobs this host runs at once; there is no default)"))
	} else if n, err := strconv.Atoi(*slots); err != nil || n < 1 {
		errs = append(errs, fmt.Errorf("KECE_LOCAL_SLOTS %q must be a positive integer", *slots))
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
	case *pool == "mysql":
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
	case worker.ValidPool(*pool):
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
		rt, err := code.DefaultRuntime(*pool)
		if err != nil {
			errs = append(errs, err)
		}
		if *image != "" {
			rt.Image = *image
		}
		f, err := worker.NewCodeBackend(worker.CodeBackendConfig{Pool: *pool, Runtime: rt, Executor: code.Config{
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

// readSecretFile reads a one-line secret from a file only its owner can read.
func readSecretFile(name, path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("%s is required for the mysql pool (a file holding the judge MySQL admin DSN, mode 0600)", name)
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s %s has mode %04o; it holds a secret and must be 0600", name, path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s %s is empty", name, path)
	}
	return s, nil
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
