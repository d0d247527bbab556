package console

import (
	"net/http"
	"net/url"

	"github.com/kece-oj/kece/contracts/adminapi"
)

type auditData struct {
	Filter  url.Values
	Entries []adminapi.AuditEntry
	NextURL string
}

// audit is the global audit log: who did what, when, from where, with the
// admin API's filters passed through as they are.
func (c *Console) audit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := adminapi.Limit(100)
	p := adminapi.ListAuditParams{Limit: &limit, Actor: opt[string](q, "actor"), Action: opt[string](q, "action"),
		NodeId: opt[string](q, "nodeId"), JobId: opt[string](q, "jobId"), BeforeId: opt[string](q, "beforeId")}
	d := auditData{Filter: q}
	var e *apiError
	if p.After, e = formTime(q, "after"); e == nil {
		p.Before, e = formTime(q, "before")
	}
	if e == nil {
		ar, err := c.admin.ListAuditWithResponse(c.api(r), &p)
		if e = check(ar, ar.Body, err, http.StatusOK); e == nil {
			d.Entries, d.NextURL = ar.JSON200.Entries, olderURL("audit", q, ar.JSON200.NextBeforeId)
		}
	}
	if e != nil {
		c.render(w, r, e.Status, "audit", view{Title: "Audit log", Nav: "audit", Err: e, Data: d})
		return
	}
	c.render(w, r, http.StatusOK, "audit", view{Title: "Audit log", Nav: "audit", Live: q.Get("beforeId") == "", Data: d})
}
