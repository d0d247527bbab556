package httpapi

// Conversions from store read models to the admin contract's wire types.

import (
	"encoding/json"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/control/store"
)

func ptr[T any](v T) *T { return &v }

func hostGroupOut(g store.HostGroupDetail) adminapi.HostGroup {
	return adminapi.HostGroup{HostGroupId: idString(g.ID), Name: g.Name, SlotCapacity: int32(g.SlotCapacity),
		SlotsInFlight: int32(g.SlotsBusy), NodeCount: ptr(int32(g.NodeCount)), Revision: g.Revision,
		CreatedAt: ptr(g.CreatedAt.UTC()), UpdatedAt: ptr(g.UpdatedAt.UTC())}
}

// judgerOut keeps configuration (desired state, slots, revoked) apart from
// observed health (online from the heartbeat age, runtime, dependencies).
func judgerOut(n store.Node, t *store.NodeTimes) adminapi.Judger {
	h := adminapi.JudgerHealth{Online: n.Online, RuntimeVersion: n.RuntimeVersion, ReportedDraining: n.ReportedDraining,
		Dependencies: []adminapi.Dependency{}}
	if n.LastHeartbeatAge != nil {
		h.HeartbeatAgeMs = ptr(max(n.LastHeartbeatAge.Milliseconds(), 0))
		h.SlotsBusy = ptr(int32(n.ReportedSlotsBusy))
	}
	if len(n.Health) > 0 {
		var deps []adminapi.Dependency
		if json.Unmarshal(n.Health, &deps) == nil && deps != nil {
			h.Dependencies = deps
		}
	}
	out := adminapi.Judger{NodeId: idString(n.ID), Name: n.Name, Pool: adminapi.Pool(n.Pool), HostGroupId: idString(n.HostGroupID),
		Slots: int32(n.Slots), Revision: n.Revision, DesiredState: adminapi.DesiredState(n.DesiredState), Revoked: n.Revoked,
		Joined: n.HasCredential, SessionEpoch: n.SessionEpoch, LeasesInFlight: int32(n.SlotsBusy), Health: h,
		CreatedAt: n.CreatedAt.UTC()}
	if n.Address != "" {
		out.Address = ptr(n.Address)
	}
	if n.DrainDeadlineAt != nil {
		out.DrainDeadlineAt = ptr(n.DrainDeadlineAt.UTC())
	}
	if t != nil {
		out.UpdatedAt = ptr(t.UpdatedAt.UTC())
		if t.LastHeartbeatAt != nil {
			out.Health.LastHeartbeatAt = ptr(t.LastHeartbeatAt.UTC())
		}
	}
	return out
}

func jobOut(j store.Job, x *store.JobExtra) adminapi.JudgeJob {
	out := adminapi.JudgeJob{JobId: idString(j.ID), Kind: adminapi.JobKind(j.Kind), Pool: adminapi.Pool(j.Pool),
		SubmissionType: j.SubmissionType, SubmissionId: j.SubmissionID, Generation: int64(j.Generation), Language: j.Language,
		ManifestId: idString(j.ManifestID), State: adminapi.JobState(j.State), CasesDone: int32(j.CasesDone),
		CasesTotal: int32(j.CasesTotal), Priority: int32(j.Priority), AttemptCount: int32(j.AttemptCount),
		MaxAttempts: int32(j.MaxAttempts), LeaseEpoch: j.LeaseEpoch, CreatedAt: j.CreatedAt.UTC()}
	if j.Phase != "" {
		out.Phase = ptr(adminapi.Phase(j.Phase))
	}
	if j.NodeID != 0 {
		out.NodeId = ptr(idString(j.NodeID))
	}
	switch j.State {
	case store.StateRunning:
		out.LeaseRemainingMs = ptr(j.LeaseRemaining.Milliseconds())
	case store.StateQueued:
		out.AvailableInMs = ptr(j.AvailableIn.Milliseconds())
	}
	if j.Verdict != "" {
		out.Verdict = ptr(adminapi.VerdictStatus(j.Verdict))
	}
	if j.LastErrorCode != "" {
		out.LastErrorCode = ptr(j.LastErrorCode)
	}
	if j.StartedAt != nil {
		out.StartedAt = ptr(j.StartedAt.UTC())
	}
	if j.FinishedAt != nil {
		out.FinishedAt = ptr(j.FinishedAt.UTC())
	}
	if x != nil {
		out.Current = ptr(x.Current)
		out.UpdatedAt = ptr(x.UpdatedAt.UTC())
		if x.HostGroupID != 0 {
			out.HostGroupId = ptr(idString(x.HostGroupID))
		}
	}
	return out
}

func generationOut(g store.Generation) adminapi.JobGeneration {
	out := adminapi.JobGeneration{JobId: idString(g.JobID), Generation: int64(g.Generation), Kind: adminapi.JobKind(g.Kind),
		State: adminapi.JobState(g.State), Current: g.Current, CreatedAt: g.CreatedAt.UTC()}
	if g.Verdict != "" {
		out.Verdict = ptr(adminapi.VerdictStatus(g.Verdict))
	}
	if g.FinishedAt != nil {
		out.FinishedAt = ptr(g.FinishedAt.UTC())
	}
	return out
}

func attemptOut(a store.Attempt) adminapi.Attempt {
	out := adminapi.Attempt{JobId: idString(a.JobID), LeaseEpoch: a.LeaseEpoch, NodeId: idString(a.NodeID),
		SessionEpoch: a.SessionEpoch, StartedAt: a.StartedAt.UTC(), Outcome: a.Outcome}
	if a.HostGroupID != 0 {
		out.HostGroupId = ptr(idString(a.HostGroupID))
	}
	if a.EndedAt != nil {
		out.EndedAt = ptr(a.EndedAt.UTC())
	}
	if a.ErrorClass != "" {
		out.ErrorCode = ptr(a.ErrorClass)
	}
	if a.ReceiptDigest != "" {
		out.ReceiptDigest = ptr(a.ReceiptDigest)
	}
	if p := a.Phases(); p != nil {
		out.Phases = &adminapi.AttemptPhases{QueueMs: p.QueueMs, DownloadMs: p.DownloadMs, SandboxMs: p.SandboxMs,
			CompileMs: p.CompileMs, CheckerMs: p.CheckerMs, RunMs: p.RunMs, CheckMs: p.CheckMs, ExecuteMs: p.ExecuteMs,
			TotalMs: p.TotalMs, CompileCached: p.CompileCached, CheckerCached: p.CheckerCached, SandboxWarm: p.SandboxWarm}
	}
	return out
}

func checkOut(nodeID int64, c store.CheckView) adminapi.NodeCheck {
	out := adminapi.NodeCheck{CheckId: idString(c.ID), NodeId: idString(nodeID), JobId: idString(c.JobID),
		State: adminapi.CheckState(c.State), ConfigRevision: max(c.ConfigRevision, 1), CreatedAt: c.CreatedAt.UTC(),
		Verdict: verdictOut(c.Result)}
	if c.RuntimeVersion != "" {
		out.RuntimeVersion = ptr(c.RuntimeVersion)
	}
	if c.ErrorCode != "" {
		out.ErrorCode = ptr(c.ErrorCode)
	}
	if c.FinishedAt != nil {
		out.FinishedAt = ptr(c.FinishedAt.UTC())
	}
	return out
}

func auditOut(e store.AuditEntry) adminapi.AuditEntry {
	out := adminapi.AuditEntry{AuditId: idString(e.ID), At: e.CreatedAt.UTC(), Actor: e.Actor, Action: e.Action, Reason: e.Reason}
	if e.NodeID != 0 {
		out.NodeId = ptr(idString(e.NodeID))
	}
	if e.JobID != 0 {
		out.JobId = ptr(idString(e.JobID))
	}
	if e.RemoteAddr != "" {
		out.RemoteAddr = ptr(e.RemoteAddr)
	}
	if len(e.Detail) > 0 {
		var d map[string]any
		if json.Unmarshal(e.Detail, &d) == nil && d != nil {
			out.Details = &d
			if g, ok := d["hostGroupId"].(float64); ok && g > 0 {
				out.HostGroupId = ptr(idString(int64(g)))
			}
		}
	}
	return out
}

// verdictOut decodes a stored normalized result; nil unless it is a verdict.
func verdictOut(result []byte) *adminapi.Verdict {
	if len(result) == 0 {
		return nil
	}
	var r store.Result
	if err := json.Unmarshal(result, &r); err != nil || r.Verdict == nil {
		return nil
	}
	v := r.Verdict
	out := &adminapi.Verdict{Status: adminapi.VerdictStatus(v.Status), Score: v.Score, MaxScore: v.MaxScore,
		CompileLog: v.CompileLog, Message: v.Message, Cases: make([]adminapi.CaseResult, 0, len(v.Cases))}
	for _, c := range v.Cases {
		out.Cases = append(out.Cases, adminapi.CaseResult{CaseId: c.CaseID, Status: adminapi.VerdictStatus(c.Status), Score: c.Score,
			TimeMs: c.TimeMs, WallMs: c.WallMs, MemoryKb: c.MemoryKb, ExitCode: int32(c.ExitCode), Signal: int32(c.Signal),
			Message: c.Message})
	}
	if v.Subtasks != nil {
		subs := make([]adminapi.SubtaskResult, 0, len(v.Subtasks))
		for _, st := range v.Subtasks {
			subs = append(subs, adminapi.SubtaskResult{SubtaskId: st.SubtaskID, Status: adminapi.VerdictStatus(st.Status),
				Score: st.Score, MaxScore: st.MaxScore})
		}
		out.Subtasks = &subs
	}
	return out
}

func eventOut(e store.EventView) adminapi.SettlementEventRecord {
	updated := e.CreatedAt
	if e.DeliveredAt != nil {
		updated = *e.DeliveredAt
	}
	out := adminapi.SettlementEventRecord{EventId: idString(e.ID), EventType: adminapi.SettlementEventType(e.EventType),
		ConsumerGroup: e.ConsumerGroup, JobId: idString(e.JobID), SubmissionType: e.SubmissionType, SubmissionId: e.SubmissionID,
		Generation: int64(e.Generation), State: adminapi.DeliveryState(e.State), DeliveryAttempts: int32(e.DeliveryAttempt),
		CreatedAt: e.CreatedAt.UTC(), UpdatedAt: updated.UTC()}
	if e.Consumer != "" {
		out.Consumer = ptr(e.Consumer)
	}
	if e.LastError != "" {
		out.LastError = ptr(e.LastError)
	}
	if e.State == store.EventPending {
		out.NextAttemptAt = ptr(e.NextAttemptAt.UTC())
	}
	return out
}
