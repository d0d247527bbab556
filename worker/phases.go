package worker

// A job split into its phases (docs/node.md, "Job phases"): the node
// measures its own (queue wait as the claim answer tells it, preparing the
// inputs, the executor's call, the result post), the executor its own
// (engine.Phases), and both go to the node's metrics and, with the result,
// to the job's attempt.

import (
	"time"

	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/engine"
)

// Phase labels of kece_node_job_phase_seconds, in the order a job passes
// them.
const (
	phaseQueue    = "queue"    // ready in the queue before the lease (the control plane's clock)
	phaseDownload = "download" // the job's inputs into the artifact cache
	phaseSandbox  = "sandbox"  // until the sandboxes were ready to run a command
	phaseCompile  = "compile"  // the submission's compile (or cache look-up)
	phaseChecker  = "checker"  // the checker's, interactor's or manager's compile
	phaseRun      = "run"      // the program runs of every case
	phaseCheck    = "check"    // checking every case's output
	phasePost     = "post"     // the result post, retries included
)

// jobPhases lists the phase labels, for the series made at start.
var jobPhases = []string{phaseQueue, phaseDownload, phaseSandbox, phaseCompile, phaseChecker, phaseRun, phaseCheck, phasePost}

// jobTiming is what the node measured of one job besides the executor's
// own phases.
type jobTiming struct {
	// queued is the claim answer's queuedMs (nil: it told none).
	queued *int64
	// download is prepare's time; execute the executor's call (zero: it
	// never got the task).
	download, execute time.Duration
	// engine is what the executor reported with its verdict (or its error).
	engine engine.Phases
}

// ms is d in whole milliseconds, as the contract carries durations.
func ms(d time.Duration) int64 { return max(d.Milliseconds(), 0) }

// resultPhases is the result's phases: the node's and the executor's
// measurements, and the time from the claim answer (claimed) until now.
func resultPhases(t jobTiming, claimed time.Time) *machineapi.ResultPhases {
	e := t.engine
	return &machineapi.ResultPhases{QueueMs: t.queued, DownloadMs: ms(t.download),
		SandboxMs: ms(e.Sandbox), CompileMs: ms(e.Compile), CheckerMs: ms(e.Checker), RunMs: ms(e.Run), CheckMs: ms(e.Check),
		ExecuteMs: ms(t.execute), TotalMs: ms(time.Since(claimed)),
		CompileCached: e.CompileCached, CheckerCached: e.CheckerCached, SandboxWarm: e.SandboxWarm}
}

// observePhase records one phase that happened.
func (p *promMetrics) observePhase(phase string, d time.Duration) {
	p.phase.WithLabelValues(phase).Observe(max(d, 0).Seconds())
}

// enginePhases records the executor's phases that happened (a phase of
// zero did not: a standard checker compiles nothing) and its cache flags:
// a compile step that ran or was served counts as a miss or a hit, and a
// sandbox that was made ready as warm or cold.
func (p *promMetrics) enginePhases(e engine.Phases) {
	for _, ph := range []struct {
		name string
		d    time.Duration
		did  bool
	}{
		{phaseSandbox, e.Sandbox, e.Sandbox > 0 || e.SandboxWarm},
		{phaseCompile, e.Compile, e.Compile > 0 || e.CompileCached},
		{phaseChecker, e.Checker, e.Checker > 0 || e.CheckerCached},
		{phaseRun, e.Run, e.Run > 0},
		{phaseCheck, e.Check, e.Check > 0},
	} {
		if ph.did {
			p.observePhase(ph.name, ph.d)
		}
	}
	if e.Compile > 0 || e.CompileCached {
		p.compileCache.WithLabelValues("submission", hitOrMiss(e.CompileCached)).Inc()
	}
	if e.Checker > 0 || e.CheckerCached {
		p.compileCache.WithLabelValues("checker", hitOrMiss(e.CheckerCached)).Inc()
	}
	if e.Sandbox > 0 || e.SandboxWarm {
		start := "cold"
		if e.SandboxWarm {
			start = "warm"
		}
		p.sandboxes.WithLabelValues(start).Inc()
	}
}

func hitOrMiss(hit bool) string {
	if hit {
		return "hit"
	}
	return "miss"
}
