package worker

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/kece-oj/kece/contracts/machineapi"
)

// metrics are the node's counters, exported on /metrics.
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
	}
}

// Handler serves GET /healthz (the Status as JSON; 503 when a dependency is
// unhealthy) and GET /metrics (Prometheus text format). Neither runs
// anything: they show what the node's own loops last observed.
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		st := n.Status()
		code := http.StatusOK
		for _, d := range st.Dependencies {
			if !d.Healthy {
				code = http.StatusServiceUnavailable
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		st, m := n.Status(), n.Metrics()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		gauge := func(name, help string, v int64) {
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", name, help, name, name, v)
		}
		counter := func(name, help string, v int64) {
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
		}
		draining := int64(0)
		if st.Draining {
			draining = 1
		}
		gauge("kece_node_slots_total", "Jobs the node may run at once (min of local and admin slots).", int64(st.SlotsTotal))
		gauge("kece_node_slots_busy", "Jobs running now.", int64(st.SlotsBusy))
		gauge("kece_node_draining", "1 while the node claims nothing new.", draining)
		counter("kece_node_heartbeats_total", "Heartbeats answered.", m.Heartbeats)
		counter("kece_node_heartbeat_failures_total", "Heartbeats that failed.", m.HeartbeatFailures)
		counter("kece_node_claims_total", "Claim long-polls answered.", m.Claims)
		counter("kece_node_claim_failures_total", "Claim calls that failed.", m.ClaimFailures)
		counter("kece_node_renewals_total", "Batched renew calls answered.", m.Renewals)
		counter("kece_node_renew_failures_total", "Renew calls that failed.", m.RenewFailures)
		counter("kece_node_jobs_started_total", "Leases taken.", m.JobsStarted)
		counter("kece_node_executions_total", "Tasks handed to the executor.", m.Executions)
		counter("kece_node_downloads_total", "Artifact downloads started.", m.Downloads)
		counter("kece_node_corrupt_downloads_total", "Downloads refused for wrong size or digest.", m.CorruptDownloads)
		counter("kece_node_results_accepted_total", "Results committed by this node's call.", m.ResultsAccepted)
		counter("kece_node_results_already_committed_total", "Resent results answered ALREADY_COMMITTED.", m.ResultsAlreadyCommitted)
		counter("kece_node_result_retries_total", "Result posts sent again.", m.ResultRetries)
		counter("kece_node_results_abandoned_total", "Results refused with 404/409.", m.ResultsAbandoned)
		counter("kece_node_leases_lost_total", "Jobs stopped because their lease ended.", m.LeasesLost)
		counter("kece_node_deadline_cancels_total", "Jobs cancelled at the local lease deadline.", m.DeadlineCancels)
		counter("kece_node_defects_total", "Result payloads the control plane refused (413/422/400).", m.NodeDefects)
		counter("kece_node_auth_failures_total", "Calls refused with 401/403.", m.AuthFailures)
	})
	return mux
}
