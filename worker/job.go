package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/engine"
)

// job is one lease this process holds, from claim to posted result.
type job struct {
	c   machineapi.ClaimedJob
	key string

	// execCtx ends execution (lease lost, deadline, shutdown); postCtx ends
	// result posting (deadline, stop at once). Both end at the local deadline.
	execCtx    context.Context
	cancelExec context.CancelCauseFunc
	postCtx    context.Context
	cancelPost context.CancelCauseFunc

	// claimed is when the lease was granted (start's since); execStart
	// and judgeStart (under mu) time the compile and run phases.
	claimed    time.Time
	execStart  time.Time
	judgeStart time.Time
	// timing is what runJob measured of the job's phases (its goroutine
	// only), sent with the result.
	timing jobTiming

	// slots is how many of the node's slots the job holds while it runs
	// (its slot weight, jobSlots); passed (under the node's mu) is how many
	// of them the jobs its result leased took over (the slot cycle), which
	// its end does not free again.
	slots, passed int

	mu       sync.Mutex
	deadline time.Time
	timer    *time.Timer
	posting  bool // execution is over; a LOST renew no longer stops anything
	lost     error
	seq      int64
	phase    machineapi.Phase
	done     int
	total    int
	// reported is the phase the control plane last acknowledged in a renew;
	// onPhase is told when the phase moves past it (Node.phaseChanged).
	reported machineapi.Phase
	onPhase  func()
}

// Report implements engine.ProgressSink; cases only move forward.
func (j *job) Report(p engine.Progress) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ph := machineapi.PhaseJudging
	if p.Phase == engine.PhaseCompiling {
		ph = machineapi.PhaseCompiling
	} else if j.judgeStart.IsZero() {
		j.judgeStart = time.Now()
	}
	if ph == j.phase && p.CasesDone <= j.done && p.CasesTotal == j.total {
		return
	}
	j.phase = ph
	j.done = min(max(p.CasesDone, j.done), 1000)
	j.total = min(max(p.CasesTotal, 0), 1000)
	j.seq++
	if ph != j.reported && j.onPhase != nil {
		j.onPhase()
	}
}

// markStarted is the start signal: judging begins. The progress sequence
// moves to at least 1 and an early renew reports it, which tells the control
// plane that this attempt started (until then, a lease that ends is not
// counted as an attempt of the job).
func (j *job) markStarted() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	j.reported = "" // unreported until a renew carries it
	if j.onPhase != nil {
		j.onPhase()
	}
}

// unreportedPhase reports whether the control plane has not yet seen the
// job's current phase and still needs a renew to see it: a job that is
// posting its result is past judging, and its result tells more than a
// phase would.
func (j *job) unreportedPhase() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.phase != j.reported && !j.posting
}

// acknowledged records that a renew carrying progress p succeeded.
func (j *job) acknowledged(p machineapi.LeaseProgress) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.reported = p.Phase
}

func (j *job) progress() machineapi.LeaseProgress {
	j.mu.Lock()
	defer j.mu.Unlock()
	return machineapi.LeaseProgress{JobId: j.c.JobId, LeaseEpoch: j.c.LeaseEpoch, ProgressSeq: j.seq, Phase: j.phase,
		CasesDone: int32(j.done), CasesTotal: int32(max(j.total, j.done))}
}

// start registers a claimed job and runs it in its own goroutine.
//
// from, when not nil, is the finished job whose result leased c: c takes
// over its slots (as many as it needs and from still holds), in the same
// critical section, so busy never counts a slot twice (a cycle's next
// result would then carry no claim) nor frees it in between (the claim
// loop would claim it too). busy counts slots, each job its weight.
//
// since is when the lease's remaining time holds from: when the replica
// that granted it answered (a claim), or when the try that replica answered
// was sent (a result's slot-cycle claim) — never when an earlier try went
// to another replica.
func (n *Node) start(jobsCtx, hardCtx context.Context, wg *sync.WaitGroup, c machineapi.ClaimedJob, since time.Time, from *job) {
	log := n.log.With("node_id", n.nodeID, "job_id", c.JobId, "lease_epoch", c.LeaseEpoch)
	deadline := since.Add(time.Duration(c.LeaseRemainingMs)*time.Millisecond - n.times().margin)
	if time.Until(deadline) <= 0 {
		n.m.leasesDroppedFresh.Add(1)
		log.Warn("claimed job arrived with its lease already past the local deadline; left to expire",
			"lease_remaining_ms", c.LeaseRemainingMs, "answered_ms_ago", time.Since(since).Milliseconds())
		return
	}
	// A fresh lease shows as COMPILING on the control plane until a renew
	// says otherwise, so that is the phase it already knows.
	j := &job{c: c, key: jobKey(c.JobId, c.LeaseEpoch), deadline: deadline, phase: machineapi.PhaseCompiling,
		reported: machineapi.PhaseCompiling, onPhase: n.phaseChanged, claimed: since, slots: jobSlots(c),
		timing: jobTiming{queued: c.QueuedMs}}
	if c.Manifest.Kind == machineapi.ManifestKindSql {
		j.phase = machineapi.PhaseJudging
		n.phaseChanged()
	}
	j.execCtx, j.cancelExec = context.WithCancelCause(jobsCtx)
	j.postCtx, j.cancelPost = context.WithCancelCause(hardCtx)
	j.timer = time.AfterFunc(time.Until(deadline), func() {
		j.cancelExec(errLocalDeadline)
		j.cancelPost(errLocalDeadline)
	})
	n.mu.Lock()
	n.jobs[j.key] = j
	n.busy += j.slots - from.passOn(j.slots)
	n.mu.Unlock()
	n.m.jobsStarted.Add(1)
	log.Info("job leased", "kind", c.Kind, "attempt", c.Attempt, "lease_remaining_ms", c.LeaseRemainingMs)
	if c.QueuedMs != nil {
		n.prom.observePhase(phaseQueue, time.Duration(*c.QueuedMs)*time.Millisecond)
	}
	wg.Go(func() {
		defer func() {
			j.timer.Stop()
			j.cancelExec(nil)
			j.cancelPost(nil)
			n.mu.Lock()
			delete(n.jobs, j.key)
			n.busy -= j.slots - j.passed
			n.mu.Unlock()
			n.poke()
		}()
		n.runJob(j, log)
	})
}

// inputsUnavailable is returned by prepare when this node could not make
// the job's inputs available (its cache, its network to the control plane)
// rather than the inputs being wrong: the lease is given back unrun, not
// failed.
type inputsUnavailable struct{ err error }

func (e *inputsUnavailable) Error() string {
	return "inputs unavailable on this node: " + e.err.Error()
}

func (e *inputsUnavailable) Unwrap() error { return e.err }

// abandonError is returned by prepare when the lease is gone (409 or 404 on
// a download): nothing is posted for it.
type abandonError struct{ err error }

func (e *abandonError) Error() string { return "lease gone: " + e.err.Error() }

func (e *abandonError) Unwrap() error { return e.err }

func (n *Node) runJob(j *job, log *slog.Logger) {
	var verdict engine.Verdict
	outcome := jobOutcomeStopped
	defer func() {
		j.mu.Lock()
		execStart, judgeStart := j.execStart, j.judgeStart
		j.mu.Unlock()
		n.prom.jobDone(string(j.c.Kind), outcome, j.claimed, execStart, judgeStart, time.Now(),
			j.c.Manifest.Kind != machineapi.ManifestKindSql)
	}()
	prepStart := time.Now()
	task, release, err := n.prepare(j.execCtx, j)
	j.timing.download = time.Since(prepStart)
	started := err == nil
	if started {
		n.prom.observePhase(phaseDownload, j.timing.download)
		n.m.executions.Add(1)
		j.markStarted()
		execStart := time.Now()
		j.mu.Lock()
		j.execStart = execStart
		j.mu.Unlock()
		n.m.executing.Add(int64(j.slots))
		verdict, err = n.backend.Execute(j.execCtx, task, j)
		n.m.executing.Add(-int64(j.slots))
		// The executor's phases are measurements whatever became of the
		// job: they count even when nothing is posted.
		j.timing.execute, j.timing.engine = time.Since(execStart), verdict.Phases
		n.prom.enginePhases(verdict.Phases)
	}
	release()

	j.mu.Lock()
	j.posting = true
	lost := j.lost
	j.mu.Unlock()
	if lost != nil {
		outcome = jobOutcomeAbandoned
		n.m.leasesLost.Add(1)
		log.Warn("job abandoned; nothing is posted", "reason", lost)
		return
	}
	var ab *abandonError
	if errors.As(err, &ab) {
		outcome = jobOutcomeAbandoned
		n.m.leasesLost.Add(1)
		log.Warn("job abandoned; nothing is posted", "reason", err)
		return
	}
	if reason, ok := giveBackReason(j, started, err); ok {
		outcome = jobOutcomeReleased
		log.Warn("job not started; giving its lease back", "reason", reason, "err", err)
		n.releaseLeases([]machineapi.LeaseRef{{JobId: j.c.JobId, LeaseEpoch: j.c.LeaseEpoch}}, reason)
		return
	}
	postCtx := j.postCtx
	// A verdict that came back before a cancellation is still posted (the
	// poster's context decides whether the lease can still be valid).
	if cause := context.Cause(j.execCtx); err != nil && j.execCtx.Err() != nil {
		switch {
		case errors.Is(cause, errGraceOver):
			// Tell the control plane now rather than let the lease run out:
			// the job is retried elsewhere sooner. Bounded, best effort.
			var cancel context.CancelFunc
			postCtx, cancel = context.WithTimeout(j.postCtx, 5*time.Second)
			defer cancel()
			err = engine.Infra(engine.InfraCancelled, cause)
		default:
			if errors.Is(cause, errLocalDeadline) {
				n.m.deadlineCancels.Add(1)
			}
			log.Warn("execution stopped; nothing is posted", "reason", cause)
			return
		}
	}
	req := machineapi.ResultRequest{LeaseEpoch: j.c.LeaseEpoch}
	if n.times().resultPhases {
		req.Phases = resultPhases(j.timing, j.claimed)
	}
	if err != nil {
		req.Outcome, req.Error = machineapi.OutcomeError, infraOf(err)
		outcome = jobOutcomeInfra
		n.prom.infraError(err)
		log.Warn("infrastructure error", "code", req.Error.Code, "err", err)
		if dependencyFault(err) {
			// Before the post: its result then claims no next job.
			n.dependencyDown(err)
		}
	} else if v, verr := verdictOf(verdict); verr != nil {
		req.Outcome, req.Error = machineapi.OutcomeError, infraOf(engine.Infra(engine.InfraInternal, verr))
		outcome = jobOutcomeInfra
		n.prom.infraError(engine.Infra(engine.InfraInternal, verr))
		log.Error("executor defect", "err", verr)
	} else {
		req.Outcome, req.Verdict = machineapi.OutcomeVerdict, &v
		outcome = string(v.Status)
	}
	n.post(postCtx, j, req, log)
}

// giveBackReason says whether a job that did not start should be given back
// rather than reported: its inputs were unavailable on this node, or the
// node is draining or stopping. Wrong inputs and a node that cannot judge
// the job's kind are reported as infrastructure errors (they count).
func giveBackReason(j *job, started bool, err error) (machineapi.ReleaseReason, bool) {
	if started || err == nil {
		return "", false
	}
	if j.execCtx.Err() != nil {
		switch cause := context.Cause(j.execCtx); {
		case errors.Is(cause, errGraceOver):
			return machineapi.ReleaseReasonDraining, true
		case errors.Is(cause, errHardStop):
			return machineapi.ReleaseReasonShuttingDown, true
		}
		return "", false // the lease ended (deadline, lost) or the session did
	}
	var iu *inputsUnavailable
	if errors.As(err, &iu) {
		return machineapi.ReleaseReasonInputsUnavailable, true
	}
	return "", false
}

// prepare downloads every artifact the job needs into the cache (pinned until
// release) and builds the engine task.
func (n *Node) prepare(ctx context.Context, j *job) (engine.Task, func(), error) {
	var handles []*artifact.Handle
	release := func() {
		for _, h := range handles {
			h.Release()
		}
	}
	c := j.c
	task := engine.Task{NodeID: n.execID, JobID: c.JobId, LeaseEpoch: c.LeaseEpoch, Source: []byte(c.Submission.Source),
		Files: sourceFilesOf(c.Submission.Files)}
	if string(c.Pool) != n.cfg.Pool || string(c.Runtime.Pool) != n.cfg.Pool {
		return task, release, engine.Infraf(engine.InfraConfig, "job of pool %s sent to a %s node", c.Pool, n.cfg.Pool)
	}
	m := c.Manifest
	if m.Kind == machineapi.ManifestKindSql {
		p, err := sqlProblemOf(m.Sql)
		if err != nil {
			return task, release, engine.Infra(engine.InfraCorruptInput, err)
		}
		task.SQL = p
		// A SQL manifest has no case files; one listed case carries the weight.
		for _, mc := range m.Cases {
			task.Cases = append(task.Cases, engine.Case{ID: mc.CaseId, Weight: mc.Weight})
		}
		return task, release, nil
	}
	// The job's language picks the spec (cpp20 is not cpp17): the pool only
	// picks the node.
	rt, err := n.runtimeOf(c.Runtime.Language)
	if err != nil {
		return task, release, err
	}
	if rt.Pool != n.cfg.Pool {
		return task, release, engine.Infraf(engine.InfraConfig, "language %s is judged by pool %s, not by this %s node", c.Runtime.Language, rt.Pool, n.cfg.Pool)
	}
	task.Runtime = rt
	task.Limits = limitsOf(m.Limits)
	task.IO = fileIOOf(m.Io)
	if task.Checker, err = checkerOf(m.Checker); err != nil {
		return task, release, engine.Infra(engine.InfraCorruptInput, err)
	}
	get := func(digest string, size int64) (string, error) {
		h, err := n.fetch(ctx, j, digest, size)
		if err != nil {
			return "", err
		}
		handles = append(handles, h)
		return h.Path(), nil
	}
	for _, mc := range m.Cases {
		in, err := get(mc.InputSha256, mc.InputSize)
		if err != nil {
			return task, release, err
		}
		out, err := get(mc.OutputSha256, mc.OutputSize)
		if err != nil {
			return task, release, err
		}
		task.Cases = append(task.Cases, engine.Case{ID: mc.CaseId, InputPath: in, ExpectedPath: out, Weight: mc.Weight})
	}
	if task.Subtasks, err = subtasksOf(m.Subtasks, task.Cases); err != nil {
		return task, release, engine.Infra(engine.InfraCorruptInput, err)
	}
	if task.Grader, err = n.graderOf(m.Grader, c.Runtime.Language, get); err != nil {
		return task, release, err
	}
	if sp := m.Checker.Special; sp != nil {
		path, err := get(sp.SourceSha256, sp.SourceSize)
		if err != nil {
			return task, release, err
		}
		if task.Checker.SpecialSource, err = os.ReadFile(path); err != nil {
			return task, release, engine.Infraf(engine.InfraInternal, "special checker source: %w", err)
		}
		// A checker in another language runs with that language's spec.
		if task.Checker.SpecialRuntime, err = n.runtimeOf(sp.Language); err != nil {
			return task, release, err
		}
		if sp.Files != nil {
			for _, f := range *sp.Files {
				path, err := get(f.Sha256, f.Size)
				if err != nil {
					return task, release, err
				}
				data, err := os.ReadFile(path)
				if err != nil {
					return task, release, engine.Infraf(engine.InfraInternal, "special checker file %s: %w", f.Name, err)
				}
				task.Checker.SpecialFiles = append(task.Checker.SpecialFiles, engine.CheckerFile{Name: f.Name, Data: data})
			}
		}
	}
	return task, release, nil
}

// runtimeOf returns the spec of a code language id: an id the contract does
// not list as a code language is corrupt input, one the backend cannot build
// a spec for is the node's configuration fault.
func (n *Node) runtimeOf(language string) (engine.RuntimeSpec, error) {
	if _, err := codePoolOf(language); err != nil {
		return engine.RuntimeSpec{}, engine.Infra(engine.InfraCorruptInput, err)
	}
	rt, err := n.backend.Runtime(language)
	if err != nil {
		return engine.RuntimeSpec{}, engine.Infra(engine.InfraConfig, err)
	}
	return rt, nil
}

// fetch acquires one verified artifact. Network errors and 5xx are retried
// with backoff while the lease lives; a corrupt body never is (it is an
// infrastructure error, reported so the job is retried elsewhere); 409 means
// the lease is gone.
func (n *Node) fetch(ctx context.Context, j *job, digest string, size int64) (*artifact.Handle, error) {
	backoff := n.cfg.RetryBase
	for attempt := 1; ; attempt++ {
		tok := n.cl.token.Load()
		h, err := n.cache.Acquire(ctx, digest, size, func(ctx context.Context) (io.ReadCloser, error) {
			n.m.downloads.Add(1)
			return n.cl.download(ctx, j.c.JobId, digest, j.c.LeaseEpoch)
		})
		if err == nil {
			return h, nil
		}
		if ctx.Err() != nil {
			return nil, engine.Infra(engine.InfraCancelled, context.Cause(ctx))
		}
		var ae *APIError
		switch {
		case errors.Is(err, artifact.ErrCorrupt):
			n.m.corruptDownloads.Add(1)
			return nil, engine.Infraf(engine.InfraCorruptInput, "artifact %s: %w", digest, err)
		case errors.Is(err, artifact.ErrTooLarge):
			// Another node's cache may hold it: give the job back.
			return nil, &inputsUnavailable{engine.Infraf(engine.InfraConfig, "artifact %s does not fit the cache budget (KECE_CACHE_MAX_BYTES): %w", digest, err)}
		case errors.Is(err, artifact.ErrSizeMismatch), errors.Is(err, artifact.ErrInvalid):
			return nil, engine.Infraf(engine.InfraCorruptInput, "artifact %s: %w", digest, err)
		case errors.Is(err, artifact.ErrClosed):
			return nil, &inputsUnavailable{engine.Infra(engine.InfraCancelled, err)}
		case errors.As(err, &ae) && ae.Code == machineapi.ErrorCodeArtifactNotInManifest:
			return nil, engine.Infraf(engine.InfraCorruptInput, "artifact %s is not in the job's manifest: %w", digest, err)
		case errors.As(err, &ae) && (ae.Status == http.StatusConflict || ae.Code == machineapi.ErrorCodeJobNotFound):
			return nil, &abandonError{err}
		case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
			return nil, engine.Infraf(engine.InfraCorruptInput, "artifact %s missing on the control plane: %w", digest, err)
		}
		d, ok := n.handleCallError(ctx, err, tok, &backoff)
		if !ok {
			return nil, engine.Infraf(engine.InfraInternal, "download %s: %w", digest, err)
		}
		if attempt >= 5 {
			// The network or this node's disk, not the job: give it back.
			return nil, &inputsUnavailable{engine.Infraf(engine.InfraInternal, "download %s: %w", digest, err)}
		}
		if !n.sleep(ctx, d) {
			return nil, engine.Infra(engine.InfraCancelled, context.Cause(ctx))
		}
	}
}

// post sends the result, retrying the same payload on network errors, 5xx and
// 429 while the lease can still be valid (ctx ends at the local deadline).
func (n *Node) post(ctx context.Context, j *job, req machineapi.ResultRequest, log *slog.Logger) {
	backoff := n.cfg.RetryBase
	fellBack := false
	// The claim for the slot this result frees goes with it, unchanged on
	// every retry (its request id answers a lost answer's leases again).
	req.Claim = n.cycleClaim(j)
	start := time.Now()
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			n.m.resultRetries.Add(1)
		}
		tok := n.cl.token.Load()
		r, sent, err := n.cl.submit(ctx, j.c.JobId, req, j.localDeadline())
		if err == nil {
			n.prom.observePhase(phasePost, time.Since(start))
			n.m.posted(r.Disposition)
			next := 0
			if r.Jobs != nil {
				next = len(*r.Jobs)
			}
			log.Info("result posted", "outcome", req.Outcome, "disposition", r.Disposition, "job_state", r.JobState,
				"attempt", attempt, "next_jobs", next)
			if next > 0 {
				// They run in the slot this result freed.
				n.startOrGiveBack(*r.Jobs, sent, "jobs leased with a result", &n.m.cycleJobs, j)
			}
			return
		}
		if ctx.Err() != nil {
			log.Warn("result not posted: the lease can no longer be valid", "reason", context.Cause(ctx), "last_err", err)
			return
		}
		var ae *APIError
		if errors.As(err, &ae) {
			switch ae.Status {
			case http.StatusConflict, http.StatusNotFound:
				n.m.resultsAbandoned.Add(1)
				log.Warn("result refused for this lease; job abandoned", "code", ae.Code, "err", err)
				return
			case http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity, http.StatusBadRequest:
				n.m.nodeDefects.Add(1)
				log.Error("NODE DEFECT: the control plane refused the result payload; it is not retried as is", "code", ae.Code, "err", err)
				if fellBack || req.Outcome != machineapi.OutcomeVerdict {
					return
				}
				fellBack = true
				req = machineapi.ResultRequest{LeaseEpoch: req.LeaseEpoch, Outcome: machineapi.OutcomeError, Claim: req.Claim,
					Error: &machineapi.InfraError{Code: machineapi.InfraErrorCodeInternal,
						Message: clip(fmt.Sprintf("node produced a result the control plane refused: %s", ae.Message), maxMessage)}}
				continue
			}
		}
		log.Warn("posting the result failed; retrying the same payload", "err", err, "attempt", attempt)
		d, ok := n.handleCallError(ctx, err, tok, &backoff)
		if !ok {
			return
		}
		if !n.sleep(ctx, d) {
			log.Warn("result not posted: the lease can no longer be valid", "reason", context.Cause(ctx))
			return
		}
	}
}

// cycleCtx is what starts a job outside the claim loop: the claim loop's
// context (ended when the node stops claiming), the jobs' contexts and
// their wait group, as Run made them.
type cycleCtx struct {
	claim, jobs, hard context.Context
	wg                *sync.WaitGroup
}

// cycleClaim is the claim j's result carries for the slots it frees (the
// slot cycle: result and next claim in one call, one transaction on the
// control plane), or nil: the control plane does not take one, the node
// claims nothing new (draining, stopping, refused), or no slot is free once
// j ends (an admin lowered the slots while it ran; its job still counts in
// busy). It asks for every slot free once j ends, j's own and any the node
// had idle besides: a job heavier than one slot then fits as soon as the
// node has room for it, rather than when the claim loop's long-poll, sent
// when fewer were free, comes back (docs/scheduling.md, "Slot weights").
func (n *Node) cycleClaim(j *job) *machineapi.ResultClaim {
	n.mu.Lock()
	defer n.mu.Unlock()
	free := min(n.slotsLocked()-n.busy+j.slots-j.passed, contracts.BatchMax)
	if !n.timing.resultClaims || !n.mayClaimLocked() || n.failed() || n.cycle.claim == nil || n.cycle.claim.Err() != nil ||
		free <= 0 {
		return nil
	}
	return &machineapi.ResultClaim{FreeSlots: int32(free), RequestId: newClaimRequestID()}
}
