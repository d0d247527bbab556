package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/contracts/businessapi"
	durations "github.com/kece-oj/kece/internal/duration"
)

// notices are the one-line confirmations shown after a redirect (?done=).
var notices = map[string]string{
	"verify":         "Self-check queued; its progress shows below.",
	"enable":         "Node enabled: it claims submissions from its next heartbeat.",
	"drain":          "Node draining: it claims nothing new; its leases finish (or are taken back at the deadline).",
	"disable":        "Node disabled.",
	"revoke":         "Node revoked: its credential and sessions no longer work.",
	"resize":         "Node resized; the node learns its slots at its next heartbeat.",
	"group-create":   "Host group created.",
	"group-resize":   "Host group resized.",
	"rejudge":        "Rejudge queued as a new generation.",
	"cancel":         "Job cancelled.",
	"redeliver":      "Event put back into delivery.",
	"webhook-delete": "Webhook deleted: the group's events wait to be pulled.",
}

func noticeOf(r *http.Request) string { return notices[r.URL.Query().Get("done")] }

// poolRow is one pool on the overview.
type poolRow struct {
	Pool         string
	Ready, Total int
	// SlotsBusy is the leases in flight: the slots busy and, as the same
	// number, the jobs running.
	SlotsBusy, SlotsTotal int64
	Queued                int64
	OldestWaitMs          int64
	// WaitReason says why queued submissions wait (NO_READY_NODE,
	// NO_CAPABLE_NODE); Unrunnable of them need what Missing names, which
	// no ready node reported.
	WaitReason string
	Unrunnable int64
	Missing    string
	// From the verdict mix: submissions finished in the window, by outcome,
	// and per time bucket (drawn as bars).
	Finished int64
	Outcomes []adminapi.OutcomeCount
	Bars     []bar
	// Chart is the larger per-pool chart below the table.
	Chart poolChart
}

// poolChart draws, over the chosen window, a pool's completions per minute
// (bars, left scale) and the queue-wait p95 of the submissions finished in
// each bucket (a line, right scale), on the server as SVG: no script, no
// CDN.
type poolChart struct {
	W, H, PlotH float64
	Bars        []bar
	// Lines are polyline point lists of consecutive buckets with a p95;
	// Dots mark every bucket that has one.
	Lines []string
	Dots  []dot
	// PeakRate and PeakWait label the scales' tops; Summary is the text
	// alternative.
	PeakRate, PeakWait, Summary string
}

// dot is one p95 point of the chart.
type dot struct {
	X, Y  float64
	Wait  string
	Start time.Time
}

const bigW, bigH, bigPad = 360.0, 96.0, 16.0

// chart scales a pool's buckets into poolChart's box.
func chart(pool string, buckets []adminapi.FinishBucket, bucketSeconds int32) poolChart {
	c := poolChart{W: bigW, H: bigH, PlotH: bigH - bigPad}
	if len(buckets) == 0 || bucketSeconds <= 0 {
		c.Summary = pool + ": no data"
		return c
	}
	perMin := func(n int64) float64 { return float64(n) * 60 / float64(bucketSeconds) }
	var topRate float64 = 1
	var topWait int64 = 1
	for _, b := range buckets {
		topRate = max(topRate, perMin(b.Finished))
		if b.QueueWaitP95Ms != nil {
			topWait = max(topWait, *b.QueueWaitP95Ms)
		}
	}
	w := bigW / float64(len(buckets))
	var line []string
	flush := func() {
		if len(line) > 1 {
			c.Lines = append(c.Lines, strings.Join(line, " "))
		}
		line = nil
	}
	for i, b := range buckets {
		h := perMin(b.Finished) / topRate * (c.PlotH - 2)
		if b.Finished > 0 {
			h = max(h, 1)
		}
		c.Bars = append(c.Bars, bar{X: float64(i) * w, Y: bigH - h, W: max(w-0.5, 0.5), H: h, Finished: b.Finished, Start: b.Start})
		if b.QueueWaitP95Ms == nil {
			flush()
			continue
		}
		x, y := float64(i)*w+w/2, bigH-float64(*b.QueueWaitP95Ms)/float64(topWait)*(c.PlotH-2)
		c.Dots = append(c.Dots, dot{X: x, Y: y, Wait: duration(time.Duration(*b.QueueWaitP95Ms) * time.Millisecond), Start: b.Start})
		line = append(line, strconv.FormatFloat(x, 'f', 1, 64)+","+strconv.FormatFloat(y, 'f', 1, 64))
	}
	flush()
	c.PeakRate = strconv.FormatFloat(topRate, 'f', 1, 64) + "/min"
	c.PeakWait = duration(time.Duration(topWait) * time.Millisecond)
	c.Summary = fmt.Sprintf("%s: up to %s completions, queue-wait p95 up to %s", pool, c.PeakRate, c.PeakWait)
	if len(c.Dots) == 0 {
		c.PeakWait = "—"
		c.Summary = fmt.Sprintf("%s: up to %s completions, no queue wait measured", pool, c.PeakRate)
	}
	return c
}

// bar is one time bucket of the finished-jobs chart (SVG coordinates).
type bar struct {
	X, Y, W, H float64
	Finished   int64
	Start      time.Time
}

const chartW, chartH = 120.0, 24.0

// bars scales a pool's buckets into the chart box.
func bars(buckets []adminapi.FinishBucket) []bar {
	if len(buckets) == 0 {
		return nil
	}
	var top int64 = 1
	for _, b := range buckets {
		top = max(top, b.Finished)
	}
	w := chartW / float64(len(buckets))
	out := make([]bar, len(buckets))
	for i, b := range buckets {
		h := float64(b.Finished) / float64(top) * (chartH - 2)
		if b.Finished > 0 {
			h = max(h, 1)
		}
		out[i] = bar{X: float64(i) * w, Y: chartH - h, W: max(w-0.5, 0.5), H: h, Finished: b.Finished, Start: b.Start}
	}
	return out
}

// mixWindows are the overview's choices of window, in minutes.
var mixWindows = []int32{5, 15, 60, 240, 1440}

type overviewData struct {
	Summary *businessapi.JudgersSummary
	Mix     *adminapi.VerdictMix
	Windows []int32
	Pools   []poolRow
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	ctx := c.api(r)
	nr, err := c.admin.ListJudgersWithResponse(ctx, &adminapi.ListJudgersParams{})
	if e := check(nr, nr.Body, err, http.StatusOK); e != nil {
		c.fail(w, r, e)
		return
	}
	sr, err := c.business.GetJudgersSummaryWithResponse(ctx)
	if e := check(sr, sr.Body, err, http.StatusOK); e != nil {
		c.fail(w, r, e)
		return
	}
	mp := adminapi.GetVerdictMixParams{}
	if v := r.URL.Query().Get("minutes"); v != "" {
		m, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			c.fail(w, r, &apiError{Status: http.StatusBadRequest, Code: "REQUEST_INVALID", Message: "minutes must be a whole number"})
			return
		}
		m32 := int32(m)
		mp.Minutes = &m32
	}
	mr, err := c.admin.GetVerdictMixWithResponse(ctx, &mp)
	if e := check(mr, mr.Body, err, http.StatusOK); e != nil {
		c.fail(w, r, e)
		return
	}
	rows := map[string]*poolRow{}
	for _, p := range contracts.Pools() {
		rows[p] = &poolRow{Pool: p}
	}
	for _, n := range nr.JSON200.Judgers {
		row := rows[string(n.Pool)]
		if row == nil || n.Revoked {
			continue
		}
		row.Total++
		if n.DesiredState != adminapi.DesiredStateDisabled {
			row.SlotsTotal += int64(n.Slots)
		}
		row.SlotsBusy += int64(n.LeasesInFlight)
	}
	for _, p := range sr.JSON200.Pools {
		if row := rows[string(p.Pool)]; row != nil {
			row.Ready, row.Queued, row.OldestWaitMs = int(p.ReadyNodes), p.QueuedSubmissions, p.OldestWaitMs
			if p.WaitReason != nil {
				row.WaitReason = string(*p.WaitReason)
			}
			row.Unrunnable, row.Missing = p.UnrunnableSubmissions, strings.Join(p.MissingCapabilities, ", ")
		}
	}
	for _, p := range mr.JSON200.Pools {
		if row := rows[string(p.Pool)]; row != nil {
			row.Finished, row.Outcomes, row.Bars = p.Finished, p.Outcomes, bars(p.Buckets)
			row.Chart = chart(string(p.Pool), p.Buckets, mr.JSON200.BucketSeconds)
		}
	}
	d := overviewData{Summary: sr.JSON200, Mix: mr.JSON200, Windows: mixWindows}
	for _, p := range contracts.Pools() {
		d.Pools = append(d.Pools, *rows[p])
	}
	c.render(w, r, http.StatusOK, "overview", view{Title: "Overview", Nav: "overview", Live: true, Data: d})
}

// status is the public page: the business API's public summary, for humans.
func (c *Console) status(w http.ResponseWriter, r *http.Request) {
	sr, err := c.business.GetJudgersSummaryWithResponse(r.Context())
	if e := check(sr, sr.Body, err, http.StatusOK); e != nil {
		c.render(w, r, e.Status, "error", view{Title: "Status unavailable", Err: e})
		return
	}
	c.render(w, r, http.StatusOK, "status", view{Title: "Judge status", Live: true, Data: sr.JSON200})
}

func (c *Console) hostGroups(w http.ResponseWriter, r *http.Request) {
	c.showHostGroups(w, r, http.StatusOK, nil)
}

func (c *Console) showHostGroups(w http.ResponseWriter, r *http.Request, status int, e *apiError) {
	hr, err := c.admin.ListHostGroupsWithResponse(c.api(r))
	if le := check(hr, hr.Body, err, http.StatusOK); le != nil {
		c.fail(w, r, le)
		return
	}
	c.render(w, r, status, "hostgroups", view{Title: "Host groups", Nav: "host-groups", Live: true, Notice: noticeOf(r), Err: e, Data: hr.JSON200.HostGroups})
}

func (c *Console) createHostGroup(w http.ResponseWriter, r *http.Request) {
	capacity, fe := formInt(r, "slotCapacity")
	if fe != nil {
		c.showHostGroups(w, r, fe.Status, fe)
		return
	}
	cr, err := c.admin.CreateHostGroupWithResponse(c.api(r), adminapi.HostGroupCreate{
		Name: strings.TrimSpace(r.PostFormValue("name")), SlotCapacity: int32(capacity)})
	if e := check(cr, cr.Body, err, http.StatusCreated); e != nil {
		c.showHostGroups(w, r, e.Status, e)
		return
	}
	http.Redirect(w, r, Prefix+"host-groups?done=group-create", http.StatusSeeOther)
}

type resizeGroupData struct {
	Group    adminapi.HostGroup
	Capacity int64
	Revision int64
}

func (c *Console) resizeHostGroup(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	capacity, fe := formInt(r, "slotCapacity")
	var revision int64
	if fe == nil {
		revision, fe = formInt(r, "revision")
	}
	if fe != nil {
		c.showHostGroups(w, r, fe.Status, fe)
		return
	}
	if r.PostFormValue("confirmed") != "1" {
		// Show what the change means now: the leases in flight against the
		// new quota (a smaller quota lets them finish and grants no claim
		// until use drops below it).
		hr, err := c.admin.ListHostGroupsWithResponse(c.api(r))
		if e := check(hr, hr.Body, err, http.StatusOK); e != nil {
			c.fail(w, r, e)
			return
		}
		i := slices.IndexFunc(hr.JSON200.HostGroups, func(g adminapi.HostGroup) bool { return g.HostGroupId == id })
		if i < 0 {
			c.fail(w, r, &apiError{Status: http.StatusNotFound, Code: "HOST_GROUP_NOT_FOUND", Message: "no host group " + id})
			return
		}
		c.render(w, r, http.StatusOK, "confirm", view{Title: "Resize host group", Nav: "host-groups", Data: confirmData{
			Action: Prefix + "host-groups/" + url.PathEscape(id) + "/resize", Button: "Resize host group", Back: Prefix + "host-groups",
			Fields: map[string]string{"slotCapacity": strconv.FormatInt(capacity, 10), "revision": strconv.FormatInt(revision, 10)},
			Group:  &resizeGroupData{Group: hr.JSON200.HostGroups[i], Capacity: capacity, Revision: revision},
		}})
		return
	}
	ur, err := c.admin.UpdateHostGroupWithResponse(c.api(r), id, adminapi.HostGroupUpdate{SlotCapacity: int32(capacity), Revision: revision})
	if e := check(ur, ur.Body, err, http.StatusOK); e != nil {
		c.showHostGroups(w, r, e.Status, e)
		return
	}
	http.Redirect(w, r, Prefix+"host-groups?done=group-resize", http.StatusSeeOther)
}

// formInt reads a whole number from the form. Ranges are the API's to
// check; only "is it a number" is decided here.
func formInt(r *http.Request, name string) (int64, *apiError) {
	v := strings.TrimSpace(r.PostFormValue(name))
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, &apiError{Status: http.StatusBadRequest, Code: "REQUEST_INVALID", Message: name + " must be a whole number, not " + strconv.Quote(v)}
	}
	return n, nil
}

// formDuration reads a duration field the way the CLI takes one (15m,
// 24h, 7d; internal/duration) and returns it in whole seconds, as the
// admin API wants it.
func formDuration(r *http.Request, name string) (int64, *apiError) {
	v := strings.TrimSpace(r.PostFormValue(name))
	d, err := durations.Parse(v)
	if err != nil || d <= 0 || d%time.Second != 0 {
		return 0, &apiError{Status: http.StatusBadRequest, Code: "REQUEST_INVALID",
			Message: name + " must be a duration in whole seconds such as 90s, 15m, 24h or 7d, not " + strconv.Quote(v)}
	}
	return int64(d / time.Second), nil
}

// confirmData is the confirmation step of a destructive action: the same
// form again, with confirmed=1.
type confirmData struct {
	Action, Button, Back string
	Question             string
	Fields               map[string]string
	Node                 *adminapi.Judger
	Group                *resizeGroupData
	NewSlots             int64
}
