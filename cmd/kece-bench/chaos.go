package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/kece-oj/kece/cmd/internal/problems"
	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/internal/loopback"
	"github.com/kece-oj/kece/internal/sockproxy"
	"github.com/kece-oj/kece/worker/faultproxy"
)

// Fault kinds of the chaos schedule.
const (
	faultNodeKill      = "node_kill"      // SIGKILL a kece-node, start it again (new boot, same credential)
	faultNodeRestart   = "node_restart"   // SIGTERM (drain) a kece-node, start it again
	faultReplicaKill   = "replica_kill"   // SIGKILL a kece-control replica, start it again on its address
	faultReplicaFreeze = "replica_freeze" // SIGSTOP a replica for a few seconds, then SIGCONT
	faultDBRestart     = "db_restart"     // SIGKILL the control MariaDB, start it again (crash recovery)
	faultDropAnswers   = "drop_answers"   // the fault proxy cuts the answers of a few claim/renew/result calls
	faultDelayAnswers  = "delay_answers"  // the fault proxy holds a few answers back for seconds
	faultDockerDown    = "docker_down"    // a code node's Docker daemon goes away for seconds (its socket proxy is cut)
	faultLateClaims    = "late_claims"    // the fault proxy holds a few claims back and sends them on after their node gave up
	faultGaleraKill    = "galera_kill"    // SIGKILL the Galera node the writers use (the -galera run)
)

var chaosFaultKinds = []string{faultNodeKill, faultNodeRestart, faultReplicaKill, faultReplicaFreeze, faultDBRestart,
	faultDropAnswers, faultDelayAnswers, faultDockerDown, faultLateClaims}

// runChaos is the fault run an operator would do, as a command: its own
// MariaDB (restartable), two kece-control replicas, a fault proxy in front
// of each, kece-node processes of two pools, and a business client that
// enqueues through the API and consumes settlement events; a seeded,
// bounded schedule of faults; then the invariants, from the client's view
// and the database's, and `kece-control reconcile`.
//
// With -galera it runs on the 3-node cluster of scripts/galera.sh instead:
// the replicas write through a failover connection to different cluster
// nodes and the one fault is killing the node the writers use.
func runChaos(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	var c chaosConfig
	fs.Int64Var(&c.seed, "seed", 1, "seed of the fault schedule and the submission mix")
	fs.DurationVar(&c.duration, "duration", 90*time.Second, "fault phase: faults start after -warmup and end before this")
	fs.DurationVar(&c.warmup, "warmup", 10*time.Second, "load without faults before the first fault")
	fs.DurationVar(&c.tail, "tail", 20*time.Second, "load without faults after the last fault (recovery is measured here)")
	fs.DurationVar(&c.every, "fault-every", 6*time.Second, "mean time between the start of one fault and the next (jittered ±50%)")
	fs.DurationVar(&c.settle, "settle", 3*time.Minute, "after the load stops, how long every submission may take to settle before it counts as stuck")
	fs.Float64Var(&c.rate, "rate", 3, "submissions per second enqueued by the business client")
	fs.StringVar(&c.pools, "pools", "mysql,python", "two pools (or one) whose nodes judge; mysql needs no Docker, code pools need Docker and the runtime images")
	fs.IntVar(&c.nodesPerPool, "nodes", 2, "kece-node processes per pool")
	fs.IntVar(&c.slots, "slots", 2, "slots per node")
	fs.IntVar(&c.inFlight, "in-flight", 0, "most unsettled submissions per pool the client keeps (default 3 × the pool's slots)")
	fs.StringVar(&c.faults, "faults", strings.Join(chaosFaultKinds, ","), "fault kinds to schedule (comma list)")
	fs.DurationVar(&c.lease, "lease", 0, "replicas' lease TTL (default 8s; 60s with -node-timings default)")
	fs.StringVar(&c.timings, "node-timings", "short", "short (heartbeat 1s, renew lease/4, claim wait lease/4) or default "+
		"(the shipped timings: heartbeat 10s, renew 15s, claim wait 15s, lease 60s)")
	fs.DurationVar(&c.reap, "reap", time.Second, "replicas' reap interval")
	fs.IntVar(&c.maxAttempts, "max-attempts", store.MaxAttemptsDefault, "replicas' max attempts")
	fs.StringVar(&c.bin, "bin", "", "directory with kece-control, kece-node, kece-sandbox-init (default: next to kece-bench, or ./bin)")
	fs.StringVar(&c.judgeDSN, "judge-dsn", "", "judge MySQL admin DSN for the mysql pool (default: a private MariaDB the run starts)")
	fs.StringVar(&c.galera, "galera", "", "run on the Galera cluster of this script (scripts/galera.sh, started) instead of a private MariaDB")
	fs.StringVar(&c.writers, "writers", "multi", "with -galera: multi (replica A writes to node 1, B to node 2) or single (both to node 1)")
	fs.StringVar(&c.urlList, "node-url-list", "auto", "give each node both replicas in KECE_CONTROL_URL: on, off, or auto (the same as on)")
	fs.DurationVar(&c.longFreeze, "long-freeze", 0, "length of the scheduled freezes of the replica most nodes use (default 12s for runs under 5m, else 40s)")
	fs.IntVar(&c.longFreezes, "long-freezes", -1, "how many long freezes the fault phase schedules (default one per 150s, at least 1; 0: none)")
	fs.BoolVar(&c.keep, "keep", false, "keep the work directory (logs, data) after the run")
	if err := settings.ParseWithEnv(fs, "KECE_BENCH_CHAOS_", args, os.Getenv); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	// The driver logs every connection the faults break; the run counts
	// what matters itself.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	// Two streams, so the fault sequence (kinds, targets, durations) is the
	// same for a seed however the submissions interleave with it.
	r := &chaosRun{cfg: c, rng: rand.New(rand.NewPCG(uint64(c.seed), 0x6b656365)),
		faultRng: rand.New(rand.NewPCG(uint64(c.seed), 0x6661756c74)), subs: map[string]*chaosSub{},
		faultCount: map[string]int{}}
	defer r.cleanup()
	if err := r.setup(ctx); err != nil {
		return err
	}
	ok, err := r.run(ctx)
	if err != nil {
		return err
	}
	if !ok {
		r.cfg.keep = true // the deferred cleanup leaves the evidence
		return errors.New("targets missed: lost, duplicated, stuck, wrong, reconcile_violations, attempts_spent_in_freezes, leases_dropped_fresh and stale_claim_leases must all be 0 " +
			"and fleet_claim_stall_max_s at most 3 (logs kept in " + r.f.work + ")")
	}
	return nil
}

type chaosConfig struct {
	seed                                       int64
	duration, warmup, tail, every, settle      time.Duration
	rate                                       float64
	pools, faults, bin, judgeDSN, galera       string
	writers, urlList, timings                  string
	nodesPerPool, slots, maxAttempts, inFlight int
	lease, reap                                time.Duration
	longFreeze                                 time.Duration
	longFreezes                                int
	keep                                       bool
	poolList, faultList                        []string
}

func (c *chaosConfig) validate() error {
	var errs []error
	for _, p := range strings.Split(c.pools, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if _, ok := benchPrograms[p]; !ok {
			errs = append(errs, fmt.Errorf("-pools: unknown pool %q (want cpp, java, python, arkts, mysql)", p))
		}
		c.poolList = append(c.poolList, p)
	}
	if len(c.poolList) == 0 || len(c.poolList) > 2 {
		errs = append(errs, fmt.Errorf("-pools: want one or two pools, got %q", c.pools))
	}
	if c.galera != "" {
		c.faultList = []string{faultGaleraKill}
		if c.writers != "multi" && c.writers != "single" {
			errs = append(errs, fmt.Errorf("-writers must be multi or single, got %q", c.writers))
		}
	} else {
		for _, k := range strings.Split(c.faults, ",") {
			if k = strings.TrimSpace(k); k == "" {
				continue
			}
			if !slices.Contains(chaosFaultKinds, k) {
				errs = append(errs, fmt.Errorf("-faults: unknown kind %q (want some of %s)", k, strings.Join(chaosFaultKinds, ",")))
			}
			c.faultList = append(c.faultList, k)
		}
	}
	if c.urlList != "auto" && c.urlList != "on" && c.urlList != "off" {
		errs = append(errs, fmt.Errorf("-node-url-list must be auto, on or off, got %q", c.urlList))
	}
	if c.duration <= c.warmup {
		errs = append(errs, fmt.Errorf("-duration %s must exceed -warmup %s", c.duration, c.warmup))
	}
	if c.rate <= 0 || c.rate > 200 {
		errs = append(errs, fmt.Errorf("-rate %g must be in (0, 200]", c.rate))
	}
	if c.nodesPerPool < 1 || c.slots < 1 {
		errs = append(errs, errors.New("-nodes and -slots must be at least 1"))
	}
	if c.inFlight == 0 {
		c.inFlight = 3 * c.nodesPerPool * c.slots
	}
	if c.every < time.Second {
		errs = append(errs, errors.New("-fault-every must be at least 1s"))
	}
	if c.longFreeze == 0 {
		c.longFreeze = 40 * time.Second
		if c.duration < 5*time.Minute {
			c.longFreeze = 12 * time.Second
		}
	}
	if c.longFreezes < 0 {
		c.longFreezes = max(1, int(c.duration/(150*time.Second)))
	}
	if c.galera != "" {
		c.longFreezes = 0
	}
	if c.longFreeze < time.Second {
		errs = append(errs, fmt.Errorf("-long-freeze %s must be at least 1s", c.longFreeze))
	}
	switch c.timings {
	case "short":
		c.lease = cmp.Or(c.lease, 8*time.Second)
	case "default":
		c.lease = cmp.Or(c.lease, store.LeaseTTLDefault)
	default:
		errs = append(errs, fmt.Errorf("-node-timings must be short or default, got %q", c.timings))
	}
	if c.lease < 3*time.Second {
		errs = append(errs, errors.New("-lease must be at least 3s (renews run every lease/4)"))
	}
	return errors.Join(errs...)
}

// replicaTimings are the replicas' flags of -node-timings: short ones
// (heartbeat 1 s, renew lease/4; the claim wait follows the lease down), or
// none (the shipped defaults the nodes then get in their session).
func (c *chaosConfig) replicaTimings() []string {
	if c.timings == "default" {
		return nil
	}
	return []string{"--renew-interval", (c.lease / 4).String(), "--heartbeat-interval", "1s", "--offline-after", "5s"}
}

// nodeTimings are the nodes' flags of -node-timings.
func (c *chaosConfig) nodeTimings() []string {
	if c.timings == "default" {
		return nil
	}
	return []string{"--heartbeat-interval", "1s"}
}

// chaosSub is one submission as the business client sees it.
type chaosSub struct {
	id, pool, want string // want: the verdict the program deserves
	enqueuedAt     time.Time
	accepted       bool
	settledAt      time.Time
	status         string
	events         map[string]int // event id → deliveries received
}

// chaosReplica is one kece-control process, its fault proxy and its
// metrics, restarted on the same address after a kill.
type chaosReplica struct {
	name, addr string
	args       []string
	proc       *child
	proxy      *faultproxy.Proxy
	starts     int
	retryBase  float64 // tx retries counted by earlier processes of this replica
	retryLast  float64
	mu         sync.Mutex
}

type chaosNode struct {
	*benchNode
	base    string // log name without the restart count
	env     []string
	starts  int
	planned bool // the run is stopping this process (r.mu)
	// docker is the code node's way to the Docker daemon, which the
	// docker_down fault cuts (nil for the mysql pool); dockerDir holds its
	// socket.
	docker    *sockproxy.Proxy
	dockerDir string
}

// closeDocker cuts a code node's way to the Docker daemon for good and
// removes its socket's directory (nothing for the mysql pool).
func (n *chaosNode) closeDocker() {
	if n.docker != nil {
		n.docker.Cut()
		_ = os.RemoveAll(n.dockerDir)
	}
}

type chaosRun struct {
	cfg      chaosConfig
	rng      *rand.Rand // submission mix (r.mu)
	faultRng *rand.Rand // fault schedule (r.mu)
	f        *fleet

	controlDB *mariaInstance // nil with -galera
	judgeDB   *mariaInstance
	galera    *galeraCluster
	dbProxies []*tcpFailover
	replicas  []*chaosReplica
	nodes     []*chaosNode
	biz       []*businessapi.ClientWithResponses
	bizPref   atomic.Int32 // the replica that accepted the last submission
	manifests map[string]string
	urlList   bool // kece-node accepts several control URLs

	mu             sync.Mutex
	subs           map[string]*chaosSub
	order          []*chaosSub
	deliveries     int
	faultCount     map[string]int
	lastFaultEnd   time.Time
	galeraRejoin   string
	unplannedExits int
	enqueueErrors  int
	freeze         freezeStats
	bursts         int
}

func (r *chaosRun) setup(ctx context.Context) error {
	bin, err := binDir(r.cfg.bin)
	if err != nil {
		return err
	}
	r.f = &fleet{bin: bin}
	if r.f.work, err = os.MkdirTemp("", "kece-chaos-"); err != nil {
		return err
	}
	if slices.Contains(r.cfg.poolList, string(machineapi.PoolMysql)) && r.cfg.judgeDSN == "" {
		if r.judgeDB, err = newMaria(ctx, r.f.work, "judge"); err != nil {
			return err
		}
		if err := r.judgeDB.start(ctx); err != nil {
			return err
		}
		r.cfg.judgeDSN = r.judgeDB.serverDSN()
	}
	r.f.judgeDSN = r.cfg.judgeDSN
	serverDSN, replicaDSNServer, err := r.controlDatabase(ctx)
	if err != nil {
		return err
	}
	if r.f.db, r.f.dsn, r.f.drop, err = freshDatabase(ctx, serverDSN, 8); err != nil {
		return err
	}
	if r.f.st, err = store.New(r.f.db, store.Config{}); err != nil {
		return err
	}
	if r.f.bizToken, err = r.f.st.Tokens().IssueToken(ctx, benchToken("chaos")); err != nil {
		return err
	}
	benchCfg, err := mysql.ParseDSN(r.f.dsn)
	if err != nil {
		return err
	}
	for i, name := range []string{"A", "B"} {
		addr, err := loopback.FreeAddr()
		if err != nil {
			return err
		}
		rc, err := mysql.ParseDSN(replicaDSNServer[i])
		if err != nil {
			return err
		}
		rc.DBName = benchCfg.DBName
		dsn := rc.FormatDSN()
		rep := &chaosReplica{name: "control-" + name, addr: addr,
			args: append([]string{"serve", "--listen", addr, "--artifact-dir", filepath.Join(r.f.work, "artifacts"),
				"--mysql-dsn", dsn, "--log-level", "warn", "--lease-ttl", r.cfg.lease.String(),
				"--reap-interval", r.cfg.reap.String(), "--max-attempts", strconv.Itoa(r.cfg.maxAttempts),
				"--db-conns", "16"}, r.cfg.replicaTimings()...)}
		if err := r.startReplica(ctx, rep); err != nil {
			return err
		}
		rep.proxy = faultproxy.New("http://" + addr)
		// As a load balancer does: a request whose node gave up (a
		// deadline, a move to the other replica) still runs to its end,
		// so stale copies of claims reach the replica late.
		rep.proxy.KeepAbandoned(true)
		r.replicas = append(r.replicas, rep)
		cl, err := businessapi.NewClientWithResponses("http://"+addr, businessapi.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+r.f.bizToken)
			return nil
		}))
		if err != nil {
			return err
		}
		r.biz = append(r.biz, cl)
	}
	r.f.biz = r.biz[0]
	// kece-node takes a comma list of replicas (worker.Config.ControlURLs);
	// "auto" is kept for scripts that pass it and means on.
	r.urlList = r.cfg.urlList != "off"
	r.manifests = map[string]string{}
	for _, p := range r.cfg.poolList {
		var id string
		if p == string(machineapi.PoolMysql) {
			id, err = r.f.publishSQL(ctx)
		} else {
			id, err = r.publishAPlusB(ctx)
		}
		if err != nil {
			return err
		}
		r.manifests[p] = id
		for range r.cfg.nodesPerPool {
			if err := r.addNode(ctx, p); err != nil {
				return err
			}
		}
	}
	return r.f.waitReady(ctx, 90*time.Second)
}

// controlDatabase starts the control database — a private server, or the
// Galera cluster through one failover connection per writer — and returns
// the bench's server DSN and each replica's.
func (r *chaosRun) controlDatabase(ctx context.Context) (serverDSN string, replicaDSNServer []string, err error) {
	replicaDSNServer = make([]string, 2)
	if r.cfg.galera != "" {
		if r.galera, err = openGalera(ctx, r.cfg.galera); err != nil {
			return "", nil, err
		}
		a := r.galera.addrs
		orders := [][]string{{a[0], a[1], a[2]}, {a[1], a[2], a[0]}}
		if r.cfg.writers == "single" {
			orders[1] = orders[0]
		}
		// The bench's own connection (setup and the final checks) prefers
		// node 3, which is never killed.
		orders = append(orders, []string{a[2], a[1], a[0]})
		for _, o := range orders {
			p, err := newTCPFailover(o)
			if err != nil {
				return "", nil, err
			}
			r.dbProxies = append(r.dbProxies, p)
		}
		for i := range 2 {
			replicaDSNServer[i] = "root@tcp(" + r.dbProxies[i].addr() + ")/"
		}
		serverDSN = "root@tcp(" + r.dbProxies[2].addr() + ")/"
	} else {
		if r.controlDB, err = newMaria(ctx, r.f.work, "control"); err != nil {
			return "", nil, err
		}
		if err := r.controlDB.start(ctx); err != nil {
			return "", nil, err
		}
		serverDSN = r.controlDB.serverDSN()
		replicaDSNServer[0], replicaDSNServer[1] = serverDSN, serverDSN
	}
	return serverDSN, replicaDSNServer, nil
}

// publishAPlusB publishes the a+b problem with a 5 s CPU limit: the wall
// limit (2 × CPU + 1 s) of the usual 1 s would turn a+b into TLE on a
// machine as loaded as CI's, and timing verdicts are the timing bench's
// subject, not this run's.
func (r *chaosRun) publishAPlusB(ctx context.Context) (string, error) {
	m, err := problems.APlusB(ctx, r.f.biz)
	if err != nil {
		return "", err
	}
	m.Limits.TimeMs = 5000
	return r.f.publish(ctx, m, "a+b")
}

func (r *chaosRun) startReplica(ctx context.Context, rep *chaosReplica) error {
	rep.starts++
	c, err := r.f.spawn(fmt.Sprintf("%s.%d", rep.name, rep.starts), filepath.Join(r.f.bin, "kece-control"), rep.args, nil)
	if err != nil {
		return err
	}
	rep.proc = c
	if err := loopback.WaitHTTPWithin(ctx, "http://"+rep.addr+"/healthz", 60*time.Second); err != nil {
		return fmt.Errorf("%s did not come up (log %s): %w", rep.name, r.f.logPath(c.name), err)
	}
	return nil
}

// addNode registers a host and an enabled node (fleet.registerNode) and
// starts its process behind the fault proxies.
func (r *chaosRun) addNode(ctx context.Context, pool string) error {
	i := len(r.nodes)
	name := fmt.Sprintf("%s-%d", pool, i+1)
	// Half the nodes start on each replica's proxy; with URL lists each
	// node also knows the other replica.
	a, b := r.replicas[i%2].proxy.URL(), r.replicas[(i+1)%2].proxy.URL()
	url := a
	if r.urlList {
		url = a + "," + b
	}
	n, err := r.f.registerNode(ctx, name, pool, r.cfg.slots, url, r.cfg.judgeDSN, "chaos")
	if err != nil {
		return err
	}
	cn := &chaosNode{benchNode: &benchNode{pool: pool, id: n.id, slots: r.cfg.slots, metrics: "http://" + n.listen + "/metrics"},
		base: "node-" + name, env: n.env}
	if pool != string(machineapi.PoolMysql) {
		// Short: a unix socket path has at most 107 bytes.
		dir, err := os.MkdirTemp("", "kcd")
		if err != nil {
			return err
		}
		cn.docker, cn.dockerDir = sockproxy.Docker(dir), dir
		if err := cn.docker.Up(); err != nil {
			os.RemoveAll(dir)
			return fmt.Errorf("docker proxy for %s: %w", name, err)
		}
		cn.env = append(cn.env, "KECE_DOCKER_HOST="+cn.docker.Host())
	}
	if err := r.startNode(cn); err != nil {
		cn.closeDocker()
		return err
	}
	r.nodes = append(r.nodes, cn)
	r.f.nodes = append(r.f.nodes, cn.benchNode)
	return nil
}

func (r *chaosRun) startNode(n *chaosNode) error {
	n.starts++
	c, err := r.f.spawn(fmt.Sprintf("%s.%d", n.base, n.starts), filepath.Join(r.f.bin, "kece-node"), r.cfg.nodeTimings(), n.env)
	if err != nil {
		return err
	}
	n.child = c
	r.mu.Lock()
	n.planned = false
	r.mu.Unlock()
	go func() {
		<-c.exited
		r.mu.Lock()
		defer r.mu.Unlock()
		if !n.planned {
			// A node that ends by itself (exit 3: refused for good, or a
			// crash) is a finding, whatever the jobs' fate.
			r.unplannedExits++
			fmt.Fprintf(os.Stderr, "chaos: %s exited by itself (%s; log %s)\n", c.name, c.cmd.ProcessState, r.f.logPath(c.name))
		}
	}()
	return nil
}

// stopping marks n's current process as ended by the run.
func (r *chaosRun) stopping(n *chaosNode) {
	r.mu.Lock()
	n.planned = true
	r.mu.Unlock()
}

func (r *chaosRun) cleanup() {
	for _, n := range r.nodes {
		r.stopping(n)
		if n.child != nil {
			_ = n.cmd.Process.Signal(syscall.SIGCONT)
			stopChild(n.child)
		}
		n.closeDocker()
	}
	for _, rep := range r.replicas {
		if rep.proc != nil {
			_ = rep.proc.cmd.Process.Signal(syscall.SIGCONT)
			stopChild(rep.proc)
		}
		if rep.proxy != nil {
			rep.proxy.Close()
		}
	}
	if r.f != nil && r.f.drop != nil && !r.cfg.keep {
		r.f.drop()
	} else if r.f != nil && r.f.db != nil {
		r.f.db.Close()
	}
	for _, p := range r.dbProxies {
		p.close()
	}
	if r.controlDB != nil {
		r.controlDB.stop()
	}
	if r.judgeDB != nil {
		r.judgeDB.stop()
	}
	if r.f != nil && r.f.work != "" && !r.cfg.keep {
		_ = os.RemoveAll(r.f.work)
	}
}

// run drives load, faults and the final checks; ok says the targets held.
func (r *chaosRun) run(ctx context.Context) (bool, error) {
	start := time.Now()
	loadCtx, stopLoad := context.WithCancel(ctx)
	consumeCtx, stopConsume := context.WithCancel(ctx)
	defer stopConsume()
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); r.sampleSessions(consumeCtx) }()
	go func() { defer wg.Done(); r.enqueueLoop(loadCtx) }()
	go func() { defer wg.Done(); r.consumeLoop(consumeCtx) }()
	go func() { defer wg.Done(); r.scrapeLoop(consumeCtx) }()

	faultErr := r.faultSchedule(ctx, start)
	if faultErr != nil {
		stopLoad()
		stopConsume()
		wg.Wait()
		return false, faultErr
	}
	// Tail: load goes on without faults; recovery is measured in it.
	r.mu.Lock()
	tailEnd := r.lastFaultEnd.Add(r.cfg.tail)
	r.mu.Unlock()
	if d := time.Until(tailEnd); d > 0 {
		sleepCtx(ctx, d)
	}
	stopLoad()
	settleStart := time.Now()
	for time.Since(settleStart) < r.cfg.settle && ctx.Err() == nil {
		if r.unsettled() == 0 {
			break
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
	// A few more seconds so redeliveries of late acks are seen.
	sleepCtx(ctx, 2*time.Second)
	stopConsume()
	wg.Wait()
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	wall := time.Since(start)
	if r.galera != nil {
		// Put the killed node back: it rejoins by IST (or SST) while the
		// cluster serves, as an operator would after the incident.
		t := time.Now()
		if err := r.galera.run(ctx, "restart", 1); err != nil {
			return false, err
		}
		n, err := clusterSize(ctx, r.galera.addrs[0])
		if err != nil {
			return false, err
		}
		r.galeraRejoin = fmt.Sprintf("galera_rejoin_s=%.1f galera_cluster_size=%d", time.Since(t).Seconds(), n)
	}
	return r.report(ctx, wall)
}
