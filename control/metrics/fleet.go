package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/store"
)

// fleetCollector exports the database-backed gauges. One scrape reads the
// database at most once per FleetCacheTTL (store.FleetStats walks index
// ranges only); concurrent scrapes share the read.
type fleetCollector struct {
	src FleetSource
	m   *Metrics

	queueDepth, oldestWait, running *prometheus.Desc
	nodes, slots                    *prometheus.Desc
	readyNodes, readySlots          *prometheus.Desc
	events                          *prometheus.Desc

	mu   sync.Mutex
	at   time.Time
	last store.FleetStats
	ok   bool
}

func newFleetCollector(src FleetSource, m *Metrics) *fleetCollector {
	return &fleetCollector{src: src, m: m,
		queueDepth: prometheus.NewDesc("kece_control_queue_depth",
			"QUEUED business jobs per pool (ready or in retry backoff), from the database.", []string{"pool"}, nil),
		oldestWait: prometheus.NewDesc("kece_control_queue_oldest_wait_seconds",
			"How long the longest-waiting ready job of the pool has been ready (0 when none waits).", []string{"pool"}, nil),
		running: prometheus.NewDesc("kece_control_jobs_running",
			"RUNNING jobs per pool (leases held, expired but unreaped included).", []string{"pool"}, nil),
		nodes: prometheus.NewDesc("kece_control_nodes",
			"Nodes (not revoked) by pool, configured state and whether they heartbeat recently (online).",
			[]string{"pool", "state", "online"}, nil),
		slots: prometheus.NewDesc("kece_control_node_slots",
			"Admin slots of nodes (not revoked) by pool, configured state and online.", []string{"pool", "state", "online"}, nil),
		readyNodes: prometheus.NewDesc("kece_control_ready_nodes",
			"Nodes per pool that can take work now: ENABLED, not revoked, online.", []string{"pool"}, nil),
		readySlots: prometheus.NewDesc("kece_control_ready_slots",
			"Admin slots of the ready nodes of each pool.", []string{"pool"}, nil),
		events: prometheus.NewDesc("kece_control_settlement_events",
			"Settlement events not delivered, by state (pending, dead).", []string{"state"}, nil),
	}
}

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.queueDepth, c.oldestWait, c.running, c.nodes, c.slots, c.readyNodes, c.readySlots, c.events} {
		ch <- d
	}
}

func (c *fleetCollector) read() (store.FleetStats, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok && time.Since(c.at) < c.m.cfg.FleetCacheTTL {
		return c.last, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.m.cfg.FleetTimeout)
	defer cancel()
	fs, err := c.src.FleetStats(ctx)
	if err != nil {
		c.m.fleetFailures.Inc()
		c.m.cfg.Logger.Warn("metrics: reading the fleet gauges failed", "err", err)
		c.ok = false
		return fs, false
	}
	c.last, c.at, c.ok = fs, time.Now(), true
	return fs, true
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	fs, ok := c.read()
	if !ok {
		return
	}
	for _, q := range fs.Queues {
		ch <- prometheus.MustNewConstMetric(c.queueDepth, prometheus.GaugeValue, float64(q.Queued), q.Pool)
		ch <- prometheus.MustNewConstMetric(c.oldestWait, prometheus.GaugeValue, q.OldestReadyWait.Seconds(), q.Pool)
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(q.Running), q.Pool)
	}
	readyNodes, readySlots := map[string]int{}, map[string]int{}
	for _, p := range contracts.Pools() {
		readyNodes[p], readySlots[p] = 0, 0
	}
	online := func(b bool) string {
		if b {
			return "true"
		}
		return "false"
	}
	// Every pool × state × online combination is exported (0 when empty), so
	// alerts such as "an enabled node is offline" always have a series.
	type key struct {
		pool   string
		state  store.NodeState
		online bool
	}
	nodes, slots := map[key]int{}, map[key]int{}
	for _, p := range contracts.Pools() {
		for _, st := range []store.NodeState{store.NodePendingVerification, store.NodeEnabled, store.NodeDraining, store.NodeDisabled} {
			nodes[key{p, st, true}], nodes[key{p, st, false}] = 0, 0
		}
	}
	for _, n := range fs.Nodes {
		k := key{n.Pool, n.State, n.Online}
		nodes[k] += n.Nodes
		slots[k] += n.Slots
		if n.State == store.NodeEnabled && n.Online {
			readyNodes[n.Pool] += n.Nodes
			readySlots[n.Pool] += n.Slots
		}
	}
	for k, v := range nodes {
		ch <- prometheus.MustNewConstMetric(c.nodes, prometheus.GaugeValue, float64(v), k.pool, label(string(k.state)), online(k.online))
		ch <- prometheus.MustNewConstMetric(c.slots, prometheus.GaugeValue, float64(slots[k]), k.pool, label(string(k.state)), online(k.online))
	}
	for p, n := range readyNodes {
		ch <- prometheus.MustNewConstMetric(c.readyNodes, prometheus.GaugeValue, float64(n), p)
		ch <- prometheus.MustNewConstMetric(c.readySlots, prometheus.GaugeValue, float64(readySlots[p]), p)
	}
	ch <- prometheus.MustNewConstMetric(c.events, prometheus.GaugeValue, float64(fs.EventsPending), "pending")
	ch <- prometheus.MustNewConstMetric(c.events, prometheus.GaugeValue, float64(fs.EventsDead), "dead")
}
