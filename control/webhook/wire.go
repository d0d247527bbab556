package webhook

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/control/store"
)

// WireEvent converts a stored settlement event to the business contract's
// SettlementEvent: the same JSON the pull API (ClaimSettlementEvents) returns
// and this sender POSTs.
func WireEvent(e store.Event) (businessapi.SettlementEvent, error) {
	var p store.SettlementPayload
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		return businessapi.SettlementEvent{}, fmt.Errorf("event %d: payload: %w", e.ID, err)
	}
	out := businessapi.SettlementEvent{
		EventId: strconv.FormatInt(e.ID, 10), EventType: businessapi.SettlementEventType(e.EventType),
		JobId: strconv.FormatInt(e.JobID, 10), SubmissionType: e.SubmissionType, SubmissionId: e.SubmissionID,
		Generation: int64(e.Generation), DeliveryAttempt: int32(max(e.DeliveryAttempt, 1)), CreatedAt: e.CreatedAt.UTC(),
		Payload: businessapi.SettlementPayload{Status: businessapi.SubmissionStatusCode(p.Status)},
	}
	if p.ErrorCode != "" {
		code := p.ErrorCode
		out.Payload.ErrorCode = &code
	}
	if len(p.Result) > 0 {
		v, err := WireVerdict(p.Result)
		if err != nil {
			return businessapi.SettlementEvent{}, fmt.Errorf("event %d: %w", e.ID, err)
		}
		out.Payload.Verdict = v
	}
	return out, nil
}

// WireVerdict converts a job's stored result (store.Result JSON) to the
// contract's Verdict; nil when the result holds no verdict.
func WireVerdict(result []byte) (*businessapi.Verdict, error) {
	if len(result) == 0 {
		return nil, nil
	}
	var r store.Result
	if err := json.Unmarshal(result, &r); err != nil {
		return nil, fmt.Errorf("stored result: %w", err)
	}
	if r.Verdict == nil {
		return nil, nil
	}
	v := r.Verdict
	out := &businessapi.Verdict{Status: businessapi.VerdictStatus(v.Status), Score: v.Score, MaxScore: v.MaxScore,
		CompileLog: v.CompileLog, Message: v.Message, Cases: make([]businessapi.CaseResult, 0, len(v.Cases))}
	for _, c := range v.Cases {
		out.Cases = append(out.Cases, businessapi.CaseResult{CaseId: c.CaseID, Status: businessapi.VerdictStatus(c.Status),
			Score: c.Score, TimeMs: c.TimeMs, WallMs: c.WallMs, MemoryKb: c.MemoryKb, ExitCode: int32(c.ExitCode),
			Signal: int32(c.Signal), Message: c.Message})
	}
	if v.Subtasks != nil {
		subs := make([]businessapi.SubtaskResult, 0, len(v.Subtasks))
		for _, st := range v.Subtasks {
			subs = append(subs, businessapi.SubtaskResult{SubtaskId: st.SubtaskID, Status: businessapi.VerdictStatus(st.Status),
				Score: st.Score, MaxScore: st.MaxScore})
		}
		out.Subtasks = &subs
	}
	return out, nil
}
