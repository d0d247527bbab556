package worker

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
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
	features   []string         // problem types the executor judges, from the last probe
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
	// resultPhases: it takes a result's phases (the job's timings).
	resultPhases bool
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
	// A programming error, not a setting: Validate reports only what an
	// operator can fix, so a pool whose executor could not be built (its
	// own error already named the setting) is not also called miswired.
	if cfg.NewBackend == nil {
		return nil, fmt.Errorf("worker: no executor for pool %q (internal wiring error)", cfg.Pool)
	}
	cfg.setDefaults()
	cl, err := newClient(ControlURLs(cfg.ControlURL), cfg.RequestTimeout)
	if err != nil {
		return nil, err
	}
	cl.claimSlack, cl.liveEvery = cfg.ClaimSlack, cfg.LivenessInterval
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
	if drained, err := n.sessionOrDrain(ctx); drained || err != nil {
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
	stopServing, err := n.serveHealth()
	if err != nil {
		return err
	}
	defer stopServing()
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
	if p, ok := n.backend.(prewarmer); ok {
		// Sandboxes wait only while the node claims: a drain or a stop
		// removes the waiting ones (running jobs keep theirs).
		loops.Go(func() { p.Prewarm(claimCtx) })
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

// sessionOrDrain opens the node's session. A drain (SIGTERM) while the
// control plane is still unreachable ends the retries: there is nothing to
// finish yet, so drained is true and Run returns nil.
func (n *Node) sessionOrDrain(ctx context.Context) (drained bool, err error) {
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
				return true, nil
			}
		default:
		}
		return false, err
	}
	return false, nil
}

// serveHealth serves /healthz and /metrics on KECE_LISTEN (nothing when it
// is empty) and returns what stops it.
func (n *Node) serveHealth() (stop func(), err error) {
	if n.cfg.Listen == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", n.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("KECE_LISTEN %s: %w", n.cfg.Listen, err)
	}
	n.mu.Lock()
	n.listenAddr = ln.Addr().String()
	n.mu.Unlock()
	// Bounded like every control listener: headers in time and size, and
	// idle connections; the handlers read no bodies.
	srv := &http.Server{Handler: n.Handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
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

// Status is what /healthz shows: identity, pool, runtime and the languages
// served, dependency health, slots and draining — nothing else.
type Status struct {
	ProtocolVersion int          `json:"protocolVersion"`
	NodeID          string       `json:"nodeId"`
	Pool            string       `json:"pool"`
	Runtime         string       `json:"runtime"`
	Dependencies    []Dependency `json:"dependencies"`
	// Languages are the ids the node serves, as its last probe saw them.
	Languages []LanguageReport `json:"languages"`
	// Features are the problem types the node's executor judges, as it
	// reports them in heartbeats.
	Features   []string `json:"features"`
	SlotsBusy  int      `json:"slotsBusy"`
	SlotsTotal int      `json:"slotsTotal"`
	Draining   bool     `json:"draining"`
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
		Dependencies: deps, Languages: langs, Features: slices.Clone(n.features), SlotsBusy: n.busy, SlotsTotal: n.slotsLocked(),
		Draining:         n.draining || n.desired == machineapi.DesiredStateDraining || n.desired == machineapi.DesiredStateDisabled,
		DependencyPaused: n.depsDown}
}
