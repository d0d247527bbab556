package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/adminapi"
)

type nodesData struct {
	Pools  []string
	Groups []adminapi.HostGroup
	ByPool []poolNodes
}

type poolNodes struct {
	Pool  string
	Nodes []adminapi.Judger
}

func (c *Console) nodes(w http.ResponseWriter, r *http.Request) {
	c.showNodes(w, r, http.StatusOK, nil)
}

func (c *Console) showNodes(w http.ResponseWriter, r *http.Request, status int, e *apiError) {
	ctx := c.api(r)
	nr, err := c.admin.ListJudgersWithResponse(ctx, &adminapi.ListJudgersParams{})
	if le := check(nr, nr.Body, err, http.StatusOK); le != nil {
		c.fail(w, r, le)
		return
	}
	hr, err := c.admin.ListHostGroupsWithResponse(ctx)
	if le := check(hr, hr.Body, err, http.StatusOK); le != nil {
		c.fail(w, r, le)
		return
	}
	d := nodesData{Pools: contracts.Pools(), Groups: hr.JSON200.HostGroups}
	for _, p := range d.Pools {
		pn := poolNodes{Pool: p}
		for _, n := range nr.JSON200.Judgers {
			if string(n.Pool) == p {
				pn.Nodes = append(pn.Nodes, n)
			}
		}
		if len(pn.Nodes) > 0 {
			d.ByPool = append(d.ByPool, pn)
		}
	}
	c.render(w, r, status, "nodes", view{Title: "Nodes", Nav: "nodes", Live: true, Notice: noticeOf(r), Err: e, Data: d})
}

// joinData is the one page that shows a join code: the answer to the
// create, join-code or rotate request itself. It is never stored or shown
// again; reloading cannot show it (the answer is to a POST).
type joinData struct {
	Node      adminapi.Judger
	Code      string
	ExpiresAt time.Time
	Command   string
	Rotated   bool
}

// controlURL is the control plane's address as the browser reached it,
// for the join command (behind a trusted TLS proxy: https).
func (c *Console) controlURL(r *http.Request) string {
	scheme := "http"
	if c.cfg.TrustedProxies.Secure(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func (c *Console) showJoin(w http.ResponseWriter, r *http.Request, n adminapi.Judger, code string, expires time.Time, rotated bool) {
	cmd := contracts.JoinCommand(c.controlURL(r), string(n.Pool), n.Name, code)
	c.render(w, r, http.StatusOK, "joincode", view{Title: "Join code for " + n.Name, Nav: "nodes",
		Data: joinData{Node: n, Code: code, ExpiresAt: expires, Command: cmd, Rotated: rotated}})
}

func (c *Console) createNode(w http.ResponseWriter, r *http.Request) {
	slots, fe := formInt(r, "slots")
	if fe != nil {
		c.showNodes(w, r, fe.Status, fe)
		return
	}
	body := adminapi.JudgerCreate{Name: strings.TrimSpace(r.PostFormValue("name")), Pool: adminapi.Pool(r.PostFormValue("pool")),
		HostGroupId: r.PostFormValue("hostGroupId"), Slots: int32(slots)}
	if a := strings.TrimSpace(r.PostFormValue("address")); a != "" {
		body.Address = &a
	}
	if v := strings.TrimSpace(r.PostFormValue("ttl")); v != "" {
		ttl, fe := formDuration(r, "ttl")
		if fe != nil {
			c.showNodes(w, r, fe.Status, fe)
			return
		}
		body.JoinCodeTtlSeconds = &ttl
	}
	cr, err := c.admin.CreateJudgerWithResponse(c.api(r), body)
	if e := check(cr, cr.Body, err, http.StatusCreated); e != nil {
		c.showNodes(w, r, e.Status, e)
		return
	}
	c.showJoin(w, r, cr.JSON201.Node, cr.JSON201.JoinCode, cr.JSON201.JoinCodeExpiresAt, false)
}

func (c *Console) node(w http.ResponseWriter, r *http.Request) {
	c.showNode(w, r, r.PathValue("id"), http.StatusOK, nil)
}

func (c *Console) showNode(w http.ResponseWriter, r *http.Request, id string, status int, e *apiError) {
	dr, err := c.admin.GetJudgerWithResponse(c.api(r), id)
	if le := check(dr, dr.Body, err, http.StatusOK); le != nil {
		c.fail(w, r, le)
		return
	}
	d := nodePage{JudgerDetail: *dr.JSON200, Progress: map[string]string{}}
	// A self-check still under way shows how far its CHECK job got (phase
	// and steps done), read from the same admin API as the job page.
	for _, ch := range d.Checks {
		if ch.State != adminapi.CheckStatePending && ch.State != adminapi.CheckStateRunning {
			continue
		}
		jr, err := c.admin.GetJudgeJobWithResponse(c.api(r), ch.JobId)
		if err != nil || jr.JSON200 == nil {
			continue // the table still shows the check's state
		}
		j := jr.JSON200.Job
		switch {
		case j.Phase == nil && j.CasesTotal == 0:
			d.Progress[ch.CheckId] = "waiting for the node to start it"
		case j.Phase == nil:
			d.Progress[ch.CheckId] = fmt.Sprintf("%d of %d steps", j.CasesDone, j.CasesTotal)
		default:
			d.Progress[ch.CheckId] = fmt.Sprintf("%s, %d of %d steps", *j.Phase, j.CasesDone, j.CasesTotal)
		}
	}
	c.render(w, r, status, "node", view{Title: "Node " + d.Node.Name, Nav: "nodes", Live: true, Notice: noticeOf(r), Err: e, Data: d})
}

// nodePage is the node page: the admin API's node detail plus the progress
// of self-checks under way, by check id.
type nodePage struct {
	adminapi.JudgerDetail
	Progress map[string]string
}

// destructive actions ask for a confirmation first.
var destructive = map[string]string{
	"drain":   "Drain this node? It claims nothing new; with a deadline its remaining leases are taken back and it is disabled.",
	"disable": "Disable this node? Without force it is refused while the node still holds leases; with force those leases are taken back.",
	"revoke":  "Revoke this node? Its credential stops working at once and it can never come back (create a new node instead).",
	"rotate":  "Rotate this node's credential? The current credential stops working; the node must join again with the new code.",
	"resize":  "Resize this node?",
}

func (c *Console) nodeAction(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	ctx := c.api(r)
	reason := r.PostFormValue("reason")
	if q, ok := destructive[action]; ok && r.PostFormValue("confirmed") != "1" {
		dr, err := c.admin.GetJudgerWithResponse(ctx, id)
		if e := check(dr, dr.Body, err, http.StatusOK); e != nil {
			c.fail(w, r, e)
			return
		}
		fields := map[string]string{}
		if reason != "" {
			fields["reason"] = reason
		}
		d := confirmData{Action: Prefix + "nodes/" + url.PathEscape(id) + "/" + action, Back: Prefix + "nodes/" + url.PathEscape(id),
			Button: strings.ToUpper(action[:1]) + action[1:] + " node", Question: q, Fields: fields, Node: &dr.JSON200.Node}
		for _, f := range []string{"deadline", "slots", "revision", "force"} {
			if v := r.PostFormValue(f); v != "" {
				fields[f] = v
			}
		}
		if action == "resize" {
			n, fe := formInt(r, "slots")
			if fe != nil {
				c.showNode(w, r, id, fe.Status, fe)
				return
			}
			d.NewSlots = n
		}
		c.render(w, r, http.StatusOK, "confirm", view{Title: "Confirm", Nav: "nodes", Data: d})
		return
	}
	var e *apiError
	switch action {
	case "verify":
		vr, err := c.admin.VerifyJudgerWithResponse(ctx, id, adminapi.ReasonRequest{Reason: reason})
		e = check(vr, vr.Body, err, http.StatusAccepted)
	case "enable":
		er, err := c.admin.EnableJudgerWithResponse(ctx, id, adminapi.ReasonRequest{Reason: reason})
		e = check(er, er.Body, err, http.StatusOK)
	case "drain":
		body := adminapi.DrainRequest{Reason: reason}
		if strings.TrimSpace(r.PostFormValue("deadline")) != "" {
			s, fe := formDuration(r, "deadline")
			if fe != nil {
				c.showNode(w, r, id, fe.Status, fe)
				return
			}
			body.DeadlineSeconds = &s
		}
		dr, err := c.admin.DrainJudgerWithResponse(ctx, id, body)
		e = check(dr, dr.Body, err, http.StatusOK)
	case "disable":
		dr, err := c.admin.DisableJudgerWithResponse(ctx, id, adminapi.DisableRequest{Reason: reason, Force: r.PostFormValue("force") == "1"})
		e = check(dr, dr.Body, err, http.StatusOK)
	case "revoke":
		rr, err := c.admin.RevokeJudgerWithResponse(ctx, id, adminapi.ReasonRequest{Reason: reason})
		e = check(rr, rr.Body, err, http.StatusOK)
	case "resize":
		slots, fe := formInt(r, "slots")
		var rev int64
		if fe == nil {
			rev, fe = formInt(r, "revision")
		}
		if fe != nil {
			c.showNode(w, r, id, fe.Status, fe)
			return
		}
		ur, err := c.admin.UpdateJudgerWithResponse(ctx, id, adminapi.JudgerUpdate{Slots: int32(slots), Revision: rev, Reason: reason})
		e = check(ur, ur.Body, err, http.StatusOK)
	case "rotate", "join-code":
		var issued *adminapi.JoinCodeIssued
		if action == "rotate" {
			rr, err := c.admin.RotateJudgerCredentialWithResponse(ctx, id, adminapi.RotateRequest{Reason: reason})
			if e = check(rr, rr.Body, err, http.StatusOK); e == nil {
				issued = rr.JSON200
			}
		} else {
			jr, err := c.admin.ResetJoinCodeWithResponse(ctx, id, adminapi.JoinCodeRequest{})
			if e = check(jr, jr.Body, err, http.StatusOK); e == nil {
				issued = jr.JSON200
			}
		}
		if e == nil {
			dr, err := c.admin.GetJudgerWithResponse(ctx, id)
			if e = check(dr, dr.Body, err, http.StatusOK); e == nil {
				c.showJoin(w, r, dr.JSON200.Node, issued.JoinCode, issued.JoinCodeExpiresAt, action == "rotate")
				return
			}
		}
	default:
		c.fail(w, r, &apiError{Status: http.StatusNotFound, Code: "NOT_FOUND", Message: "no node action " + strconv.Quote(action)})
		return
	}
	if e != nil {
		c.showNode(w, r, id, e.Status, e)
		return
	}
	http.Redirect(w, r, Prefix+"nodes/"+url.PathEscape(id)+"?done="+action, http.StatusSeeOther)
}
