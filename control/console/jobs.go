package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/adminapi"
)

type jobsData struct {
	Pools    []string
	States   []string
	Kinds    []string
	Verdicts []string
	Filter   url.Values
	Jobs     []adminapi.JudgeJob
	NextURL  string
}

// formTime reads a time filter: RFC 3339, or what a datetime-local input
// sends (no zone; the console shows and takes UTC). Empty is no filter.
func formTime(q url.Values, name string) (*time.Time, *apiError) {
	v := strings.TrimSpace(q.Get(name))
	if v == "" {
		return nil, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return &t, nil
		}
	}
	return nil, &apiError{Status: http.StatusBadRequest, Code: "REQUEST_INVALID", Message: name + " must be a time like 2026-01-31T14:00 (UTC), not " + strconv.Quote(v)}
}

// opt is nil for an empty filter value, so the API sees no filter.
func opt[T ~string](q url.Values, name string) *T {
	if v := strings.TrimSpace(q.Get(name)); v != "" {
		t := T(v)
		return &t
	}
	return nil
}

// olderURL links the next (older) page of a list: the same filters, with
// beforeId moved on to where the API left off; "" on the last page.
func olderURL(page string, q url.Values, beforeID *string) string {
	if beforeID == nil {
		return ""
	}
	next := url.Values{}
	for k, v := range q {
		next[k] = v
	}
	next.Set("beforeId", *beforeID)
	return Prefix + page + "?" + next.Encode()
}

// jobs searches jobs with the admin API's filters, passed through as they
// are: the API validates them and says what is wrong.
func (c *Console) jobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := adminapi.Limit(50)
	p := adminapi.ListJudgeJobsParams{Limit: &limit, Pool: opt[adminapi.Pool](q, "pool"), State: opt[adminapi.JobState](q, "state"),
		Kind: opt[adminapi.JobKind](q, "kind"), SubmissionType: opt[string](q, "submissionType"),
		SubmissionId: opt[string](q, "submissionId"), Verdict: opt[adminapi.VerdictStatus](q, "verdict"), BeforeId: opt[string](q, "beforeId")}
	d := jobsData{Pools: contracts.Pools(), Filter: q,
		States:   []string{"QUEUED", "RUNNING", "COMPLETED", "FAILED", "CANCELLED"},
		Kinds:    []string{"SUBMISSION", "CHECK"},
		Verdicts: []string{"AC", "PARTIAL", "WA", "TLE", "MLE", "OLE", "RE", "CE"}}
	var e *apiError
	if p.CreatedAfter, e = formTime(q, "createdAfter"); e == nil {
		p.CreatedBefore, e = formTime(q, "createdBefore")
	}
	if e != nil {
		c.render(w, r, e.Status, "jobs", view{Title: "Jobs", Nav: "jobs", Err: e, Data: d})
		return
	}
	jr, err := c.admin.ListJudgeJobsWithResponse(c.api(r), &p)
	if e := check(jr, jr.Body, err, http.StatusOK); e != nil {
		c.render(w, r, e.Status, "jobs", view{Title: "Jobs", Nav: "jobs", Err: e, Data: d})
		return
	}
	d.Jobs, d.NextURL = jr.JSON200.Jobs, olderURL("jobs", q, jr.JSON200.NextBeforeId)
	c.render(w, r, http.StatusOK, "jobs", view{Title: "Jobs", Nav: "jobs", Live: q.Get("beforeId") == "", Data: d})
}

func (c *Console) job(w http.ResponseWriter, r *http.Request) {
	c.showJob(w, r, r.PathValue("id"), http.StatusOK, nil)
}

func (c *Console) showJob(w http.ResponseWriter, r *http.Request, id string, status int, e *apiError) {
	jr, err := c.admin.GetJudgeJobWithResponse(c.api(r), id)
	if le := check(jr, jr.Body, err, http.StatusOK); le != nil {
		c.fail(w, r, le)
		return
	}
	c.render(w, r, status, "job", view{Title: "Job " + id, Nav: "jobs", Live: true, Notice: noticeOf(r), Err: e, Data: jr.JSON200})
}

var jobQuestions = map[string]string{
	"rejudge": "Rejudge this submission? A new generation is queued and this one, if still running, is superseded.",
	"cancel":  "Cancel this job? A running lease is fenced: its later renew or result is refused.",
}

func (c *Console) jobAction(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	q, ok := jobQuestions[action]
	if !ok {
		c.fail(w, r, &apiError{Status: http.StatusNotFound, Code: "NOT_FOUND", Message: "no job action " + strconv.Quote(action)})
		return
	}
	reason := r.PostFormValue("reason")
	ctx := c.api(r)
	if r.PostFormValue("confirmed") != "1" {
		fields := map[string]string{}
		if reason != "" {
			fields["reason"] = reason
		}
		c.render(w, r, http.StatusOK, "confirm", view{Title: "Confirm", Nav: "jobs", Data: confirmData{
			Action: Prefix + "jobs/" + url.PathEscape(id) + "/" + action, Back: Prefix + "jobs/" + url.PathEscape(id),
			Button: map[string]string{"rejudge": "Rejudge", "cancel": "Cancel job"}[action], Question: q,
			Fields: fields}})
		return
	}
	var e *apiError
	next := id
	if action == "rejudge" {
		rr, err := c.admin.RejudgeJudgeJobWithResponse(ctx, id, adminapi.ReasonRequest{Reason: reason})
		if e = check(rr, rr.Body, err, http.StatusAccepted); e == nil {
			next = rr.JSON202.JobId
		}
	} else {
		cr, err := c.admin.CancelJudgeJobWithResponse(ctx, id, adminapi.ReasonRequest{Reason: reason})
		e = check(cr, cr.Body, err, http.StatusOK)
	}
	if e != nil {
		c.showJob(w, r, id, e.Status, e)
		return
	}
	http.Redirect(w, r, Prefix+"jobs/"+url.PathEscape(next)+"?done="+action, http.StatusSeeOther)
}

type eventsData struct {
	State  string
	Events []adminapi.SettlementEventRecord
}

func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	c.showEvents(w, r, http.StatusOK, nil)
}

func (c *Console) showEvents(w http.ResponseWriter, r *http.Request, status int, e *apiError) {
	state := r.URL.Query().Get("state")
	if state == "" {
		state = string(adminapi.DeliveryStateDead)
	}
	st := adminapi.DeliveryState(state)
	limit := adminapi.Limit(100)
	er, err := c.admin.ListSettlementEventsWithResponse(c.api(r), &adminapi.ListSettlementEventsParams{State: &st, Limit: &limit})
	if le := check(er, er.Body, err, http.StatusOK); le != nil {
		c.fail(w, r, le)
		return
	}
	c.render(w, r, status, "events", view{Title: "Settlement events", Nav: "events", Live: true, Notice: noticeOf(r), Err: e,
		Data: eventsData{State: state, Events: er.JSON200.Events}})
}

func (c *Console) redeliver(w http.ResponseWriter, r *http.Request) {
	rr, err := c.admin.RedeliverSettlementEventWithResponse(c.api(r), r.PathValue("id"), adminapi.ReasonRequest{Reason: r.PostFormValue("reason")})
	if e := check(rr, rr.Body, err, http.StatusOK); e != nil {
		c.showEvents(w, r, e.Status, e)
		return
	}
	http.Redirect(w, r, Prefix+"events?state=DEAD&done=redeliver", http.StatusSeeOther)
}

// reconcile runs the invariant checks only when asked (?run=1): they read
// the whole scheduling state.
func (c *Console) reconcile(w http.ResponseWriter, r *http.Request) {
	v := view{Title: "Reconcile", Nav: "reconcile"}
	if r.URL.Query().Get("run") == "1" {
		rr, err := c.admin.ReconcileWithResponse(c.api(r))
		if e := check(rr, rr.Body, err, http.StatusOK); e != nil {
			v.Err = e
			c.render(w, r, e.Status, "reconcile", v)
			return
		}
		v.Data = rr.JSON200
	}
	c.render(w, r, http.StatusOK, "reconcile", v)
}
