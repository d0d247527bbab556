package httpapi

// Admin API: judge jobs, settlement dead letters, reconciliation.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/control/store"
)

// jobDetailAudit is how many audit entries a job's detail carries (the
// contract's maxItems).
const jobDetailAudit = 100

func pageLimit(l *int32) int {
	if l == nil {
		return store.PageLimitDefault
	}
	return int(*l)
}

func beforeID(raw *string) (int64, error) {
	if raw == nil {
		return 0, nil
	}
	return parseID("beforeId", *raw)
}

// optID parses an optional id parameter (nil: 0).
func optID(field string, raw *string) (int64, error) {
	if raw == nil {
		return 0, nil
	}
	return parseID(field, *raw)
}

// optTime dereferences an optional time parameter (nil: zero).
func optTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// filterErr answers a list filter the store refused with 400
// REQUEST_INVALID naming the parameter: a query that cannot be asked, unlike
// a body that breaks a rule (422).
func filterErr(err error) error {
	var ve *store.ValidationError
	if errors.As(err, &ve) {
		e := apiErr(http.StatusBadRequest, codeRequestInvalid, err)
		e.Details = map[string]any{"field": ve.Field}
		return e
	}
	return err
}

// ListJudgeJobs searches jobs newest first: by submission (type and id),
// pool, state, kind, verdict and creation time, in keyset pages.
func (a jobsAdmin) ListJudgeJobs(ctx context.Context, req adminapi.ListJudgeJobsRequestObject) (adminapi.ListJudgeJobsResponseObject, error) {
	p := req.Params
	f := store.JobFilter{Limit: pageLimit(p.Limit), CreatedAfter: optTime(p.CreatedAfter), CreatedBefore: optTime(p.CreatedBefore)}
	var err error
	if f.BeforeID, err = beforeID(p.BeforeId); err != nil {
		return nil, err
	}
	if p.State != nil {
		f.State = store.JobState(*p.State)
	}
	if p.Pool != nil {
		f.Pool = string(*p.Pool)
	}
	if p.Kind != nil {
		f.Kind = store.JobKind(*p.Kind)
	}
	if p.SubmissionType != nil {
		f.SubmissionType = *p.SubmissionType
	}
	if p.SubmissionId != nil {
		f.SubmissionID = *p.SubmissionId
	}
	if p.Verdict != nil {
		f.Verdict = string(*p.Verdict)
	}
	jobs, err := a.s.store.Jobs().ListJobs(ctx, f)
	if err != nil {
		return nil, filterErr(err)
	}
	cur, err := a.s.store.Jobs().CurrentJobs(ctx, jobs)
	if err != nil {
		return nil, err
	}
	out := adminapi.JudgeJobList{Jobs: make([]adminapi.JudgeJob, 0, len(jobs))}
	for _, j := range jobs {
		o := jobOut(j, nil)
		// Each listed job says whether it is its submission's current
		// generation, as the job view does.
		o.Current = ptr(cur[j.ID])
		out.Jobs = append(out.Jobs, o)
	}
	if len(jobs) == f.Limit {
		next := idString(jobs[len(jobs)-1].ID)
		out.NextBeforeId = &next
	}
	return adminapi.ListJudgeJobs200JSONResponse(out), nil
}

func (a jobsAdmin) job(ctx context.Context, id int64) (adminapi.JudgeJob, store.Job, *store.JobExtra, error) {
	j, err := a.s.store.Jobs().GetJob(ctx, id)
	if err != nil {
		return adminapi.JudgeJob{}, j, nil, orNotFound(err, codeJobNotFound)
	}
	x, err := a.s.store.Jobs().JobExtras(ctx, id)
	if err != nil {
		return adminapi.JudgeJob{}, j, nil, orNotFound(err, codeJobNotFound)
	}
	return jobOut(j, &x), j, &x, nil
}

// GetJudgeJob returns a job with its attempts timeline, result (case
// results and compile log), the other generations of its submission and its
// audit trail: everything a job page shows.
func (a jobsAdmin) GetJudgeJob(ctx context.Context, req adminapi.GetJudgeJobRequestObject) (adminapi.GetJudgeJobResponseObject, error) {
	id, err := parseID("jobId", req.JobId)
	if err != nil {
		return nil, err
	}
	wire, j, x, err := a.job(ctx, id)
	if err != nil {
		return nil, err
	}
	attempts, err := a.s.store.Jobs().Attempts(ctx, id)
	if err != nil {
		return nil, err
	}
	gens, err := a.s.store.Jobs().Generations(ctx, id)
	if err != nil {
		return nil, orNotFound(err, codeJobNotFound)
	}
	au, err := a.s.store.AuditLog().Audit(ctx, 0, id, jobDetailAudit)
	if err != nil {
		return nil, err
	}
	out := adminapi.JudgeJobDetail{Job: wire, Attempts: make([]adminapi.Attempt, 0, len(attempts)), Verdict: verdictOut(j.Result),
		Generations: make([]adminapi.JobGeneration, 0, len(gens)), Audit: make([]adminapi.AuditEntry, 0, len(au))}
	for _, at := range attempts {
		out.Attempts = append(out.Attempts, attemptOut(at))
	}
	for _, g := range gens {
		out.Generations = append(out.Generations, generationOut(g))
	}
	for _, e := range au {
		out.Audit = append(out.Audit, auditOut(e))
	}
	if x.RequestDigest != "" {
		out.RequestDigest = &x.RequestDigest
	}
	if x.ResultDigest != "" {
		out.ResultDigest = &x.ResultDigest
	}
	return adminapi.GetJudgeJob200JSONResponse(out), nil
}

// RejudgeJudgeJob rejudges the submission of a job that is still current.
func (a jobsAdmin) RejudgeJudgeJob(ctx context.Context, req adminapi.RejudgeJudgeJobRequestObject) (adminapi.RejudgeJudgeJobResponseObject, error) {
	id, err := parseID("jobId", req.JobId)
	if err != nil {
		return nil, err
	}
	r, err := a.s.store.Jobs().RejudgeJob(ctx, id, actor(ctx), req.Body.Reason)
	switch {
	case errors.Is(err, store.ErrJobNotCurrent):
		return nil, apiErr(http.StatusConflict, codeJobNotCurrent, err)
	case errors.Is(err, store.ErrCheckJob):
		return nil, apiErr(http.StatusConflict, codeStateConflict, err)
	case err != nil:
		return nil, orNotFound(err, codeJobNotFound)
	}
	a.s.log.InfoContext(ctx, "job rejudged", "job_id", id, "new_job_id", r.JobID, "generation", r.Generation, "actor", actor(ctx))
	return adminapi.RejudgeJudgeJob202JSONResponse{JobId: idString(r.JobID), Generation: int64(r.Generation),
		State: adminapi.JobState(r.State)}, nil
}

// CancelJudgeJob cancels a queued or running job; a CANCELLED job answers
// 200, a COMPLETED or FAILED one 409 JOB_TERMINAL.
func (a jobsAdmin) CancelJudgeJob(ctx context.Context, req adminapi.CancelJudgeJobRequestObject) (adminapi.CancelJudgeJobResponseObject, error) {
	id, err := parseID("jobId", req.JobId)
	if err != nil {
		return nil, err
	}
	st, err := a.s.store.Jobs().CancelJob(ctx, id, actor(ctx), req.Body.Reason)
	if err != nil {
		return nil, orNotFound(err, codeJobNotFound)
	}
	if st == store.StateCompleted || st == store.StateFailed {
		return nil, apiErr(http.StatusConflict, codeJobTerminal, fmt.Errorf("job %d already ended %s", id, st))
	}
	a.s.log.InfoContext(ctx, "job cancelled", "job_id", id, "actor", actor(ctx))
	wire, _, _, err := a.job(ctx, id)
	if err != nil {
		return nil, err
	}
	return adminapi.CancelJudgeJob200JSONResponse(wire), nil
}

// ListSettlementEvents lists settlement events, e.g. dead letters.
func (a jobsAdmin) ListSettlementEvents(ctx context.Context, req adminapi.ListSettlementEventsRequestObject) (adminapi.ListSettlementEventsResponseObject, error) {
	f := store.EventFilter{Limit: pageLimit(req.Params.Limit)}
	var err error
	if f.BeforeID, err = beforeID(req.Params.BeforeId); err != nil {
		return nil, err
	}
	if req.Params.State != nil {
		f.State = string(*req.Params.State)
	}
	if req.Params.ConsumerGroup != nil {
		f.ConsumerGroup = *req.Params.ConsumerGroup
	}
	evs, err := a.s.store.Events().ListEventsPage(ctx, f)
	if err != nil {
		return nil, err
	}
	out := adminapi.SettlementEventList{Events: make([]adminapi.SettlementEventRecord, 0, len(evs))}
	for _, e := range evs {
		out.Events = append(out.Events, eventOut(e))
	}
	if len(evs) == f.Limit {
		next := idString(evs[len(evs)-1].ID)
		out.NextBeforeId = &next
	}
	return adminapi.ListSettlementEvents200JSONResponse(out), nil
}

// RedeliverSettlementEvent puts a dead-lettered event back into delivery.
func (a jobsAdmin) RedeliverSettlementEvent(ctx context.Context, req adminapi.RedeliverSettlementEventRequestObject) (adminapi.RedeliverSettlementEventResponseObject, error) {
	id, err := parseID("eventId", req.EventId)
	if err != nil {
		return nil, err
	}
	e, err := a.s.store.Events().RedeliverEvent(ctx, id, actor(ctx), req.Body.Reason)
	switch {
	case errors.Is(err, store.ErrEventNotDead):
		return nil, apiErr(http.StatusConflict, codeEventNotDead, err)
	case err != nil:
		return nil, orNotFound(err, codeEventNotFound)
	}
	a.s.log.InfoContext(ctx, "settlement event redelivered", "event_id", id, "job_id", e.JobID, "actor", actor(ctx))
	return adminapi.RedeliverSettlementEvent200JSONResponse(eventOut(e)), nil
}

// Reconcile checks the scheduling invariants now (read-only).
func (a jobsAdmin) Reconcile(ctx context.Context, _ adminapi.ReconcileRequestObject) (adminapi.ReconcileResponseObject, error) {
	rep, err := a.s.reconciler.Reconcile(ctx)
	if err != nil {
		return nil, err
	}
	out := adminapi.ReconcileReport{AsOf: rep.AsOf.UTC(), Ok: rep.OK(), RulesChecked: rep.Rules,
		Violations: make([]adminapi.Violation, 0, len(rep.Violations))}
	for _, v := range rep.Violations {
		w := adminapi.Violation{Rule: v.Rule, SubjectType: adminapi.SubjectType(v.SubjectType), SubjectId: idString(v.SubjectID),
			Message: v.Message}
		if len(v.Details) > 0 {
			d := v.Details
			w.Details = &d
		}
		out.Violations = append(out.Violations, w)
	}
	if !rep.OK() {
		a.s.log.WarnContext(ctx, "reconciliation found violations", "count", len(rep.Violations), "actor", actor(ctx))
	}
	return adminapi.Reconcile200JSONResponse(out), nil
}

// GetVerdictMix counts, per pool, the submissions that finished in the last
// minutes by outcome and by time bucket.
func (a jobsAdmin) GetVerdictMix(ctx context.Context, req adminapi.GetVerdictMixRequestObject) (adminapi.GetVerdictMixResponseObject, error) {
	minutes := store.VerdictMixMinutesDefault
	if req.Params.Minutes != nil {
		minutes = int(*req.Params.Minutes)
	}
	mix, err := a.s.store.Jobs().VerdictMix(ctx, minutes)
	if err != nil {
		return nil, filterErr(err)
	}
	out := adminapi.VerdictMix{AsOf: mix.AsOf.UTC(), Minutes: int32(minutes), BucketSeconds: int32(mix.Bucket / time.Second),
		Pools: make([]adminapi.PoolVerdictMix, 0, len(mix.Pools))}
	for _, p := range mix.Pools {
		w := adminapi.PoolVerdictMix{Pool: adminapi.Pool(p.Pool), Finished: p.Finished,
			Outcomes: make([]adminapi.OutcomeCount, 0, len(p.Outcomes)), Buckets: make([]adminapi.FinishBucket, 0, len(p.Buckets))}
		for _, o := range p.Outcomes {
			w.Outcomes = append(w.Outcomes, adminapi.OutcomeCount{Outcome: adminapi.JobOutcome(o.Outcome), Count: o.Count})
		}
		for i, n := range p.Buckets {
			b := adminapi.FinishBucket{Start: mix.BucketStart(i).UTC(), Finished: n}
			if i < len(p.WaitP95) && p.WaitP95[i] >= 0 {
				b.QueueWaitP95Ms = ptr(p.WaitP95[i].Milliseconds())
			}
			w.Buckets = append(w.Buckets, b)
		}
		out.Pools = append(out.Pools, w)
	}
	return adminapi.GetVerdictMix200JSONResponse(out), nil
}
