package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/kece-oj/kece/cmd/internal/problems"
	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/internal/sockproxy"
	"github.com/kece-oj/kece/telemetry"
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
	faultGaleraKill    = "galera_kill"    // SIGKILL the Galera node the writers use (the -galera run)
)

var chaosFaultKinds = []string{faultNodeKill, faultNodeRestart, faultReplicaKill, faultReplicaFreeze, faultDBRestart,
	faultDropAnswers, faultDelayAnswers, faultDockerDown}

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
	fs.DurationVar(&c.lease, "lease", 8*time.Second, "replicas' lease TTL")
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
		return errors.New("targets missed: lost, duplicated, stuck, wrong, reconcile_violations, attempts_spent_in_freezes and leases_dropped_fresh must all be 0 " +
			"and fleet_claim_stall_max_s at most 3 (logs kept in " + r.f.work + ")")
	}
	return nil
}

type chaosConfig struct {
	seed                                       int64
	duration, warmup, tail, every, settle      time.Duration
	rate                                       float64
	pools, faults, bin, judgeDSN, galera       string
	writers, urlList                           string
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
	if c.lease < 3*time.Second {
		errs = append(errs, errors.New("-lease must be at least 3s (renews run every lease/4)"))
	}
	return errors.Join(errs...)
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
	// The control database: a private server, or the Galera cluster
	// through one failover connection per writer.
	var serverDSN string
	replicaDSNServer := make([]string, 2)
	if r.cfg.galera != "" {
		if r.galera, err = openGalera(ctx, r.cfg.galera); err != nil {
			return err
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
				return err
			}
			r.dbProxies = append(r.dbProxies, p)
		}
		for i := range 2 {
			replicaDSNServer[i] = "root@tcp(" + r.dbProxies[i].addr() + ")/"
		}
		serverDSN = "root@tcp(" + r.dbProxies[2].addr() + ")/"
	} else {
		if r.controlDB, err = newMaria(ctx, r.f.work, "control"); err != nil {
			return err
		}
		if err := r.controlDB.start(ctx); err != nil {
			return err
		}
		serverDSN = r.controlDB.serverDSN()
		replicaDSNServer[0], replicaDSNServer[1] = serverDSN, serverDSN
	}
	if r.f.db, r.f.dsn, r.f.drop, err = freshDatabase(ctx, serverDSN, 8); err != nil {
		return err
	}
	if r.f.st, err = store.New(r.f.db, store.Config{}); err != nil {
		return err
	}
	if r.f.bizToken, err = r.f.st.CreateToken(ctx, store.TokenBusiness, "chaos"); err != nil {
		return err
	}
	benchCfg, err := mysql.ParseDSN(r.f.dsn)
	if err != nil {
		return err
	}
	for i, name := range []string{"A", "B"} {
		addr, err := freeAddr()
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
			args: []string{"serve", "--listen", addr, "--artifact-dir", filepath.Join(r.f.work, "artifacts"),
				"--mysql-dsn", dsn, "--log-level", "warn", "--lease-ttl", r.cfg.lease.String(),
				"--renew-interval", (r.cfg.lease / 4).String(), "--reap-interval", r.cfg.reap.String(),
				"--heartbeat-interval", "1s", "--offline-after", "5s", "--max-attempts", strconv.Itoa(r.cfg.maxAttempts),
				"--db-conns", "16"}}
		if err := r.startReplica(ctx, rep); err != nil {
			return err
		}
		rep.proxy = faultproxy.New("http://" + addr)
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
	if err := waitHTTP(ctx, "http://"+rep.addr+"/healthz", 60*time.Second); err != nil {
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
	c, err := r.f.spawn(fmt.Sprintf("%s.%d", n.base, n.starts), filepath.Join(r.f.bin, "kece-node"), []string{"-heartbeat", "1s"}, n.env)
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

func (r *chaosRun) unsettled() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.order {
		if s.accepted && s.settledAt.IsZero() {
			n++
		}
	}
	return n
}

// Programs per pool: the accepted one, a wrong one (WA), and for mysql a
// statement that sleeps so kills land mid-job.
func chaosProgram(pool string, kind int) (source, want string) {
	switch {
	case pool == string(machineapi.PoolMysql) && kind == 1:
		return "SELECT name FROM city ORDER BY name", "WA"
	case pool == string(machineapi.PoolMysql) && kind == 2:
		return "SELECT name FROM city, (SELECT SLEEP(0.8) AS z) AS s WHERE population > 1000000 ORDER BY name", "AC"
	case kind == 1 && pool == string(machineapi.PoolPython):
		return "a, b = map(int, input().split())\nprint(a - b - 1)\n", "WA"
	}
	return benchPrograms[pool].source, "AC"
}

// enqueueLoop is the business client's submitter: rate submissions per
// second, each retried on both replicas (same Idempotency-Key) until accepted.
func (r *chaosRun) enqueueLoop(ctx context.Context) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / r.cfg.rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, 32)
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r.mu.Lock()
		pool := r.cfg.poolList[r.rng.IntN(len(r.cfg.poolList))]
		kind := r.rng.IntN(3)
		full := r.inFlight(pool) >= r.cfg.inFlight
		r.mu.Unlock()
		if full {
			// Closed loop: a pool's backlog stays bounded whatever this
			// machine's judging speed, so stuck means stuck, not slow.
			continue
		}
		src, want := chaosProgram(pool, kind)
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		s := &chaosSub{id: fmt.Sprintf("chaos-%d-%d", r.cfg.seed, n), pool: pool, want: want, enqueuedAt: time.Now(), events: map[string]int{}}
		r.mu.Lock()
		r.subs[s.id] = s
		r.order = append(r.order, s)
		r.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			// The submission goes on being retried after the load stops: a
			// business backend does not give up on an accepted user's code.
			r.enqueue(context.WithoutCancel(ctx), s, src)
		}()
	}
}

// inFlight is how many of pool's submissions are sent but not settled
// (r.mu held).
func (r *chaosRun) inFlight(pool string) int {
	n := 0
	for _, s := range r.order {
		if s.pool == pool && s.settledAt.IsZero() {
			n++
		}
	}
	return n
}

func (r *chaosRun) enqueue(ctx context.Context, s *chaosSub, src string) {
	key := s.id
	body := businessapi.SubmissionCreate{SubmissionType: "CHAOS", SubmissionId: s.id, Language: benchPrograms[s.pool].lang,
		Source: src, ManifestId: r.manifests[s.pool]}
	deadline := time.Now().Add(3 * time.Minute)
	for k := 0; time.Now().Before(deadline); k++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := r.biz[k%2].EnqueueSubmissionWithResponse(cctx, &businessapi.EnqueueSubmissionParams{IdempotencyKey: &key}, body)
		cancel()
		if err == nil && resp.StatusCode() >= 200 && resp.StatusCode() < 300 {
			r.mu.Lock()
			s.accepted = true
			r.mu.Unlock()
			return
		}
		if err == nil && resp.StatusCode() >= 400 && resp.StatusCode() < 500 && resp.StatusCode() != http.StatusTooManyRequests {
			fmt.Fprintf(os.Stderr, "chaos: enqueue %s refused: %d %s\n", s.id, resp.StatusCode(), resp.Body)
			break
		}
		r.mu.Lock()
		r.enqueueErrors++
		r.mu.Unlock()
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// consumeLoop claims and acknowledges settlement events as a business
// backend would, alternating replicas.
func (r *chaosRun) consumeLoop(ctx context.Context) {
	for k := 0; ctx.Err() == nil; k++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := r.biz[k%2].ClaimSettlementEventsWithResponse(cctx, businessapi.EventClaimRequest{Consumer: "chaos-business", LeaseMs: 10_000, Max: 100})
		cancel()
		if err != nil || resp.JSON200 == nil {
			sleepCtx(ctx, 300*time.Millisecond)
			continue
		}
		evs := resp.JSON200.Events
		if len(evs) == 0 {
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		now := time.Now()
		ids := make([]string, 0, len(evs))
		r.mu.Lock()
		for _, e := range evs {
			ids = append(ids, e.EventId)
			r.deliveries++
			s := r.subs[e.SubmissionId]
			if s == nil {
				continue
			}
			s.events[e.EventId]++
			if s.settledAt.IsZero() {
				s.settledAt = now
				s.status = string(e.Payload.Status)
			}
		}
		r.mu.Unlock()
		cctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		_, _ = r.biz[(k+1)%2].AckSettlementEventsWithResponse(cctx, businessapi.EventAckRequest{Consumer: "chaos-business", EventIds: ids})
		cancel()
	}
}

// scrapeLoop follows each replica's transaction-retry counter, adding what
// a killed process had counted to the replica's base.
func (r *chaosRun) scrapeLoop(ctx context.Context) {
	for ctx.Err() == nil {
		for _, rep := range r.replicas {
			r.scrapeRetries(ctx, rep)
		}
		sleepCtx(ctx, time.Second)
	}
}

func (r *chaosRun) scrapeRetries(ctx context.Context, rep *chaosReplica) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := telemetry.Scrape(cctx, "http://"+rep.addr+"/metrics")
	if err != nil {
		return
	}
	v := s.Sum("kece_control_db_tx_retries_total")
	rep.mu.Lock()
	if v < rep.retryLast { // a new process
		rep.retryBase += rep.retryLast
	}
	rep.retryLast = v
	rep.mu.Unlock()
}

func (r *chaosRun) noteFault(kind string, end time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faultCount[kind]++
	if end.After(r.lastFaultEnd) {
		r.lastFaultEnd = end
	}
}

// faultSchedule runs faults one after another from warmup to duration.
func (r *chaosRun) faultSchedule(ctx context.Context, start time.Time) error {
	sleepCtx(ctx, r.cfg.warmup)
	if r.galera != nil {
		// One fault: kill the node replica A writes to (node 1) in the
		// middle of the run; the cluster goes on with two nodes.
		sleepCtx(ctx, (r.cfg.duration-r.cfg.warmup)/2)
		if err := r.galera.run(ctx, "kill", 1); err != nil {
			return err
		}
		r.noteFault(faultGaleraKill, time.Now())
		sleepCtx(ctx, time.Until(start.Add(r.cfg.duration)))
		return ctx.Err()
	}
	longAt := r.cfg.longFreezeAt()
	for ctx.Err() == nil {
		if len(longAt) > 0 && time.Since(start) >= longAt[0] {
			// Quiet before and after, so what the freeze costs is its own.
			longAt = longAt[1:]
			sleepCtx(ctx, r.freezeQuiet())
			if err := r.faulting(func() error { return r.longFreeze(ctx) }); err != nil {
				return fmt.Errorf("fault %s: %w", faultReplicaLongFreeze, err)
			}
			r.noteFault(faultReplicaLongFreeze, time.Now())
			sleepCtx(ctx, r.freezeQuiet())
			continue
		}
		r.mu.Lock()
		gap := time.Duration(float64(r.cfg.every) * (0.5 + r.faultRng.Float64()))
		kind := r.cfg.faultList[r.faultRng.IntN(len(r.cfg.faultList))]
		r.mu.Unlock()
		if time.Since(start)+gap >= r.cfg.duration {
			if len(longAt) > 0 {
				continue // a long freeze is still due
			}
			break
		}
		t0 := time.Now()
		if err := r.faulting(func() error { return r.fault(ctx, kind) }); err != nil {
			return fmt.Errorf("fault %s: %w", kind, err)
		}
		r.noteFault(kind, time.Now())
		if kind == faultReplicaFreeze {
			gap = max(gap, time.Since(t0)+r.freezeQuiet())
		}
		sleepCtx(ctx, gap-time.Since(t0))
	}
	if r.lastFaultEnd.IsZero() {
		r.lastFaultEnd = time.Now()
	}
	return ctx.Err()
}

func (r *chaosRun) pick(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.faultRng.IntN(n)
}

func (r *chaosRun) pause(ctx context.Context, lo, hi time.Duration) {
	sleepCtx(ctx, lo+time.Duration(r.pick(int((hi-lo)/time.Millisecond)+1))*time.Millisecond)
}

// fault runs one fault to its end (the process is back, the freeze over).
func (r *chaosRun) fault(ctx context.Context, kind string) error {
	switch kind {
	case faultNodeKill, faultNodeRestart:
		n := r.nodes[r.pick(len(r.nodes))]
		r.stopping(n)
		if kind == faultNodeKill {
			_ = n.cmd.Process.Signal(syscall.SIGKILL)
			<-n.exited
		} else {
			stopChild(n.child)
		}
		r.pause(ctx, 500*time.Millisecond, 3*time.Second)
		return r.startNode(n)
	case faultReplicaKill:
		rep := r.replicas[r.pick(len(r.replicas))]
		r.scrapeRetries(ctx, rep)
		_ = rep.proc.cmd.Process.Signal(syscall.SIGKILL)
		<-rep.proc.exited
		r.pause(ctx, 500*time.Millisecond, 3*time.Second)
		return r.startReplica(ctx, rep)
	case faultDockerDown:
		var code []*chaosNode
		for _, n := range r.nodes {
			if n.docker != nil {
				code = append(code, n)
			}
		}
		if len(code) == 0 {
			return nil
		}
		n := code[r.pick(len(code))]
		n.docker.Cut()
		r.pause(ctx, 2*time.Second, 6*time.Second)
		return n.docker.Up()
	case faultReplicaFreeze:
		rep := r.replicas[r.pick(len(r.replicas))]
		if err := rep.proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		return r.frozen(ctx, rep, freezeWindow{replica: rep.name}, 2*time.Second+time.Duration(r.pick(4000))*time.Millisecond)
	case faultDBRestart:
		r.controlDB.crash()
		r.pause(ctx, time.Second, 3*time.Second)
		return r.controlDB.start(ctx)
	case faultDropAnswers, faultDelayAnswers:
		rep := r.replicas[r.pick(len(r.replicas))]
		path := []string{"/jobs/claim", "/jobs/renew", "/result", "/heartbeat"}[r.pick(4)]
		times := 1 + r.pick(4)
		rule := faultproxy.Rule{Method: "POST", PathContains: path, Action: faultproxy.DropResponse, Times: times}
		if kind == faultDelayAnswers {
			rule.Action, rule.Delay = faultproxy.DelayResponse, time.Duration(1000+r.pick(3000))*time.Millisecond
		}
		h := rep.proxy.Add(rule)
		// The fault lasts until its answers were spoiled (or 20 s without
		// such a call).
		select {
		case <-h.Fired():
		case <-time.After(20 * time.Second):
		case <-ctx.Done():
		}
		for end := time.Now().Add(20 * time.Second); h.Hits() < times && time.Now().Before(end) && ctx.Err() == nil; {
			sleepCtx(ctx, 100*time.Millisecond)
		}
		if kind == faultDelayAnswers {
			sleepCtx(ctx, rule.Delay)
		}
		return nil
	}
	return fmt.Errorf("unknown fault %q", kind)
}

// report checks the invariants and prints the figures; ok says the targets held.
func (r *chaosRun) report(ctx context.Context, wall time.Duration) (bool, error) {
	freezeLines, freezeOK, err := r.freezeFigures(ctx)
	if err != nil {
		return false, err
	}
	type row struct {
		state, verdict string
		jobs           int
	}
	db := r.f.db
	rows, err := db.QueryContext(ctx, `SELECT submission_id, COUNT(*), MAX(state), COALESCE(MAX(verdict), '')
		FROM judge_job WHERE submission_type = 'CHAOS' GROUP BY submission_id`)
	if err != nil {
		return false, err
	}
	inDB := map[string]row{}
	for rows.Next() {
		var id string
		var rw row
		if err := rows.Scan(&id, &rw.jobs, &rw.state, &rw.verdict); err != nil {
			rows.Close()
			return false, err
		}
		inDB[id] = rw
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, err
	}
	var multiCommit int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT job_id FROM judge_job_attempt WHERE outcome = 'COMPLETED'
		GROUP BY job_id HAVING COUNT(*) > 1) d`).Scan(&multiCommit); err != nil {
		return false, err
	}
	var attempts, expired int
	_ = db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(outcome = 'EXPIRED'), 0) FROM judge_job_attempt`).Scan(&attempts, &expired)
	violations, err := r.reconcile(ctx)
	if err != nil {
		return false, err
	}
	recovery, err := r.recovery(ctx)
	if err != nil {
		return false, err
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	var jobs, notAccepted, finished, lost, duplicated, stuck, wrong, systemErrors, redelivered int
	for _, s := range r.order {
		d, ok := inDB[s.id]
		if !s.accepted && !ok {
			notAccepted++
			continue
		}
		jobs++
		switch {
		case !ok:
			lost++ // accepted, yet the database has no job
			fmt.Fprintf(os.Stderr, "chaos: lost %s (%s): accepted, no job in the database\n", s.id, s.pool)
			continue
		case d.jobs > 1 || len(s.events) > 1:
			duplicated++
		}
		for _, n := range s.events {
			redelivered += n - 1
		}
		terminal := d.state == string(store.StateCompleted) || d.state == string(store.StateFailed)
		switch {
		case !terminal:
			stuck++
			fmt.Fprintf(os.Stderr, "chaos: stuck %s (%s): job state %s\n", s.id, s.pool, d.state)
		case s.settledAt.IsZero():
			lost++ // settled in the database, never delivered to the business
			fmt.Fprintf(os.Stderr, "chaos: lost %s (%s): job %s %s, no settlement event received\n", s.id, s.pool, d.state, d.verdict)
		default:
			finished++
			if d.state == string(store.StateFailed) || s.status == "SYSTEM_ERROR" {
				systemErrors++
			} else if d.verdict != s.want || s.status != s.want {
				wrong++
				fmt.Fprintf(os.Stderr, "chaos: wrong verdict %s (%s): want %s, job %s %s, business saw %s\n", s.id, s.pool, s.want, d.state, d.verdict, s.status)
			}
		}
	}
	duplicated += multiCommit

	mode := "private_mariadb"
	if r.galera != nil {
		mode = "galera_" + r.cfg.writers + "_writer"
	}
	fmt.Printf("mode=%s seed=%d pools=%s nodes=%d slots=%d replicas=2 lease_ms=%d reap_ms=%d node_url_list=%t\n", mode, r.cfg.seed,
		strings.Join(r.cfg.poolList, ","), len(r.nodes), r.cfg.slots, r.cfg.lease.Milliseconds(), r.cfg.reap.Milliseconds(), r.urlList)
	fmt.Printf("wall_s=%.0f max_rate_per_s=%g in_flight_per_pool=%d\n", wall.Seconds(), r.cfg.rate, r.cfg.inFlight)
	total := 0
	var kinds []string
	for k := range r.faultCount {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		fmt.Printf("faults_%s=%d\n", k, r.faultCount[k])
		total += r.faultCount[k]
	}
	fmt.Printf("faults=%d\n", total)
	var retries float64
	for _, rep := range r.replicas {
		rep.mu.Lock()
		retries += rep.retryBase + rep.retryLast
		rep.mu.Unlock()
	}
	if r.galera != nil {
		for i, p := range r.dbProxies[:2] {
			fmt.Printf("replica_%c_db_node=%s\n", 'a'+i, p.current())
		}
	}
	fmt.Printf("jobs=%d\n", jobs)
	fmt.Printf("not_accepted=%d\n", notAccepted)
	fmt.Printf("enqueue_retries=%d\n", r.enqueueErrors)
	fmt.Printf("finished=%d\n", finished)
	fmt.Printf("system_errors=%d\n", systemErrors)
	fmt.Printf("attempts=%d expired_attempts=%d\n", attempts, expired)
	fmt.Printf("lost=%d\n", lost)
	fmt.Printf("duplicated=%d\n", duplicated)
	fmt.Printf("stuck=%d\n", stuck)
	fmt.Printf("wrong=%d\n", wrong)
	fmt.Printf("redelivered_events=%d\n", redelivered)
	fmt.Printf("deadlock_retries=%.0f\n", retries)
	fmt.Printf("reconcile_violations=%d\n", violations)
	fmt.Printf("node_exits_unplanned=%d\n", r.unplannedExits)
	if recovery >= 0 {
		fmt.Printf("recovery_s=%.1f\n", recovery)
	} else {
		fmt.Printf("recovery_s=NaN\n")
	}
	if r.galeraRejoin != "" {
		fmt.Println(r.galeraRejoin)
	}
	fmt.Print(freezeLines)
	return lost == 0 && duplicated == 0 && stuck == 0 && wrong == 0 && violations == 0 && recovery >= 0 && freezeOK, nil
}

// recovery is how long after the last fault ended judging worked again in
// every pool: until the first attempt that started after that moment
// committed its result (max over pools), from the database's attempt rows;
// -1 if a pool has none. Queued work from before does not count, so a
// backlog does not hide or inflate it.
func (r *chaosRun) recovery(ctx context.Context) (float64, error) {
	rows, err := r.f.db.QueryContext(ctx, `SELECT j.pool, MIN(a.ended_at) FROM judge_job_attempt a JOIN judge_job j ON j.id = a.job_id
		WHERE a.outcome = 'COMPLETED' AND a.started_at >= ? GROUP BY j.pool`, r.lastFaultEnd.UTC())
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	first := map[string]time.Time{}
	for rows.Next() {
		var pool string
		var t time.Time
		if err := rows.Scan(&pool, &t); err != nil {
			return 0, err
		}
		first[pool] = t
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	worst := 0.0
	for _, p := range r.cfg.poolList {
		t, ok := first[p]
		if !ok {
			return -1, nil
		}
		worst = max(worst, t.Sub(r.lastFaultEnd).Seconds())
	}
	return worst, nil
}

// reconcile runs `kece-control reconcile` on the run's database, as the
// operator on call would, and counts its violations.
func (r *chaosRun) reconcile(ctx context.Context) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, filepath.Join(r.f.bin, "kece-control"), "reconcile", "--mysql-dsn", r.f.dsn,
		"--reap-interval", r.cfg.reap.String(), "-o", "json")
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 3) {
		return 0, fmt.Errorf("kece-control reconcile: %w\n%s", err, out)
	}
	var rep struct {
		Violations []json.RawMessage `json:"violations"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return 0, fmt.Errorf("kece-control reconcile output: %w", err)
	}
	for _, v := range rep.Violations {
		fmt.Fprintf(os.Stderr, "chaos: reconcile violation %s\n", v)
	}
	return len(rep.Violations), nil
}
