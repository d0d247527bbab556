package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/store"
)

// parseID parses a BIGINT id that travels as a decimal string.
func parseID(field, v string) (int64, error) {
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, apiErr(http.StatusBadRequest, codeRequestInvalid, fmt.Errorf("%s %q is not a positive decimal id", field, v))
	}
	return id, nil
}

func idString(id int64) string { return strconv.FormatInt(id, 10) }

// JoinNode trades a one-time code for the node credential (shown once).
func (m machineAPI) JoinNode(ctx context.Context, req machineapi.JoinNodeRequestObject) (machineapi.JoinNodeResponseObject, error) {
	var pool string
	if req.Body.Pool != nil {
		pool = string(*req.Body.Pool)
	}
	j, err := m.s.store.Credentials().JoinPool(ctx, req.Body.JoinCode, pool)
	if errors.Is(err, store.ErrUnauthenticated) {
		return nil, apiErr(http.StatusUnauthorized, codeJoinCodeInvalid, errors.New("unknown join code"))
	}
	if errors.Is(err, store.ErrJoinPoolMismatch) {
		// Not spent: the process of the right pool can still join with it.
		m.s.log.WarnContext(ctx, "join refused: code of another pool's node", "pool", pool, "err", err)
		return nil, apiErr(http.StatusConflict, codePoolMismatch, fmt.Errorf("%w; the code was not used", err))
	}
	if err != nil {
		return nil, err
	}
	m.s.log.InfoContext(ctx, "node joined", "node_id", j.Node.ID, "pool", j.Node.Pool)
	return machineapi.JoinNode201JSONResponse{Credential: j.Credential, NodeId: idString(j.Node.ID),
		HostGroupId: idString(j.Node.HostGroupID), Pool: machineapi.Pool(j.Node.Pool)}, nil
}

// OpenSession opens (or resumes) the session of a process boot.
func (m machineAPI) OpenSession(ctx context.Context, req machineapi.OpenSessionRequestObject) (machineapi.OpenSessionResponseObject, error) {
	if req.Body.ProtocolVersion != contracts.ProtocolVersion {
		return nil, apiErr(http.StatusBadRequest, codeProtocolUnsupported,
			fmt.Errorf("protocol version %d is not supported; this control plane speaks %d", req.Body.ProtocolVersion, contracts.ProtocolVersion))
	}
	cred, _ := ctx.Value(credentialKey).(string)
	sess, err := m.s.store.Credentials().OpenSession(ctx, cred, req.Body.BootId)
	if errors.Is(err, store.ErrUnauthenticated) {
		return nil, apiErr(http.StatusUnauthorized, codeCredentialInvalid, errors.New("unknown node credential"))
	}
	if err != nil {
		return nil, err
	}
	m.s.log.InfoContext(ctx, "node session opened", "node_id", sess.NodeID, "session_epoch", sess.SessionEpoch)
	if sess.RequeuedLeases > 0 {
		m.s.log.WarnContext(ctx, "node restarted: its previous session's leases requeued", "node_id", sess.NodeID,
			"session_epoch", sess.SessionEpoch, "requeued", sess.RequeuedLeases)
	}
	return machineapi.OpenSession200JSONResponse{
		SessionToken: sess.Token, SessionEpoch: sess.SessionEpoch, NodeId: idString(sess.NodeID),
		Pool: machineapi.Pool(sess.Pool), HostGroupId: idString(sess.HostGroupID),
		DesiredState: machineapi.DesiredState(sess.State), Slots: int32(sess.Slots),
		HeartbeatIntervalMs: m.s.cfg.HeartbeatInterval.Milliseconds(),
		LeaseTtlMs:          m.s.store.Config().LeaseTTL.Milliseconds(),
		RenewIntervalMs:     m.s.cfg.RenewInterval.Milliseconds(),
		ClaimWaitMaxMs:      m.s.cfg.ClaimWaitMax.Milliseconds(),
		ResultClaims:        new(true),
		ResultPhases:        new(true),
	}, nil
}

// SendHeartbeat records observed health and returns the desired state.
func (m machineAPI) SendHeartbeat(ctx context.Context, req machineapi.SendHeartbeatRequestObject) (machineapi.SendHeartbeatResponseObject, error) {
	sess, err := sessionFrom(ctx)
	if err != nil {
		return nil, err
	}
	health, _ := json.Marshal(req.Body.Dependencies)
	report := store.HeartbeatReport{
		RuntimeVersion: req.Body.RuntimeVersion, Health: health, SlotsBusy: int(req.Body.SlotsBusy), Draining: req.Body.Draining,
	}
	if req.Body.Languages != nil {
		report.Languages = make([]store.LanguageReport, 0, len(*req.Body.Languages))
		for _, l := range *req.Body.Languages {
			if l.Pool != machineapi.Pool(sess.Pool) {
				return nil, apiErr(http.StatusUnprocessableEntity, codeRequestInvalid,
					fmt.Errorf("languages: %s is judged by pool %s, this node serves %s", l.Id, l.Pool, sess.Pool))
			}
			report.Languages = append(report.Languages, store.LanguageReport{ID: l.Id, Pool: string(l.Pool),
				Standard: l.Standard, Version: l.Version, CompileCommand: l.CompileCommand, RunCommand: l.RunCommand,
				EntryPoint: l.EntryPoint, ExtraMemoryBytes: l.ExtraMemoryBytes, MinMemoryBytes: l.MinMemoryBytes})
		}
	}
	if req.Body.Features != nil {
		report.Features = make([]string, len(*req.Body.Features))
		for i, f := range *req.Body.Features {
			report.Features[i] = string(f)
		}
	}
	n, err := m.s.store.Credentials().Heartbeat(ctx, sess.NodeSession, report)
	if err != nil {
		return nil, err
	}
	return machineapi.SendHeartbeat200JSONResponse{DesiredState: machineapi.DesiredState(n.DesiredState),
		ConfigRevision: n.Revision, Slots: int32(n.Slots), OfflineAfterMs: m.s.store.Config().OfflineAfter.Milliseconds()}, nil
}

// ClaimJobs is the long-poll: try to claim; if nothing, wait for a wake-up
// of the node's pool (no connection or transaction held) until the wait ends.
func (m machineAPI) ClaimJobs(ctx context.Context, req machineapi.ClaimJobsRequestObject) (machineapi.ClaimJobsResponseObject, error) {
	sess, err := sessionFrom(ctx)
	if err != nil {
		return nil, err
	}
	var requestID string
	if req.Body.RequestId != nil {
		requestID = *req.Body.RequestId
	}
	wait := min(time.Duration(req.Body.WaitMs)*time.Millisecond, m.s.cfg.ClaimWaitMax)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	// Capacity freed in another replica (or backoff ending) wakes no one, so
	// a waiter also retries now and then.
	retry := time.NewTicker(2*time.Second + time.Duration(rand.IntN(500))*time.Millisecond)
	defer retry.Stop()
	for {
		jobs, again, err := m.claimOrWait(ctx, sess, int(req.Body.FreeSlots), requestID, wait, deadline.C, retry.C)
		if err != nil {
			return nil, err
		}
		if len(jobs) > 0 {
			return m.claimResponse(ctx, jobs)
		}
		if !again {
			return machineapi.ClaimJobs200JSONResponse{Jobs: []machineapi.ClaimedJob{}}, nil
		}
	}
}

// claimOrWait tries one claim; when it gets nothing it waits for a reason to
// try again (again) or for the poll to end (deadline, shutdown, cancel).
// The wake channel is taken before the claim so a wake-up between the claim
// and the wait is not missed.
func (m machineAPI) claimOrWait(ctx context.Context, sess store.SessionInfo, free int, requestID string, wait time.Duration,
	deadline, retry <-chan time.Time) (jobs []store.ClaimedJob, again bool, err error) {
	wake := m.s.claims.Watch(sess.Pool)
	defer m.s.claims.Done(wake)
	jobs, err = m.s.store.Leases().ClaimRequest(ctx, sess.NodeSession, free, requestID)
	if err != nil || len(jobs) > 0 {
		return jobs, false, err
	}
	// Jobs in retry backoff wake no one when it ends: sleep until the soonest
	// one is ready (capacity limits may still say no then). A job that is
	// ready but was not claimable (capacity, or another node holds it) is
	// left to the wake-up and retry paths: no spin.
	var backoffEnds <-chan time.Time
	if next, ok, err := m.s.store.Leases().NextReady(ctx, sess.Pool, sess.NodeID); err == nil && ok && next > 0 && next < wait {
		t := time.NewTimer(next + 5*time.Millisecond)
		defer t.Stop()
		backoffEnds = t.C
	}
	m.s.parkedClaims.Add(1)
	defer m.s.parkedClaims.Add(-1)
	select {
	case <-wake:
		return nil, true, nil
	case <-backoffEnds:
		return nil, true, nil
	case <-retry:
		return nil, true, nil
	case <-deadline:
		return nil, false, nil
	case <-m.s.closing:
		return nil, false, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

func (m machineAPI) claimResponse(ctx context.Context, jobs []store.ClaimedJob) (machineapi.ClaimJobsResponseObject, error) {
	out, err := m.wireJobs(ctx, jobs)
	if err != nil {
		return nil, err
	}
	return machineapi.ClaimJobs200JSONResponse{Jobs: out}, nil
}

// wireJobs converts leases for the node (a claim's or a result's claim).
func (m machineAPI) wireJobs(ctx context.Context, jobs []store.ClaimedJob) ([]machineapi.ClaimedJob, error) {
	out := make([]machineapi.ClaimedJob, 0, len(jobs))
	for _, j := range jobs {
		man, err := m.s.manifests.get(ctx, m.s.store, j.ManifestID)
		if err != nil {
			return nil, err
		}
		var snap store.Snapshot
		if err := json.Unmarshal(j.Snapshot, &snap); err != nil {
			return nil, fmt.Errorf("job %d: request snapshot: %w", j.JobID, err)
		}
		if j.Replayed {
			m.s.log.InfoContext(ctx, "claim retried: same lease answered again", "job_id", j.JobID, "lease_epoch", j.LeaseEpoch)
		} else {
			m.s.log.InfoContext(ctx, "job leased", "job_id", j.JobID, "lease_epoch", j.LeaseEpoch, "kind", j.Kind)
		}
		slots := int32(max(j.Slots, 1))
		var queued *int64
		if !j.Replayed {
			// The database clock's wait; a repeated answer's was told already.
			queued = ptr(max(j.ReadyWait.Milliseconds(), 0))
		}
		out = append(out, machineapi.ClaimedJob{
			JobId: idString(j.JobID), LeaseEpoch: j.LeaseEpoch, LeaseRemainingMs: j.LeaseRemaining.Milliseconds(),
			Kind: machineapi.JobKind(j.Kind), Pool: machineapi.Pool(j.Pool), Attempt: int32(j.Attempt),
			Manifest: man, ManifestId: idString(j.ManifestID),
			Submission: machineapi.JobSubmission{SubmissionType: j.SubmissionType, SubmissionId: j.SubmissionID,
				Language: snap.Language, Source: snap.Source, Files: wireSourceFiles(snap.Files)},
			Runtime: machineapi.JobRuntime{Language: j.Language, Pool: machineapi.Pool(j.Pool)},
			Slots:   &slots, QueuedMs: queued,
		})
	}
	return out, nil
}

// RenewLeases extends the session's leases in one transaction.
func (m machineAPI) RenewLeases(ctx context.Context, req machineapi.RenewLeasesRequestObject) (machineapi.RenewLeasesResponseObject, error) {
	sess, err := sessionFrom(ctx)
	if err != nil {
		return nil, err
	}
	items := make([]store.RenewItem, 0, len(req.Body.Leases))
	for _, l := range req.Body.Leases {
		id, err := parseID("jobId", l.JobId)
		if err != nil {
			return nil, err
		}
		items = append(items, store.RenewItem{JobID: id, LeaseEpoch: l.LeaseEpoch, ProgressSeq: l.ProgressSeq,
			Phase: string(l.Phase), CasesDone: int(l.CasesDone), CasesTotal: int(l.CasesTotal)})
	}
	res, err := m.s.store.Leases().Renew(ctx, sess.NodeSession, items)
	if err != nil {
		return nil, err
	}
	out := make([]machineapi.LeaseAnswer, len(res))
	for i, r := range res {
		out[i] = machineapi.LeaseAnswer{JobId: idString(r.JobID), LeaseEpoch: r.LeaseEpoch, State: machineapi.LeaseState(r.State)}
		if r.State == store.RenewOK {
			ms := r.Remaining.Milliseconds()
			out[i].LeaseRemainingMs = &ms
		}
	}
	return machineapi.RenewLeases200JSONResponse{Leases: out}, nil
}

// ReleaseLeases gives leases back at once (the node will not run them).
func (m machineAPI) ReleaseLeases(ctx context.Context, req machineapi.ReleaseLeasesRequestObject) (machineapi.ReleaseLeasesResponseObject, error) {
	sess, err := sessionFrom(ctx)
	if err != nil {
		return nil, err
	}
	items := make([]store.ReleaseItem, 0, len(req.Body.Leases))
	for _, l := range req.Body.Leases {
		id, err := parseID("jobId", l.JobId)
		if err != nil {
			return nil, err
		}
		items = append(items, store.ReleaseItem{JobID: id, LeaseEpoch: l.LeaseEpoch})
	}
	res, err := m.s.store.Leases().Release(ctx, sess.NodeSession, items, string(req.Body.Reason))
	if err != nil {
		return nil, err
	}
	out := make([]machineapi.ReleaseAnswer, len(res))
	for i, r := range res {
		out[i] = machineapi.ReleaseAnswer{JobId: idString(r.JobID), LeaseEpoch: r.LeaseEpoch, State: machineapi.ReleaseState(r.State)}
		if r.JobState != "" {
			m.s.log.InfoContext(ctx, "lease released", "job_id", r.JobID, "lease_epoch", r.LeaseEpoch, "node_id", sess.NodeID,
				"reason", req.Body.Reason, "job_state", r.JobState)
		}
	}
	// Released leases free capacity: the lease engine's decorator has woken
	// this replica's waiters (control/lease/observed.go).
	return machineapi.ReleaseLeases200JSONResponse{Leases: out}, nil
}

// DownloadArtifact streams one file of the job's manifest to the lease holder.
func (m machineAPI) DownloadArtifact(ctx context.Context, req machineapi.DownloadArtifactRequestObject) (machineapi.DownloadArtifactResponseObject, error) {
	sess, err := sessionFrom(ctx)
	if err != nil {
		return nil, err
	}
	jobID, err := parseID("jobId", req.JobId)
	if err != nil {
		return nil, err
	}
	if _, err := m.s.store.Manifests().CheckArtifactAccess(ctx, sess.NodeSession, jobID, req.Params.XKeceLeaseEpoch, req.Sha256); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, apiErr(http.StatusNotFound, codeJobNotFound, err)
		}
		return nil, err
	}
	f, size, err := m.s.artifacts.Open(req.Sha256)
	if errors.Is(err, artifact.ErrNotFound) {
		m.s.log.ErrorContext(ctx, "artifact referenced by a manifest is missing from the store", "sha256", req.Sha256, "job_id", jobID)
		return nil, apiErr(http.StatusNotFound, codeArtifactMissing, err)
	}
	if err != nil {
		return nil, err
	}
	// The strict handler copies Body to the response; closing the file when
	// the request ends is enough.
	context.AfterFunc(ctx, func() { _ = f.Close() })
	return machineapi.DownloadArtifact200ApplicationoctetStreamResponse{Body: f, ContentLength: size,
		Headers: machineapi.DownloadArtifact200ResponseHeaders{XKeceSha256: req.Sha256}}, nil
}

// SubmitResult records a verdict or an infrastructure error for a lease.
func (m machineAPI) SubmitResult(ctx context.Context, req machineapi.SubmitResultRequestObject) (machineapi.SubmitResultResponseObject, error) {
	sess, err := sessionFrom(ctx)
	if err != nil {
		return nil, err
	}
	jobID, err := parseID("jobId", req.JobId)
	if err != nil {
		return nil, err
	}
	res := store.Result{Outcome: store.Outcome(req.Body.Outcome)}
	if v := req.Body.Verdict; v != nil {
		res.Verdict = &store.VerdictResult{Status: string(v.Status), Score: v.Score, MaxScore: v.MaxScore,
			CompileLog: v.CompileLog, Message: v.Message}
		for _, c := range v.Cases {
			res.Verdict.Cases = append(res.Verdict.Cases, store.CaseResult{CaseID: c.CaseId, Status: string(c.Status),
				Score: c.Score, TimeMs: c.TimeMs, WallMs: c.WallMs, MemoryKb: c.MemoryKb, ExitCode: int(c.ExitCode),
				Signal: int(c.Signal), Message: c.Message})
		}
		if v.Subtasks != nil {
			for _, st := range *v.Subtasks {
				res.Verdict.Subtasks = append(res.Verdict.Subtasks, store.SubtaskResult{SubtaskID: st.SubtaskId,
					Status: string(st.Status), Score: st.Score, MaxScore: st.MaxScore})
			}
		}
	}
	if e := req.Body.Error; e != nil {
		res.Error = &store.ErrorResult{Code: string(e.Code), Message: e.Message}
	}
	if p := req.Body.Phases; p != nil {
		res.Phases = &store.Phases{QueueMs: p.QueueMs, DownloadMs: p.DownloadMs, SandboxMs: p.SandboxMs,
			CompileMs: p.CompileMs, CheckerMs: p.CheckerMs, RunMs: p.RunMs, CheckMs: p.CheckMs, ExecuteMs: p.ExecuteMs,
			TotalMs: p.TotalMs, CompileCached: p.CompileCached, CheckerCached: p.CheckerCached, SandboxWarm: p.SandboxWarm}
	}
	var r store.CompleteResponse
	var claimed []store.ClaimedJob
	if c := req.Body.Claim; c != nil {
		// The slot cycle: the result, then the node's next claim, in one
		// transaction when the store can.
		var outs []store.CycleOutcome
		outs, claimed, err = m.s.store.Leases().CompleteClaim(ctx, sess.NodeSession,
			[]store.CycleResult{{JobID: jobID, LeaseEpoch: req.Body.LeaseEpoch, Result: res}}, int(c.FreeSlots), c.RequestId)
		if err == nil {
			r, err = outs[0].Response, outs[0].Err
		}
	} else {
		r, err = m.s.store.Leases().Complete(ctx, sess.NodeSession, jobID, req.Body.LeaseEpoch, res)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, apiErr(http.StatusNotFound, codeJobNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	m.s.log.InfoContext(ctx, "result recorded", "job_id", jobID, "lease_epoch", req.Body.LeaseEpoch, "node_id", sess.NodeID,
		"disposition", r.Disposition, "job_state", r.JobState)
	// The lease engine's decorator has woken this replica's claim waiters (a
	// slot came free) and the job's status waiters (control/lease/observed.go).
	out := machineapi.SubmitResult200JSONResponse{Disposition: machineapi.Disposition(r.Disposition), JobState: machineapi.JobState(r.JobState)}
	if req.Body.Claim != nil {
		jobs, err := m.wireJobs(ctx, claimed)
		if err != nil {
			return nil, err
		}
		out.Jobs = &jobs
	}
	return out, nil
}

// wireManifests caches manifests converted to the wire type (immutable).
type wireManifests struct {
	mu sync.Mutex
	m  map[int64]machineapi.Manifest
}

func newWireManifests() *wireManifests { return &wireManifests{m: make(map[int64]machineapi.Manifest)} }

func (w *wireManifests) get(ctx context.Context, st *store.Store, id int64) (machineapi.Manifest, error) {
	w.mu.Lock()
	man, ok := w.m[id]
	w.mu.Unlock()
	if ok {
		return man, nil
	}
	src, err := st.Manifests().Manifest(ctx, id)
	if err != nil {
		return machineapi.Manifest{}, err
	}
	// The control plane's manifest type has the contract's JSON shape.
	b, err := json.Marshal(src)
	if err != nil {
		return machineapi.Manifest{}, fmt.Errorf("manifest %d: %w", id, err)
	}
	if err := json.Unmarshal(b, &man); err != nil {
		return machineapi.Manifest{}, fmt.Errorf("manifest %d: %w", id, err)
	}
	w.mu.Lock()
	if len(w.m) > 1024 {
		clear(w.m)
	}
	w.m[id] = man
	w.mu.Unlock()
	return man, nil
}
