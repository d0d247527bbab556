package worker

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
)

// Causes of a job's cancellation (context.Cause of its contexts).
var (
	errLocalDeadline = errors.New("local lease deadline passed without a successful renewal")
	errLeaseLost     = errors.New("lease lost (renew answered LOST)")
	errJobCancelled  = errors.New("job cancelled or superseded (renew answered CANCELLED)")
	errGraceOver     = errors.New("shutdown grace period over")
	errHardStop      = errors.New("node stopped at once")
)

// Node is one judge node process serving one pool. Create it with New, run
// it with Run; Drain asks it to finish its jobs and stop.
type Node struct {
	cfg    Config
	log    *slog.Logger
	cl     *client
	bootID string
	m      *metrics
	prom   *promMetrics
	// cachePtr publishes the cache to /metrics, which may be scraped from
	// another goroutine while Run starts.
	cachePtr atomic.Pointer[artifact.Cache]

	// Set once by Run before the loops start.
	cycle   cycleCtx
	cache   *artifact.Cache
	backend Backend
	nodeID  string
	execID  string // the node's name towards executors, see ExecutorNodeID
	timing  timing

	reopenMu sync.Mutex

	mu         sync.Mutex
	cred       Credential
	epoch      int64
	desired    machineapi.DesiredState
	adminSlots int
	busy       int
	jobs       map[string]*job
	draining   bool // local: SIGTERM or Drain
	runtime    string
	deps       []Dependency
	// depsDown: the last probe found a dependency unhealthy, or a job since
	// failed on one (see dependencyFault); the node claims nothing until a
	// probe passes. depsGen counts those job failures, so a probe that
	// started before one cannot clear it.
	depsDown   bool
	depsGen    int
	languages  []LanguageReport // last probe, versions kept across failed probes
	listenAddr string

	wake      chan struct{} // capacity 1: slots or state changed
	phaseCh   chan struct{} // capacity 1: a job's phase changed (renewLoop)
	probeCh   chan struct{} // capacity 1: probe now (healthLoop)
	drainCh   chan struct{}
	drainOnce sync.Once
	ready     chan struct{}
	fatalCh   chan struct{}
	fatalOnce sync.Once
	fatalErr  error
}

// timing is the effective schedule after the session answer.
type timing struct {
	// resultClaims: the control plane takes a claim with a result.
	resultClaims bool
	heartbeat    time.Duration
	renew        time.Duration
	claimWait    time.Duration
	margin       time.Duration
	leaseTTL     time.Duration
}

// New validates cfg and prepares a node; nothing is contacted yet.
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	cl, err := newClient(ControlURLs(cfg.ControlURL), cfg.RequestTimeout)
	if err != nil {
		return nil, err
	}
	cl.moved = func(from, to string, err error) {
		cfg.Logger.Warn("control replica failed; moving to the next one (the session is kept)", "from", from, "to", to, "err", err)
	}
	var b [12]byte
	if _, err := crand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("boot id: %w", err)
	}
	n := &Node{
		cfg: cfg, log: cfg.Logger.With("pool", cfg.Pool), cl: cl, bootID: "boot-" + hex.EncodeToString(b[:]),
		m: &metrics{}, jobs: make(map[string]*job), wake: make(chan struct{}, 1), phaseCh: make(chan struct{}, 1), probeCh: make(chan struct{}, 1),
		drainCh: make(chan struct{}), ready: make(chan struct{}), fatalCh: make(chan struct{}),
	}
	n.prom = newPromMetrics(n)
	return n, nil
}

// BootID is this process's boot id (one per Node).
func (n *Node) BootID() string { return n.bootID }

// Ready is closed once the session is open, the executor built and the
// health endpoint listening.
func (n *Node) Ready() <-chan struct{} { return n.ready }

// Addr is the /healthz and /metrics address (after Ready; empty if disabled).
func (n *Node) Addr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.listenAddr
}

// Drain stops claiming; running jobs finish within the drain grace, then are
// cancelled; Run then returns nil. Safe to call more than once.
func (n *Node) Drain() {
	n.drainOnce.Do(func() {
		n.mu.Lock()
		n.draining = true
		n.mu.Unlock()
		close(n.drainCh)
		n.poke()
	})
}

func (n *Node) poke() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// fail records a fatal error (superseded, revoked) once and stops the node.
func (n *Node) fail(err error) {
	n.fatalOnce.Do(func() {
		n.fatalErr = err
		n.log.Error("node stops: the control plane refused this process for good", "node_id", n.nodeID, "err", err)
		close(n.fatalCh)
		n.poke()
	})
}

func (n *Node) failed() bool {
	select {
	case <-n.fatalCh:
		return true
	default:
		return false
	}
}

// Run joins (first start), opens the session, builds the executor, runs the
// janitor and then heartbeats, claims and judges until ctx ends (stop at
// once: jobs are cancelled and cleaned up, nothing more is posted), Drain is
// called (graceful), or the control plane refuses this process (superseded,
// revoked: the error is returned).
func (n *Node) Run(ctx context.Context) (err error) {
	defer n.cl.close()
	if n.cache, err = artifact.OpenCache(ctx, artifact.CacheConfig{Dir: n.cfg.CacheDir, MaxBytes: n.cfg.CacheMaxBytes,
		Logger: n.log}); err != nil {
		return fmt.Errorf("KECE_CACHE_DIR: %w", err)
	}
	defer n.cache.Close()
	n.cachePtr.Store(n.cache)
	// A drain (SIGTERM) while the control plane is still unreachable ends
	// the session retries: there is nothing to finish yet.
	loginCtx, cancelLogin := context.WithCancel(ctx)
	go func() {
		select {
		case <-n.drainCh:
			cancelLogin()
		case <-loginCtx.Done():
		}
	}()
	err = n.login(loginCtx)
	cancelLogin() // also ends the watcher
	if err != nil {
		select {
		case <-n.drainCh:
			if ctx.Err() == nil {
				n.log.Info("drained before the session opened")
				return nil
			}
		default:
		}
		return err
	}
	n.prom.info.WithLabelValues(n.nodeID).Set(1)
	if n.backend, err = n.cfg.NewBackend(ctx, n.execID); err != nil {
		return fmt.Errorf("pool %s executor: %w", n.cfg.Pool, err)
	}
	defer n.backend.Close()
	// Leftovers of earlier processes go before the first claim.
	if err := n.backend.Janitor(ctx, n.isLive); err != nil {
		n.log.Warn("janitor at start failed; retrying on its schedule", "node_id", n.nodeID, "err", err)
	}
	n.probe(ctx)
	if n.cfg.Listen != "" {
		ln, err := net.Listen("tcp", n.cfg.Listen)
		if err != nil {
			return fmt.Errorf("KECE_LISTEN %s: %w", n.cfg.Listen, err)
		}
		n.mu.Lock()
		n.listenAddr = ln.Addr().String()
		n.mu.Unlock()
		// Bounded like every control listener: headers in time and size, and
		// idle connections; the handlers read no bodies.
		srv := &http.Server{Handler: n.Handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
	}
	// A first heartbeat before claiming: the desired state and slots decide
	// whether to claim at all.
	n.sendHeartbeat(ctx)

	loopsCtx, stopLoops := context.WithCancel(context.Background())
	claimCtx, stopClaims := context.WithCancel(loopsCtx)
	// jobsCtx ends execution; hardCtx also ends result posting.
	hardCtx, hardStop := context.WithCancelCause(context.Background())
	jobsCtx, stopJobs := context.WithCancelCause(hardCtx)
	defer stopLoops()
	defer hardStop(nil)
	defer stopJobs(nil)

	var loops, jobsWG sync.WaitGroup
	n.cycle = cycleCtx{claim: claimCtx, jobs: jobsCtx, hard: hardCtx, wg: &jobsWG}
	for _, loop := range []func(context.Context){n.heartbeatLoop, n.renewLoop, n.healthLoop, n.janitorLoop} {
		loops.Go(func() { loop(loopsCtx) })
	}
	claimDone := make(chan struct{})
	go func() {
		defer close(claimDone)
		n.claimLoop(claimCtx)
	}()
	close(n.ready)
	t := n.times()
	n.log.Info("node running", "node_id", n.nodeID, "boot_id", n.bootID, "local_slots", n.cfg.LocalSlots,
		"lease_ttl", t.leaseTTL, "renew_every", t.renew, "safety_margin", t.margin)

	select {
	case <-ctx.Done():
		n.log.Warn("stopping at once: running jobs are cancelled and not posted", "node_id", n.nodeID)
		stopClaims()
		hardStop(errHardStop)
	case <-n.fatalCh:
		stopClaims()
		hardStop(n.fatalErr)
	case <-n.drainCh:
		stopClaims()
		n.log.Info("draining: no new claims; waiting for running jobs", "node_id", n.nodeID, "grace", n.cfg.DrainGrace)
		grace := time.NewTimer(n.cfg.DrainGrace)
		<-claimDone // no job starts (jobsWG.Add) after this but by a result's claim sent before the drain (post)
		idle := make(chan struct{})
		go func() { jobsWG.Wait(); close(idle) }()
		select {
		case <-idle:
		case <-grace.C:
			n.log.Warn("drain grace over: cancelling running jobs", "node_id", n.nodeID)
			stopJobs(errGraceOver)
		case <-ctx.Done():
			hardStop(errHardStop)
		case <-n.fatalCh:
			hardStop(n.fatalErr)
		}
		grace.Stop()
	}
	<-claimDone
	jobsWG.Wait() // executors honour cancellation and clean up before returning
	stopLoops()
	loops.Wait()
	if n.failed() {
		return n.fatalErr
	}
	n.log.Info("node stopped", "node_id", n.nodeID)
	return nil
}

// login reads or obtains the credential and opens the session of this boot.
func (n *Node) login(ctx context.Context) error {
	cred, err := readCredential(n.cfg.CredentialFile)
	if errors.Is(err, errNoCredential) {
		if n.cfg.JoinCode == "" {
			return fmt.Errorf("KECE_CREDENTIAL_FILE %s does not exist and KECE_JOIN_CODE is empty: "+
				"ask an admin for a join code for the first start", n.cfg.CredentialFile)
		}
		j, err := n.cl.join(ctx, n.cfg.JoinCode, n.cfg.Pool)
		if err != nil {
			return fmt.Errorf("join: %w", err)
		}
		cred = Credential{NodeID: j.NodeId, Pool: string(j.Pool), HostGroupID: j.HostGroupId, Secret: j.Credential}
		if err := writeCredential(n.cfg.CredentialFile, cred); err != nil {
			return err
		}
		n.log.Info("joined the control plane; credential stored", "node_id", cred.NodeID, "file", n.cfg.CredentialFile)
	} else if err != nil {
		return err
	} else if n.cfg.JoinCode != "" {
		n.log.Info("credential file exists; the join code is not used", "node_id", cred.NodeID)
	}
	if cred.Pool != n.cfg.Pool {
		return fmt.Errorf("KECE_POOL is %q but the credential in %s belongs to a %q node", n.cfg.Pool, n.cfg.CredentialFile, cred.Pool)
	}
	n.mu.Lock()
	n.cred = cred
	n.mu.Unlock()
	// Written once, before any goroutine that reads them starts.
	n.nodeID = cred.NodeID
	n.execID = ExecutorNodeID(n.cfg.ControlURL, cred.NodeID)
	backoff := n.cfg.RetryBase
	for {
		err := n.openSession(ctx)
		if err == nil {
			return nil
		}
		if !retryable(err) || ctx.Err() != nil {
			return err
		}
		n.log.Warn("opening the session failed; retrying", "err", err)
		if !n.sleep(ctx, n.backoffFor(err, &backoff)) {
			return ctx.Err()
		}
	}
}

func (n *Node) openSession(ctx context.Context) error {
	n.mu.Lock()
	cred := n.cred
	n.mu.Unlock()
	s, err := n.cl.openSession(ctx, cred.Secret, n.bootID)
	if err != nil {
		return err
	}
	if string(s.Pool) != n.cfg.Pool {
		return fmt.Errorf("KECE_POOL is %q but the control plane says node %s serves %q", n.cfg.Pool, s.NodeId, s.Pool)
	}
	t := timing{
		heartbeat: minPositive(n.cfg.HeartbeatInterval, time.Duration(s.HeartbeatIntervalMs)*time.Millisecond),
		renew:     minPositive(n.cfg.RenewInterval, time.Duration(s.RenewIntervalMs)*time.Millisecond),
		claimWait: min(n.cfg.ClaimWait, time.Duration(s.ClaimWaitMaxMs)*time.Millisecond),
		leaseTTL:  time.Duration(s.LeaseTtlMs) * time.Millisecond,
		// A result's claim for the slot it frees (the slot cycle), unless
		// the configuration turns it off.
		resultClaims: s.ResultClaims != nil && *s.ResultClaims && !n.cfg.NoResultClaims,
	}
	// Renew well inside the lease and keep the margin below a quarter of it.
	t.renew = min(t.renew, t.leaseTTL/3)
	t.margin = min(n.cfg.SafetyMargin, t.leaseTTL/4)
	// A job's deadline counts from when its claim was sent, and the server
	// may grant the lease at the end of the long-poll: keep the wait to a
	// quarter of the lease so a claimed job always has most of it left.
	t.claimWait = min(t.claimWait, t.leaseTTL/4)
	n.mu.Lock()
	if n.nodeID != "" && n.nodeID != s.NodeId {
		n.mu.Unlock()
		return fmt.Errorf("the control plane now says this credential is node %s, not %s", s.NodeId, n.nodeID)
	}
	n.epoch, n.timing = s.SessionEpoch, t
	n.desired, n.adminSlots = s.DesiredState, int(s.Slots)
	n.mu.Unlock()
	n.log.Info("session open", "node_id", s.NodeId, "session_epoch", s.SessionEpoch, "desired_state", s.DesiredState, "slots", s.Slots)
	return nil
}

// reopen re-opens the session with the same boot id after SESSION_INVALID,
// once for every caller that saw the same token fail.
func (n *Node) reopen(ctx context.Context, failedToken *string) {
	n.reopenMu.Lock()
	defer n.reopenMu.Unlock()
	if n.cl.token.Load() != failedToken {
		return // someone else reopened already
	}
	if err := n.openSession(ctx); err != nil {
		if fatal(err) {
			n.fail(err)
			return
		}
		n.log.Warn("re-opening the session failed", "err", err)
	}
}

// handleCallError applies the contract's per-status behaviour common to all
// calls. It returns how long to wait before retrying, and false when the
// caller must give up on this request.
func (n *Node) handleCallError(ctx context.Context, err error, token *string, backoff *time.Duration) (time.Duration, bool) {
	switch {
	case fatal(err):
		n.m.authFailures.Add(1)
		n.fail(err)
		return 0, false
	case sessionInvalid(err):
		n.reopen(ctx, token)
		return 0, true
	case retryable(err):
		return n.backoffFor(err, backoff), true
	}
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
		// An unauthenticated answer we cannot repair by reopening the session.
		n.m.authFailures.Add(1)
		n.fail(fmt.Errorf("authentication trouble: %w", err))
		return 0, false
	}
	return 0, false
}

// backoffFor returns the jittered wait before a retry: Retry-After for 429,
// else the doubling backoff.
//
// The doubling backoff (capped at RetryMax, half of it random) applies to
// network errors, timeouts and 5xx alike; a 429 or 503 that carries
// Retry-After is never retried sooner than it says (a database outage
// answers 503 with Retry-After: the fleet waits instead of hammering).
func (n *Node) backoffFor(err error, backoff *time.Duration) time.Duration {
	d := *backoff
	*backoff = min(*backoff*2, n.cfg.RetryMax)
	d = d/2 + jitter(d/2)
	var ae *APIError
	if errors.As(err, &ae) && (ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusServiceUnavailable) && ae.RetryAfter > 0 {
		d = max(d, ae.RetryAfter+jitter(ae.RetryAfter/4))
	}
	return d
}

func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

func minPositive(a, b time.Duration) time.Duration {
	if b <= 0 {
		return a
	}
	return min(a, b)
}

// sleep waits d or until ctx ends; false means ctx ended.
func (n *Node) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ExecutorNodeID is the name a node gives its executor, which labels
// sandbox containers and records temporary databases with it and whose
// janitor removes only what carries it: the node id plus a short hash of the
// control plane's host:port. Node ids are unique within one control plane
// only; the suffix keeps two control planes (staging and production, or
// tests and a demo) that share a Docker host or judge MySQL from cleaning up
// each other's live work. It is stable across restarts as long as
// KECE_CONTROL_URL names the same host:port.
//
// With several replicas the hash covers their sorted host:port list, so
// the order they are listed in does not matter (one URL hashes as before).
func ExecutorNodeID(controlURL, nodeID string) string {
	var hosts []string
	for _, s := range ControlURLs(controlURL) {
		host := s
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			host = u.Host
		}
		hosts = append(hosts, strings.ToLower(host))
	}
	slices.Sort(hosts)
	sum := sha256.Sum256([]byte(strings.Join(hosts, ",")))
	return nodeID + "@" + hex.EncodeToString(sum[:4])
}

// times returns the effective schedule (it changes when a session reopens).
func (n *Node) times() timing {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.timing
}

// slotsLocked is how many jobs the node may run now: min(local, admin).
func (n *Node) slotsLocked() int { return max(min(n.cfg.LocalSlots, n.adminSlots), 0) }

// mayClaimLocked: the node keeps one long-poll open unless it drains itself
// (SIGTERM), is stopping, or a dependency its jobs need is down (Docker or
// the image, the judge database): a job it leased then would only burn an
// attempt, so it leaves the work to healthy nodes until a probe passes. The
// desired state is enforced by the control plane, which hands a node that
// is not ENABLED only the CHECK jobs an admin bound to it (verify works on a
// draining or disabled node, and enable needs a passing check); pool work
// stops at once on DRAINING or DISABLED.
func (n *Node) mayClaimLocked() bool { return !n.draining && !n.depsDown }

// isLive answers the janitor from the node's own view of its leases.
func (n *Node) isLive(jobID string, epoch int64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.jobs[jobKey(jobID, epoch)]
	return ok
}

func (n *Node) heartbeatLoop(ctx context.Context) {
	for {
		n.mu.Lock()
		every := n.timing.heartbeat
		n.mu.Unlock()
		if !n.sleep(ctx, every) {
			return
		}
		n.sendHeartbeat(ctx)
	}
}

// sendHeartbeat reports health and applies the desired state it returns.
func (n *Node) sendHeartbeat(ctx context.Context) {
	n.mu.Lock()
	req := machineapi.HeartbeatRequest{RuntimeVersion: clip(n.cfg.Version+"; "+n.runtime, 255),
		LocalSlots: int32(n.cfg.LocalSlots), SlotsBusy: int32(min(n.busy, contracts.SlotsMax)), Draining: n.draining,
		Dependencies: make([]machineapi.Dependency, 0, len(n.deps))}
	for _, d := range n.deps {
		md := machineapi.Dependency{Name: d.Name, Healthy: d.Healthy}
		if d.Detail != "" {
			s := clip(d.Detail, 1024)
			md.Detail = &s
		}
		req.Dependencies = append(req.Dependencies, md)
	}
	if len(n.languages) > 0 {
		// None before the first probe: the control plane keeps the
		// previous report rather than learning an empty one.
		langs := languageReports(n.languages)
		req.Languages = &langs
	}
	n.mu.Unlock()
	tok := n.cl.token.Load()
	r, err := n.cl.heartbeat(ctx, req)
	if err != nil {
		if ctx.Err() == nil {
			n.m.heartbeatFailures.Add(1)
			n.log.Warn("heartbeat failed", "node_id", n.nodeID, "err", err)
			var b time.Duration
			n.handleCallError(ctx, err, tok, &b)
		}
		return
	}
	n.m.heartbeats.Add(1)
	n.mu.Lock()
	changed := r.DesiredState != n.desired || int(r.Slots) != n.adminSlots
	if changed {
		n.log.Info("desired state from the control plane", "node_id", n.nodeID, "desired_state", r.DesiredState,
			"slots", r.Slots, "config_revision", r.ConfigRevision)
	}
	n.desired, n.adminSlots = r.DesiredState, int(r.Slots)
	n.mu.Unlock()
	if changed {
		n.poke()
	}
}

// depsRecheck is the longest a node whose dependency is down waits between
// probes (HealthInterval if shorter): how soon it claims again once the
// dependency is back.
const depsRecheck = 5 * time.Second

// healthLoop probes every HealthInterval, every depsRecheck while a
// dependency is down, and at once when a job failed on one.
func (n *Node) healthLoop(ctx context.Context) {
	for {
		n.mu.Lock()
		d := n.cfg.HealthInterval
		if n.depsDown {
			d = min(d, depsRecheck)
		}
		n.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-n.probeCh:
			t.Stop()
		case <-t.C:
		}
		n.probe(ctx)
	}
}

// probe runs the backend's health check, bounded, and keeps the answer for
// heartbeats and /healthz; it stops or resumes claiming (mayClaimLocked).
func (n *Node) probe(ctx context.Context) {
	n.mu.Lock()
	gen := n.depsGen
	n.mu.Unlock()
	pctx, cancel := context.WithTimeout(ctx, max(n.cfg.RequestTimeout, 30*time.Second))
	defer cancel()
	h := n.backend.Health(pctx)
	deps := h.Dependencies
	healthy := !slices.ContainsFunc(deps, func(d Dependency) bool { return !d.Healthy })
	n.mu.Lock()
	// A failed probe keeps the last known version: enable compares it with
	// the version the self-check ran with, and a blip must not change it.
	if h.Runtime != "" {
		n.runtime = h.Runtime
	}
	// While a dependency stays down the node probes every few seconds;
	// the warning is logged when what the probe sees changes.
	changed := !slices.Equal(n.deps, deps)
	n.deps = deps
	n.languages = mergeLanguages(n.languages, h.Languages)
	was := n.depsDown
	// A job that failed on a dependency after this probe began keeps the
	// node paused; its own probe is already queued.
	n.depsDown = !healthy || (was && n.depsGen != gen)
	resumed := was && !n.depsDown
	n.mu.Unlock()
	for _, d := range deps {
		if !d.Healthy && changed {
			n.log.Warn("dependency unhealthy; claiming nothing until it is back", "node_id", n.nodeID, "dependency", d.Name, "detail", d.Detail)
		}
	}
	if resumed {
		n.log.Info("dependencies healthy again; claiming resumes", "node_id", n.nodeID)
		n.poke()
	}
}

// dependencyDown pauses claiming after a job failed on a dependency of the
// node (dependencyFault) and asks for a probe now; the probe resumes
// claiming once the dependency answers again.
func (n *Node) dependencyDown(err error) {
	n.mu.Lock()
	n.depsGen++
	was := n.depsDown
	n.depsDown = true
	n.mu.Unlock()
	if !was {
		n.m.dependencyPauses.Add(1)
		n.log.Warn("a job failed on a dependency of this node; claiming nothing until a probe passes", "node_id", n.nodeID, "err", err)
	}
	select {
	case n.probeCh <- struct{}{}:
	default:
	}
}

// languageReports converts the probed reports to the machine contract,
// bounded to its field sizes.
func languageReports(in []LanguageReport) []machineapi.LanguageReport {
	out := make([]machineapi.LanguageReport, 0, min(len(in), 32))
	for _, l := range in[:min(len(in), 32)] {
		out = append(out, machineapi.LanguageReport{Id: l.ID, Pool: machineapi.Pool(l.Pool),
			Standard: clip(l.Standard, 256), Version: clip(l.Version, 256),
			CompileCommand: clip(commandLine(l.CompileCmd), 1024), RunCommand: clip(commandLine(l.RunCmd), 1024),
			EntryPoint: clip(l.EntryRule, 512), ExtraMemoryBytes: l.ExtraMemoryBytes, MinMemoryBytes: l.MinMemoryBytes})
	}
	return out
}

// commandLine renders argv as one line a reader can paste into a POSIX
// shell: arguments with anything but safe characters are single-quoted.
func commandLine(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=+.,/:@%{}") == "" {
			parts[i] = a
			continue
		}
		parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(parts, " ")
}

// mergeLanguages takes the latest language reports but keeps a version the
// latest probe could not learn, as for the runtime version.
func mergeLanguages(old, latest []LanguageReport) []LanguageReport {
	known := make(map[string]string, len(old))
	for _, l := range old {
		known[l.ID] = l.Version
	}
	out := append([]LanguageReport(nil), latest...)
	for i := range out {
		if out[i].Version == "" {
			out[i].Version = known[out[i].ID]
		}
	}
	return out
}

func (n *Node) janitorLoop(ctx context.Context) {
	for n.sleep(ctx, n.cfg.JanitorInterval) {
		if err := n.backend.Janitor(ctx, n.isLive); err != nil && ctx.Err() == nil {
			n.log.Warn("janitor failed", "node_id", n.nodeID, "err", err)
		}
	}
}

// claimLoop keeps at most one long-poll claim in flight, asking for the free
// slots, and starts the jobs it gets. Each claim carries a request id that a
// retry after a failed answer sends again, so the control plane answers the
// leases it granted to the lost answer instead of new ones; the id changes
// after every answer received.
func (n *Node) claimLoop(ctx context.Context) {
	backoff := n.cfg.RetryBase
	requestID, retrying := newClaimRequestID(), false
	for {
		n.mu.Lock()
		free := min(n.slotsLocked()-n.busy, contracts.BatchMax)
		may := n.mayClaimLocked() && !n.failed()
		wait := n.timing.claimWait
		n.mu.Unlock()
		if free <= 0 || !may {
			select {
			case <-n.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		tok := n.cl.token.Load()
		sent := time.Now()
		if retrying {
			n.m.claimRetries.Add(1)
		}
		jobs, err := n.cl.claim(ctx, free, wait, requestID)
		rtt := time.Since(sent).Seconds()
		switch {
		case err != nil && ctx.Err() == nil:
			n.prom.claimRTT.WithLabelValues("error").Observe(rtt)
		case err == nil && len(jobs) > 0:
			n.prom.claimRTT.WithLabelValues("jobs").Observe(rtt)
		case err == nil:
			n.prom.claimRTT.WithLabelValues("empty").Observe(rtt)
		}
		if ctx.Err() != nil {
			if len(jobs) > 0 {
				n.log.Warn("claim answer arrived after the node stopped claiming; giving its leases back",
					"node_id", n.nodeID, "jobs", len(jobs))
				n.releaseUnrun(jobs, n.stopReason())
			}
			return
		}
		if err != nil {
			n.m.claimFailures.Add(1)
			n.log.Warn("claim failed; retrying with the same request id", "node_id", n.nodeID, "err", err)
			retrying = true
			d, ok := n.handleCallError(ctx, err, tok, &backoff)
			if !ok && n.failed() {
				return
			}
			if !ok {
				d = n.backoffFor(err, &backoff) // a refused request: do not hammer
			}
			if !n.sleep(ctx, d) {
				return
			}
			continue
		}
		requestID, retrying = newClaimRequestID(), false
		backoff = n.cfg.RetryBase
		n.m.claims.Add(1)
		if len(jobs) == 0 {
			// Jitter so that a fleet does not poll in lockstep.
			n.sleep(ctx, jitter(wait/20+time.Millisecond))
			continue
		}
		n.startOrGiveBack(jobs, sent, "claimed jobs", nil, nil)
	}
}

// startOrGiveBack starts jobs just leased (sent: when the call that leased
// them was sent) — or, when the node decided to stop while that call was
// in flight, does not run what it did not plan to: it gives the leases back
// so the jobs run elsewhere now, their attempts not counted. what names the
// jobs in the log; count (if any) counts the jobs that start; from (if any)
// is the finished job whose slot the first of them takes over.
func (n *Node) startOrGiveBack(jobs []machineapi.ClaimedJob, sent time.Time, what string, count *atomic.Int64, from *job) {
	n.mu.Lock()
	reason, stop := n.notRunningLocked()
	n.mu.Unlock()
	if stop {
		n.log.Warn(what+" not started; giving their leases back", "node_id", n.nodeID, "jobs", len(jobs), "reason", reason)
		n.releaseUnrun(jobs, reason)
		return
	}
	if count != nil {
		count.Add(int64(len(jobs)))
	}
	for _, cj := range jobs {
		n.start(n.cycle.jobs, n.cycle.hard, n.cycle.wg, cj, sent, from)
	}
}

// newClaimRequestID is a fresh random claim request id.
func newClaimRequestID() string {
	var b [12]byte
	_, _ = crand.Read(b[:]) // never fails (crypto/rand)
	return "claim-" + hex.EncodeToString(b[:])
}

// notRunningLocked says whether the node runs no new job now and why, as
// the release reason of the leases it gives back: it drains, it stops (a
// final refusal, or it stopped claiming), or a dependency is down.
func (n *Node) notRunningLocked() (machineapi.ReleaseReason, bool) {
	switch {
	case n.draining:
		return machineapi.ReleaseReasonDraining, true
	case n.failed() || n.cycle.claim.Err() != nil:
		return machineapi.ReleaseReasonShuttingDown, true
	case n.depsDown:
		return machineapi.ReleaseReasonDependencyDown, true
	}
	return "", false
}

// stopReason is the release reason of a node that stopped claiming.
func (n *Node) stopReason() machineapi.ReleaseReason {
	n.mu.Lock()
	defer n.mu.Unlock()
	if r, ok := n.notRunningLocked(); ok {
		return r
	}
	return machineapi.ReleaseReasonShuttingDown
}

// releaseUnrun gives back leases this process will not run.
func (n *Node) releaseUnrun(jobs []machineapi.ClaimedJob, reason machineapi.ReleaseReason) {
	leases := make([]machineapi.LeaseRef, len(jobs))
	for i, j := range jobs {
		leases[i] = machineapi.LeaseRef{JobId: j.JobId, LeaseEpoch: j.LeaseEpoch}
	}
	n.releaseLeases(leases, reason)
}

// releaseLeases gives leases back, retrying network errors and 5xx for a few
// seconds on a context of its own: it runs when the node stops, after its
// other contexts ended. A release that never arrives costs only the wait
// for the leases to run out (or for this node's next boot to take them back).
func (n *Node) releaseLeases(leases []machineapi.LeaseRef, reason machineapi.ReleaseReason) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseBudget)
	defer cancel()
	backoff := n.cfg.RetryBase
	for {
		tok := n.cl.token.Load()
		answers, err := n.cl.release(ctx, machineapi.ReleaseRequest{Leases: leases, Reason: reason})
		if err == nil {
			for _, a := range answers {
				if a.State == machineapi.ReleaseStateReleased {
					n.m.leasesReleased.Add(1)
				}
				n.log.Info("lease given back", "node_id", n.nodeID, "job_id", a.JobId, "lease_epoch", a.LeaseEpoch,
					"reason", reason, "state", a.State)
			}
			return
		}
		if ctx.Err() != nil {
			n.log.Warn("leases not given back; they will run out", "node_id", n.nodeID, "leases", len(leases), "err", err)
			return
		}
		d, ok := n.handleCallError(ctx, err, tok, &backoff)
		if !ok || !n.sleep(ctx, d) {
			n.log.Warn("leases not given back; they will run out", "node_id", n.nodeID, "leases", len(leases), "err", err)
			return
		}
	}
}

// releaseBudget bounds how long a node tries to give leases back.
const releaseBudget = 5 * time.Second

// Status is what /healthz shows: identity, pool, runtime and the languages
// served, dependency health, slots and draining — nothing else.
type Status struct {
	ProtocolVersion int          `json:"protocolVersion"`
	NodeID          string       `json:"nodeId"`
	Pool            string       `json:"pool"`
	Runtime         string       `json:"runtime"`
	Dependencies    []Dependency `json:"dependencies"`
	// Languages are the ids the node serves, as its last probe saw them.
	Languages  []LanguageReport `json:"languages"`
	SlotsBusy  int              `json:"slotsBusy"`
	SlotsTotal int              `json:"slotsTotal"`
	Draining   bool             `json:"draining"`
	// DependencyPaused: a dependency is down (last probe, or a job failed
	// on one since), so the node claims nothing until a probe passes.
	DependencyPaused bool `json:"dependencyPaused"`
}

// Status returns the node's current status.
func (n *Node) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	deps := append([]Dependency{}, n.deps...)
	langs := append([]LanguageReport{}, n.languages...)
	return Status{ProtocolVersion: contracts.ProtocolVersion, NodeID: n.nodeID, Pool: n.cfg.Pool, Runtime: n.runtime,
		Dependencies: deps, Languages: langs, SlotsBusy: n.busy, SlotsTotal: n.slotsLocked(),
		Draining:         n.draining || n.desired == machineapi.DesiredStateDraining || n.desired == machineapi.DesiredStateDisabled,
		DependencyPaused: n.depsDown}
}
