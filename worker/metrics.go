package worker

import (
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/telemetry"
)

// metrics are the node's counters. The plain counters are atomics (tests and
// Metrics() read them); promMetrics exports them and adds the labelled
// counters and histograms. Every series carries the pool as a constant
// label; the node id is on kece_node_info only. Job and submission ids never
// become labels.
type metrics struct {
	heartbeats, heartbeatFailures   atomic.Int64
	claims, claimFailures           atomic.Int64
	renewals, renewFailures         atomic.Int64
	jobsStarted, executions         atomic.Int64
	downloads, corruptDownloads     atomic.Int64
	resultsAccepted, resultsAlready atomic.Int64
	resultRetries, resultsAbandoned atomic.Int64
	leasesLost, deadlineCancels     atomic.Int64
	nodeDefects, authFailures       atomic.Int64
	leasesReleased, claimRetries    atomic.Int64
	cycleJobs, dependencyPauses     atomic.Int64
	leasesDroppedFresh              atomic.Int64
	// executing is how many jobs are in the executor now (a gauge): the
	// busy slots less those downloading inputs or posting a result.
	executing atomic.Int64
}

func (m *metrics) posted(d machineapi.Disposition) {
	if d == machineapi.DispositionAlreadyCommitted {
		m.resultsAlready.Add(1)
		return
	}
	m.resultsAccepted.Add(1)
}

// Metrics is a snapshot of the node's counters.
type Metrics struct {
	Heartbeats, HeartbeatFailures            int64
	Claims, ClaimFailures                    int64
	Renewals, RenewFailures                  int64
	JobsStarted, Executions                  int64
	Downloads, CorruptDownloads              int64
	ResultsAccepted, ResultsAlreadyCommitted int64
	ResultRetries, ResultsAbandoned          int64
	LeasesLost, DeadlineCancels              int64
	NodeDefects, AuthFailures                int64
	// LeasesReleased counts leases given back unrun (draining, stopping,
	// inputs unavailable, a dependency down); ClaimRetries claims resent with the same
	// request id after a failed answer.
	LeasesReleased, ClaimRetries int64
	// CycleJobs counts jobs leased with a result (its claim for the slot
	// it frees, the slot cycle) rather than by the claim loop.
	CycleJobs int64
	// DependencyPauses counts the times a job's failure on a dependency
	// (Docker, image, judge database) stopped the node claiming.
	DependencyPauses int64
	// LeasesDroppedFresh counts leases that arrived already past their
	// local deadline and were left to expire unstarted.
	LeasesDroppedFresh int64
	// ReplicaMoves counts moves to the next control replica; RenewHedges
	// renews also sent to the next replica because the first was slow, and
	// RenewHedgesWon those the next replica answered first.
	ReplicaMoves, RenewHedges, RenewHedgesWon int64
	// LivenessChecks counts liveness checks answered by the replica holding
	// a claim long-poll (Config.LivenessInterval).
	LivenessChecks int64
}

// Metrics returns the node's counters.
func (n *Node) Metrics() Metrics {
	m := n.m
	return Metrics{
		Heartbeats: m.heartbeats.Load(), HeartbeatFailures: m.heartbeatFailures.Load(),
		Claims: m.claims.Load(), ClaimFailures: m.claimFailures.Load(),
		Renewals: m.renewals.Load(), RenewFailures: m.renewFailures.Load(),
		JobsStarted: m.jobsStarted.Load(), Executions: m.executions.Load(),
		Downloads: m.downloads.Load(), CorruptDownloads: m.corruptDownloads.Load(),
		ResultsAccepted: m.resultsAccepted.Load(), ResultsAlreadyCommitted: m.resultsAlready.Load(),
		ResultRetries: m.resultRetries.Load(), ResultsAbandoned: m.resultsAbandoned.Load(),
		LeasesLost: m.leasesLost.Load(), DeadlineCancels: m.deadlineCancels.Load(),
		NodeDefects: m.nodeDefects.Load(), AuthFailures: m.authFailures.Load(),
		LeasesReleased: m.leasesReleased.Load(), ClaimRetries: m.claimRetries.Load(),
		CycleJobs: m.cycleJobs.Load(), DependencyPauses: m.dependencyPauses.Load(),
		LeasesDroppedFresh: m.leasesDroppedFresh.Load(),
		ReplicaMoves:       n.cl.moves.Load(), RenewHedges: n.cl.hedged.Load(), RenewHedgesWon: n.cl.hedgeWon.Load(),
		LivenessChecks: n.cl.liveChecks.Load(),
	}
}

// Job outcomes of kece_node_jobs_total besides the verdicts (AC, WA, …).
const (
	jobOutcomeInfra     = "INFRA_ERROR"
	jobOutcomeAbandoned = "ABANDONED" // lease lost or refused: nothing posted
	jobOutcomeStopped   = "STOPPED"   // local deadline or shutdown: nothing posted
	jobOutcomeReleased  = "RELEASED"  // given back before judging started
)

// promMetrics are the node's Prometheus collectors.
type promMetrics struct {
	reg        *prometheus.Registry
	info       *prometheus.GaugeVec
	jobs       *prometheus.CounterVec
	infra      *prometheus.CounterVec
	jobSeconds *prometheus.HistogramVec
	compile    prometheus.Histogram
	run        prometheus.Histogram
	claimRTT   *prometheus.HistogramVec
	// phase, compileCache and sandboxes split a job into its phases
	// (phases.go).
	phase        *prometheus.HistogramVec
	compileCache *prometheus.CounterVec
	sandboxes    *prometheus.CounterVec
}

func newPromMetrics(n *Node) *promMetrics {
	reg := telemetry.NewRegistry("node")
	r := prometheus.WrapRegistererWith(prometheus.Labels{"pool": n.cfg.Pool}, reg)
	p := &promMetrics{reg: reg}
	p.info = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kece_node_info",
		Help: "The node this process serves; always 1 once the session is open."}, []string{"node_id"})
	p.jobs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kece_node_jobs_total",
		Help: "Jobs finished by this process, by outcome (lower case): the verdict, infra_error, abandoned (lease gone), stopped (deadline or shutdown), released (given back before judging started)."},
		[]string{"outcome"})
	p.infra = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kece_node_infra_errors_total",
		Help: "Infrastructure errors of sandbox, checker, judge database or inputs, by error class (the engine's, lower case)."}, []string{"error_class"})
	p.jobSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kece_node_job_duration_seconds",
		Help:    "Execution time of a job as the node measures it: from the claim answer to the result post (downloads, container start, compile and run).",
		Buckets: []float64{.1, .25, .5, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120}}, []string{"kind"})
	p.compile = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kece_node_compile_seconds",
		Help:    "Compile phase of code jobs (container start included), until judging starts.",
		Buckets: []float64{.1, .25, .5, 1, 1.5, 2, 3, 5, 7.5, 10, 20, 30}})
	p.run = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kece_node_run_seconds",
		Help:    "Judging phase of a job (all cases and the checker).",
		Buckets: []float64{.01, .05, .1, .25, .5, 1, 2, 3, 5, 10, 20, 30, 60}})
	p.claimRTT = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kece_node_claim_round_trip_seconds",
		Help:    "Claim long-poll round trips, by result (jobs, empty, error).",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 20}}, []string{"result"})
	p.phase = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kece_node_job_phase_seconds",
		Help: "A job's phases, each observed when it happened: queue (ready in the queue before the lease, the control plane's clock), " +
			"download (inputs into the artifact cache), sandbox (until the sandboxes ran commands), compile, checker (checker, interactor or manager compile), " +
			"run (every case's program runs), check (every case's checking), post (the result post, retries included).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60}}, []string{"phase"})
	p.compileCache = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kece_node_compile_cache_total",
		Help: "Compile steps by what they compiled (submission, checker: a checker, interactor or manager) and whether the compile cache served them (hit) or they ran (miss)."},
		[]string{"kind", "result"})
	p.sandboxes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kece_node_sandboxes_total",
		Help: "Jobs' sandboxes made ready, by start: warm (started before the job arrived) or cold."}, []string{"start"})
	for _, ph := range jobPhases {
		p.phase.WithLabelValues(ph)
	}
	for _, k := range []string{"submission", "checker"} {
		p.compileCache.WithLabelValues(k, "hit")
		p.compileCache.WithLabelValues(k, "miss")
	}
	p.sandboxes.WithLabelValues("warm")
	p.sandboxes.WithLabelValues("cold")
	r.MustRegister(p.info, p.jobs, p.infra, p.jobSeconds, p.compile, p.run, p.claimRTT, p.phase, p.compileCache, p.sandboxes)

	m := n.m
	counters := []struct {
		name, help string
		v          *atomic.Int64
	}{
		{"kece_node_heartbeats_total", "Heartbeats answered.", &m.heartbeats},
		{"kece_node_heartbeat_failures_total", "Heartbeats that failed.", &m.heartbeatFailures},
		{"kece_node_claims_total", "Claim long-polls answered.", &m.claims},
		{"kece_node_claim_failures_total", "Claim calls that failed.", &m.claimFailures},
		{"kece_node_renewals_total", "Batched renew calls answered.", &m.renewals},
		{"kece_node_renew_failures_total", "Renew calls that failed.", &m.renewFailures},
		{"kece_node_jobs_started_total", "Leases taken.", &m.jobsStarted},
		{"kece_node_executions_total", "Tasks handed to the executor.", &m.executions},
		{"kece_node_downloads_total", "Artifact downloads started.", &m.downloads},
		{"kece_node_corrupt_downloads_total", "Downloads refused for wrong size or digest.", &m.corruptDownloads},
		{"kece_node_results_accepted_total", "Results committed by this node's call.", &m.resultsAccepted},
		{"kece_node_results_already_committed_total", "Resent results answered ALREADY_COMMITTED.", &m.resultsAlready},
		{"kece_node_result_retries_total", "Result posts sent again.", &m.resultRetries},
		{"kece_node_results_abandoned_total", "Results refused with 404/409.", &m.resultsAbandoned},
		{"kece_node_leases_lost_total", "Jobs stopped because their lease ended.", &m.leasesLost},
		{"kece_node_deadline_cancels_total", "Jobs cancelled at the local lease deadline.", &m.deadlineCancels},
		{"kece_node_defects_total", "Result payloads the control plane refused (413/422/400).", &m.nodeDefects},
		{"kece_node_auth_failures_total", "Calls refused with 401/403.", &m.authFailures},
		{"kece_node_leases_released_total", "Leases given back unrun (draining, stopping, inputs unavailable, a dependency down).", &m.leasesReleased},
		{"kece_node_claim_retries_total", "Claims resent with the same request id after a failed answer.", &m.claimRetries},
		{"kece_node_cycle_jobs_total", "Jobs leased with a result, for the slot it freed (the slot cycle).", &m.cycleJobs},
		{"kece_node_leases_dropped_fresh_total", "Leases that arrived already past their local deadline and were left to expire unstarted.", &m.leasesDroppedFresh},
		{"kece_node_replica_moves_total", "Moves to the next control replica after one hung or failed (the session is kept).", &n.cl.moves},
		{"kece_node_renew_hedges_total", "Renews also sent to the next control replica because the first had not answered in time.", &n.cl.hedged},
		{"kece_node_renew_hedges_won_total", "Hedged renews the next control replica answered first.", &n.cl.hedgeWon},
		{"kece_node_liveness_checks_total", "Liveness checks answered by the control replica holding the claim long-poll.", &n.cl.liveChecks},
		{"kece_node_dependency_pauses_total", "Times a job failed on a dependency of the node (Docker, image, judge database) and the node stopped claiming until a probe passed.", &m.dependencyPauses},
	}
	for _, c := range counters {
		v := c.v
		r.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help},
			func() float64 { return float64(v.Load()) }))
	}
	for i, base := range n.cl.bases {
		r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kece_node_control_replica",
			Help:        "1 for the control replica (KECE_CONTROL_URL entry) the node uses now, 0 for the others.",
			ConstLabels: prometheus.Labels{"url": base}}, func() float64 {
			if int(n.cl.cur.Load()) == i {
				return 1
			}
			return 0
		}))
	}
	status := func(f func(Status) float64) func() float64 { return func() float64 { return f(n.Status()) } }
	r.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kece_node_slots",
			Help: "Jobs the node may run at once (min of local and admin slots)."}, status(func(s Status) float64 { return float64(s.SlotsTotal) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kece_node_slots_busy", Help: "Jobs running now."},
			status(func(s Status) float64 { return float64(s.SlotsBusy) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kece_node_slots_executing",
			Help: "Jobs in the executor now: busy slots less those preparing (downloading inputs) or posting a result. A gap to kece_node_slots_busy that lasts is slots waiting on the control plane."},
			func() float64 { return float64(n.m.executing.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kece_node_draining", Help: "1 while the node claims nothing new."},
			status(func(s Status) float64 {
				if s.Draining {
					return 1
				}
				return 0
			})),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kece_node_dependency_paused",
			Help: "1 while the node claims nothing because a dependency is down (last probe, or a job failed on one since)."},
			status(func(s Status) float64 {
				if s.DependencyPaused {
					return 1
				}
				return 0
			})),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kece_node_healthy",
			Help: "1 when every local dependency (Docker and image, or judge MySQL) passed its last probe."},
			status(func(s Status) float64 {
				for _, d := range s.Dependencies {
					if !d.Healthy {
						return 0
					}
				}
				return 1
			})),
	)
	cache := func(f func(st cacheStats) float64) func() float64 {
		return func() float64 {
			if c := n.cacheRef(); c != nil {
				return f(c.Stats())
			}
			return 0
		}
	}
	r.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kece_node_artifact_cache_hits_total",
			Help: "Artifact requests served from the local cache."}, cache(func(s cacheStats) float64 { return float64(s.Hits) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kece_node_artifact_cache_misses_total",
			Help: "Artifact requests that needed a download (started or joined)."}, cache(func(s cacheStats) float64 { return float64(s.Misses) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kece_node_artifact_cache_evictions_total",
			Help: "Cached files evicted to stay within the budget."}, cache(func(s cacheStats) float64 { return float64(s.Evictions) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kece_node_artifact_cache_bytes",
			Help: "Bytes of verified files in the cache."}, cache(func(s cacheStats) float64 { return float64(s.Bytes) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kece_node_artifact_cache_max_bytes",
			Help: "The cache's budget."}, cache(func(s cacheStats) float64 { return float64(s.MaxBytes) })),
	)
	return p
}

func (p *promMetrics) handler() http.Handler {
	return promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{Registry: p.reg})
}

// jobDone records how a job ended and how long its phases took. execStart
// is when the executor got the task (zero: it never did); judgeStart when
// it first reported judging (zero: it never did, e.g. a compile error).
func (p *promMetrics) jobDone(kind, outcome string, claimed, execStart, judgeStart, end time.Time, code bool) {
	// Label values are lower case, as the control plane's.
	p.jobs.WithLabelValues(strings.ToLower(outcome)).Inc()
	if outcome == jobOutcomeAbandoned || outcome == jobOutcomeStopped || outcome == jobOutcomeReleased {
		return
	}
	p.jobSeconds.WithLabelValues(strings.ToLower(kind)).Observe(end.Sub(claimed).Seconds())
	if execStart.IsZero() {
		return
	}
	if code {
		compileEnd := judgeStart
		if compileEnd.IsZero() {
			compileEnd = end
		}
		p.compile.Observe(compileEnd.Sub(execStart).Seconds())
	}
	if !judgeStart.IsZero() {
		p.run.Observe(end.Sub(judgeStart).Seconds())
	}
}

// infraError counts one infrastructure error by its engine class.
func (p *promMetrics) infraError(err error) {
	p.infra.WithLabelValues(strings.ToLower(string(engine.ClassOf(err)))).Inc()
}

type cacheStats = artifact.CacheStats

// cacheRef returns the artifact cache once Run opened it (nil before).
func (n *Node) cacheRef() *artifact.Cache { return n.cachePtr.Load() }
