// Command kece-node is one judge node process: it serves exactly one pool
// (cpp, java, python, arkts or mysql) for the control plane. It only wires
// configuration (environment variables, each overridable by a flag) into
// package worker; see docs/node.md.
//
//	kece-node [run] [flags]     run the node (the default)
//	kece-node join [flags]      exchange a one-time join code for the credential, then exit
//	kece-node healthcheck       exit 0 if the running node's /healthz answers 200, else 1
//	kece-node version           print the build version (also --version)
//	kece-node completion SHELL  shell completion; kece-node man --dir DIR: man pages
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
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/kece-oj/kece/cmd/internal/clikit"
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

// run executes one command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return clikit.Run(context.Background(), rootCommand(stderr, getenv), args, stdout, stderr)
}

func rootCommand(stderr io.Writer, getenv func(string) string) *cobra.Command {
	root := clikit.Root("kece-node", "Judge node of the KECE judge pool",
		`kece-node is one judge node process: it serves exactly one pool (cpp, java,
python, arkts or mysql) for the control plane. Without a command it runs the
node (as 'kece-node run').

Every flag has an environment variable (shown after it); a flag wins over its
variable. Durations take s, m, h and d (90s, 15m, 7d).

Exit status: 0 after a drain or stop; 1 a runtime failure; 2 a usage or
configuration error, named; 3 the control plane refused this process for good
(another process took over, the credential was revoked, the join code is spent,
unknown or of another pool): a supervisor must not restart it.`)
	// The root runs the node too, so `kece-node --pool cpp` works as before.
	nodeCommand(root, stderr, getenv)
	runCmd := nodeCommand(&cobra.Command{Use: "run", Short: "Run the node (the default command)"}, stderr, getenv)
	root.AddCommand(runCmd, joinCommand(getenv), healthcheckCommand(getenv))
	return root
}

// nodeCommand binds the node's settings to cmd and makes it run the node.
func nodeCommand(cmd *cobra.Command, stderr io.Writer, getenv func(string) string) *cobra.Command {
	nf := newNodeFlags(getenv)
	cmd.Flags().AddFlagSet(nf.fs.Flags())
	cmd.RunE = func(*cobra.Command, []string) error {
		if code := runNode(nf, stderr); code != exitOK {
			return &clikit.Exit{Code: code}
		}
		return nil
	}
	return cmd
}

func runNode(nf *nodeFlags, stderr io.Writer) int {
	level := new(slog.LevelVar)
	// JSON lines by default, text only when asked (--log-format text);
	// attribute names and types are the control plane's (package telemetry).
	cfg, log, err := nf.load(stderr, level)
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

// nodeFlags are the node's settings, bound to the shared settings loader
// (cmd/internal/settings): every flag has a KECE_ variable, a flag wins,
// secrets may come from *_FILE.
type nodeFlags struct {
	fs                                                     *settings.FlagSet
	pool, controlURL, credFile, joinCode, slots, workspace *string
	cacheDir, cacheMax, listen, image, supervisor, seccomp *string
	warm, compileCacheMax                                  *string
	dockerHost, dsnFile, controlIdentity, logLvl, logFmt   *string
	heartbeat, renew, claimWait, margin, grace             *time.Duration
	health, janitor, liveness                              *time.Duration
	resultClaims                                           *bool
}

func newNodeFlags(getenv func(string) string) *nodeFlags {
	st := settings.NewFlagSet("kece-node", getenv)
	n := &nodeFlags{fs: st}
	n.pool = st.String("pool", "KECE_POOL", "", "pool to serve: cpp, java, python, arkts or mysql")
	n.controlURL = st.String("control-url", "KECE_CONTROL_URL", "", "control plane base URL, or several comma-separated (one per replica: the node moves to the next when one hangs or fails)")
	n.credFile = st.String("credential-file", "KECE_CREDENTIAL_FILE", "", "where the node credential is kept, mode 0600 (written by 'kece-node join')")
	n.joinCode = st.Secret("join-code", "KECE_JOIN_CODE", "KECE_JOIN_CODE_FILE", "one-time join code used at first start if there is no credential yet (prefer 'kece-node join')")
	n.slots = st.String("local-slots", "KECE_LOCAL_SLOTS", "", "jobs this host runs at once (default: from the pool, cores and memory; see docs/node.md)")
	n.workspace = st.String("workspace", "KECE_WORKSPACE", "", "work directory of code sandboxes (code pools)")
	n.cacheDir = st.String("cache-dir", "KECE_CACHE_DIR", "", "artifact cache directory")
	n.cacheMax = st.String("cache-max-bytes", "KECE_CACHE_MAX_BYTES", "", "artifact cache budget, bytes or with KiB/MiB/GiB (default 10GiB)")
	n.warm = st.String("warm-sandboxes", "KECE_WARM_SANDBOXES", "", "sandboxes of the pool's image started before their jobs, each for one job (code pools; default: the local slots; 0: none)")
	n.compileCacheMax = st.String("compile-cache-max-bytes", "KECE_COMPILE_CACHE_MAX_BYTES", "", "compile cache budget under the workspace, bytes or with KiB/MiB/GiB (code pools; default 2GiB; 0: no cache, every job compiles)")
	n.listen = st.String("listen", "KECE_LISTEN", worker.ListenDefault, "address of /healthz and /metrics; \"off\" disables")
	n.image = st.String("runtime-image", "KECE_RUNTIME_IMAGE", "", "sandbox image, pinned by digest (code pools; default: the local build's tag)")
	n.supervisor = st.String("supervisor", "KECE_SUPERVISOR", "", "static kece-sandbox-init binary (code pools; default: next to kece-node)")
	n.seccomp = st.String("seccomp-profile", "KECE_SECCOMP_PROFILE", "", "Docker seccomp profile (code pools; default built in)")
	n.dockerHost = st.String("docker-host", "KECE_DOCKER_HOST", "", "Docker daemon address (code pools)")
	n.dsnFile = st.String("judge-mysql-dsn-file", "KECE_JUDGE_MYSQL_DSN_FILE", "", "file holding the judge MySQL admin DSN, mode 0600 (mysql pool)")
	n.controlIdentity = st.String("control-db-identity", "KECE_CONTROL_DB_IDENTITY", "", "control database identity the judge MySQL must not be (mysql pool)")
	n.logFmt = st.String("log-format", "KECE_LOG_FORMAT", telemetry.FormatDefault, "log lines as json or text")
	n.logLvl = st.String("log-level", "KECE_LOG_LEVEL", "info", "debug, info, warn or error")
	n.heartbeat = st.Duration("heartbeat-interval", "KECE_HEARTBEAT_INTERVAL", worker.HeartbeatIntervalDefault, "heartbeat interval (the control plane may shorten it)")
	n.renew = st.Duration("renew-interval", "KECE_RENEW_INTERVAL", worker.RenewIntervalDefault, "lease renewal interval (the control plane may shorten it)")
	n.claimWait = st.Duration("claim-wait", "KECE_CLAIM_WAIT", worker.ClaimWaitDefault, "claim long-poll wait, at most 15s")
	n.margin = st.Duration("safety-margin", "KECE_SAFETY_MARGIN", worker.SafetyMarginDefault, "subtracted from every lease for the local deadline")
	n.grace = st.Duration("drain-grace", "KECE_DRAIN_GRACE", worker.DrainGraceDefault, "how long running jobs may finish after SIGTERM")
	n.liveness = st.Duration("liveness-interval", "KECE_LIVENESS_INTERVAL", worker.LivenessIntervalDefault,
		"how often the control replica holding the claim long-poll is checked (with several replicas)")
	n.health = st.Duration("health-interval", "KECE_HEALTH_INTERVAL", worker.HealthIntervalDefault, "dependency probe interval")
	n.janitor = st.Duration("janitor-interval", "KECE_JANITOR_INTERVAL", worker.JanitorIntervalDefault, "leftover cleanup interval")
	n.resultClaims = st.Bool("result-claims", "KECE_RESULT_CLAIMS", true, "a result carries the claim for the slot it frees (the slot cycle; false: only the claim loop leases)")
	// The names before one name per setting across binaries; hidden, for
	// one release (CHANGELOG.md).
	st.Deprecated("heartbeat", "heartbeat-interval")
	st.Deprecated("renew", "renew-interval")
	st.Deprecated("cache-max", "cache-max-bytes")
	return n
}

// configure reads the environment (getenv) and flags into a worker.Config,
// building only the executor of the configured pool (tests).
func configure(args []string, getenv func(string) string, log *slog.Logger) (worker.Config, error) {
	nf := newNodeFlags(getenv)
	if err := nf.fs.Flags().Parse(args); err != nil {
		return worker.Config{}, settings.Errorf("command line", "%v", err)
	}
	return nf.config(nf.fs.Apply(), log)
}

// load applies the settings (after the command line is parsed), builds the
// logger they describe and the node's configuration: every bad setting is
// reported, joined.
func (n *nodeFlags) load(stderr io.Writer, level *slog.LevelVar) (worker.Config, *slog.Logger, error) {
	n.fs.WarnTo(stderr)
	applyErr := n.fs.Apply()
	logCfg := telemetry.LogConfig{Format: *n.logFmt, Level: *n.logLvl}
	if err := logCfg.Validate(); err != nil {
		applyErr = errors.Join(applyErr, settings.Errorf(n.fs.Source("log-format")+"/"+n.fs.Source("log-level"), "%v", err))
		logCfg = telemetry.LogConfig{}
	}
	level.Set(logLevel(logCfg.Level))
	log, _ := telemetry.NewLogger(stderr, telemetry.LogConfig{Format: logCfg.Format, Leveler: level})
	cfg, err := n.config(applyErr, log)
	return cfg, log, err
}

// config builds the worker's configuration from the applied settings;
// prior holds the problems found so far, reported with the rest.
func (n *nodeFlags) config(prior error, log *slog.Logger) (worker.Config, error) {
	if args := n.fs.Args(); len(args) > 0 {
		prior = errors.Join(prior, settings.Errorf("command line", "unexpected arguments %q", args))
	}
	cfg := worker.Config{Pool: *n.pool, ControlURL: *n.controlURL, CredentialFile: *n.credFile, JoinCode: *n.joinCode,
		CacheDir: *n.cacheDir, Listen: *n.listen, HeartbeatInterval: *n.heartbeat, RenewInterval: *n.renew, ClaimWait: *n.claimWait,
		SafetyMargin: *n.margin, DrainGrace: *n.grace, HealthInterval: *n.health, JanitorInterval: *n.janitor,
		LivenessInterval: *n.liveness,
		NoResultClaims:   !*n.resultClaims,
		Version:          "kece-node " + buildinfo.Version(), Logger: log}
	errs := []error{prior}
	if cfg.Listen == "off" {
		cfg.Listen = ""
	} else if _, _, err := net.SplitHostPort(cfg.Listen); err != nil {
		// Found now, not when the node binds it after joining (exit 1).
		errs = append(errs, settings.Errorf(n.fs.Source("listen"), "%q is not host:port (e.g. 127.0.0.1:9464) or off", cfg.Listen))
	}
	if *n.slots == "" {
		if contracts.ValidPool(*n.pool) {
			cpus, mem := hostResources()
			cfg.LocalSlots = worker.DefaultLocalSlots(*n.pool, cpus, mem)
			log.Info("KECE_LOCAL_SLOTS not set; sized from the host", "local_slots", cfg.LocalSlots, "cpus", cpus,
				"memory_bytes", mem, "pool", *n.pool)
		} else {
			// Sized from the host once the pool is known: not a setting
			// to ask for, so the refusal names only the pool.
			cfg.LocalSlots = 1
		}
	} else if v, err := strconv.Atoi(*n.slots); err != nil || v < 1 {
		errs = append(errs, settings.Errorf(n.fs.Source("local-slots"), "%q must be a positive integer (or unset for the host's default)", *n.slots))
	} else {
		cfg.LocalSlots = v
	}
	if *n.cacheMax != "" {
		v, err := parseBytes(*n.cacheMax)
		if err != nil {
			errs = append(errs, settings.Errorf(n.fs.Source("cache-max-bytes"), "%v", err))
		}
		cfg.CacheMaxBytes = v
	}
	if contracts.ValidPool(*n.pool) && filepath.IsAbs(*n.credFile) {
		// A credential file that is there but unusable is a setting to
		// fix, found now, not a failure of the running node (exit 1 and a
		// restart loop).
		errs = append(errs, worker.CheckCredentialFile(*n.credFile, *n.pool))
	}
	errs = append(errs, n.checkPaths())
	errs = append(errs, n.backend(&cfg, log))
	if err := errors.Join(errs...); err != nil {
		// The worker's own checks are reported with these, all at once.
		return cfg, errors.Join(err, cfg.Validate())
	}
	return cfg, cfg.Validate()
}

// checkPaths checks the type of every other path setting the node reads
// before anything opens one: a named pipe, a device or a socket where a file
// or a directory belongs stops the start naming the setting (exit 2), where
// opening it would block the node with no message. The credential file is
// checked by worker.CheckCredentialFile, the secret files
// (KECE_JOIN_CODE_FILE, KECE_JUDGE_MYSQL_DSN_FILE) by the settings loader.
func (n *nodeFlags) checkPaths() error {
	type path struct {
		name, value string
		dir         bool
	}
	paths := []path{{"cache-dir", *n.cacheDir, true}}
	if contracts.ValidPool(*n.pool) && *n.pool != string(machineapi.PoolMysql) {
		paths = append(paths, path{"workspace", *n.workspace, true}, path{"seccomp-profile", *n.seccomp, false},
			path{"supervisor", *n.supervisor, false})
	}
	var errs []error
	for _, p := range paths {
		if p.value != "" {
			errs = append(errs, worker.CheckPathType(n.fs.Source(p.name), p.value, p.dir))
		}
	}
	return errors.Join(errs...)
}

// backend builds only the executor of the configured pool.
func (n *nodeFlags) backend(cfg *worker.Config, log *slog.Logger) error {
	var errs []error
	switch {
	case *n.pool == string(machineapi.PoolMysql):
		// The mysql pool never opens the Docker socket: only the SQL
		// executor is built.
		dsn, err := readSecretFile(n.fs.Source("judge-mysql-dsn-file"), *n.dsnFile)
		if err != nil {
			return err
		}
		f, err := worker.NewSQLBackend(worker.SQLBackendConfig{Executor: sqljudge.Config{AdminDSN: dsn,
			ControlServerIdentity: *n.controlIdentity, Logger: log}})
		if err != nil {
			errs = append(errs, err)
		}
		cfg.NewBackend = f
	case contracts.ValidPool(*n.pool):
		// Code pools never load SQL credentials: the DSN file is not read.
		if *n.dsnFile != "" {
			log.Warn("KECE_JUDGE_MYSQL_DSN_FILE is ignored by a code pool", "pool", *n.pool)
		}
		if *n.workspace == "" || !filepath.IsAbs(*n.workspace) {
			errs = append(errs, settings.Errorf(n.fs.Source("workspace"), "%q must be an absolute directory for the %s pool's sandboxes", *n.workspace, *n.pool))
		}
		sup := *n.supervisor
		if sup == "" {
			if exe, err := os.Executable(); err == nil {
				sup = filepath.Join(filepath.Dir(exe), "kece-sandbox-init")
			}
		}
		// The node serves every language id of its pool; an operator image
		// replaces the local one for all of them.
		ec := code.Config{Workspace: *n.workspace, SupervisorPath: sup, SeccompProfilePath: *n.seccomp, DockerHost: *n.dockerHost, Logger: log}
		warm := cfg.LocalSlots
		if *n.warm != "" {
			v, err := strconv.Atoi(*n.warm)
			if err != nil || v < 0 || v > contracts.SlotsMax {
				errs = append(errs, settings.Errorf(n.fs.Source("warm-sandboxes"), "%q must be a whole number from 0 to %d (or unset for the local slots)", *n.warm, contracts.SlotsMax))
			}
			warm = v
		}
		if *n.compileCacheMax != "" {
			v, err := parseBytes(*n.compileCacheMax)
			if err != nil {
				errs = append(errs, settings.Errorf(n.fs.Source("compile-cache-max-bytes"), "%v", err))
			}
			ec.CompileCacheBytes, ec.NoCompileCache = v, v == 0
		}
		f, err := worker.NewCodeBackend(worker.CodeBackendConfig{Pool: *n.pool, Image: *n.image, Executor: ec, WarmSandboxes: warm})
		if err != nil {
			errs = append(errs, err)
		}
		cfg.NewBackend = f
	}
	return errors.Join(errs...)
}

// readSecretFile reads a one-line secret from a file that only its owner
// (and a reading group) may read, through the shared settings loader.
func readSecretFile(name, path string) (string, error) {
	if path == "" {
		return "", settings.Errorf("KECE_JUDGE_MYSQL_DSN_FILE", "required for the mysql pool: a file holding the judge MySQL admin DSN, mode 0600 (or --judge-mysql-dsn-file)")
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
