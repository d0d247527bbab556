package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kece-oj/kece/contracts/adminapi"
)

func (c *cli) dispatch(args []string) error {
	resource := args[0]
	if resource == "reconcile" {
		return c.reconcile(args[1:])
	}
	verbs := map[string]map[string]func([]string) error{
		"host-group": {"list": c.hostGroupList, "create": c.hostGroupCreate, "resize": c.hostGroupResize},
		"node": {"list": c.nodeList, "show": c.nodeShow, "create": c.nodeCreate, "verify": c.nodeAction("verify"),
			"enable": c.nodeAction("enable"), "drain": c.nodeAction("drain"), "revoke": c.nodeAction("revoke"),
			"rotate": c.nodeRotate, "disable": c.nodeDisable, "resize": c.nodeResize, "join-code": c.nodeJoinCode,
			"probe": c.nodeProbe},
		"job":    {"list": c.jobList, "show": c.jobShow, "rejudge": c.jobRejudge, "cancel": c.jobCancel},
		"events": {"dead": c.eventsDead, "redeliver": c.eventsRedeliver},
	}
	vs, ok := verbs[resource]
	if !ok {
		return usagef("", "unknown resource %q (want host-group, node, job, events or reconcile)", resource)
	}
	names := make([]string, 0, len(vs))
	for n := range vs {
		names = append(names, n)
	}
	if len(args) < 2 {
		return usagef("", "%s needs a verb: %s", resource, strings.Join(sorted(names), ", "))
	}
	fn, ok := vs[args[1]]
	if !ok {
		return usagef("", "unknown verb %q for %s (want %s)", args[1], resource, strings.Join(sorted(names), ", "))
	}
	return fn(args[2:])
}

func sorted(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

func (c *cli) table() *tabwriter.Writer { return tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0) }

func row(w *tabwriter.Writer, cols ...any) {
	parts := make([]string, len(cols))
	for i, v := range cols {
		parts[i] = fmt.Sprint(v)
	}
	fmt.Fprintln(w, strings.Join(parts, "\t"))
}

func deref[T any](p *T, none string) string {
	if p == nil {
		return none
	}
	return fmt.Sprint(*p)
}

func age(ms *int64) string {
	if ms == nil {
		return "never"
	}
	return (time.Duration(*ms) * time.Millisecond).Round(time.Second).String()
}

// ---- host groups ----

func (c *cli) hostGroupList(args []string) error {
	const hint = "kecectl host-group list"
	if _, err := parse(c.verbFlags("host-group list"), hint, args); err != nil {
		return err
	}
	r, err := c.client.ListHostGroupsWithResponse(c.ctx)
	if err := c.result(r, err, http.StatusOK); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r.JSON200)
	}
	w := c.table()
	row(w, "ID", "NAME", "CAPACITY", "IN-FLIGHT", "NODES", "REVISION")
	for _, g := range r.JSON200.HostGroups {
		row(w, g.HostGroupId, g.Name, g.SlotCapacity, g.SlotsInFlight, deref(g.NodeCount, "-"), g.Revision)
	}
	return w.Flush()
}

func (c *cli) hostGroupCreate(args []string) error {
	const hint = "kecectl host-group create --name NAME --slots N"
	fs := c.verbFlags("host-group create")
	name := fs.String("name", "", "host group name")
	slots := fs.Int("slots", 0, "slot capacity")
	if pos, err := parse(fs, hint, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef(hint, "unexpected argument %q", pos[0])
	}
	if *name == "" || *slots < 1 {
		return usagef(hint, "--name and a positive --slots are required")
	}
	r, err := c.client.CreateHostGroupWithResponse(c.ctx, adminapi.HostGroupCreate{Name: *name, SlotCapacity: int32(*slots)})
	if err := c.result(r, err, http.StatusCreated); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r.JSON201)
	}
	fmt.Fprintf(c.out, "host group %s created: %s, %d slots, revision %d\n", r.JSON201.HostGroupId, r.JSON201.Name,
		r.JSON201.SlotCapacity, r.JSON201.Revision)
	return nil
}

func (c *cli) hostGroupResize(args []string) error {
	const hint = "kecectl host-group resize ID --slots N [--revision R]"
	fs := c.verbFlags("host-group resize")
	slots := fs.Int("slots", 0, "new slot capacity")
	rev := fs.Int64("revision", 0, "revision the change is based on (default: the current one)")
	id, err := oneID(fs, hint, args)
	if err != nil {
		return err
	}
	if *slots < 1 {
		return usagef(hint, "a positive --slots is required")
	}
	if *rev == 0 {
		l, err := c.client.ListHostGroupsWithResponse(c.ctx)
		if err := c.result(l, err, http.StatusOK); err != nil {
			return err
		}
		for _, g := range l.JSON200.HostGroups {
			if g.HostGroupId == id {
				*rev = g.Revision
			}
		}
		if *rev == 0 {
			return fmt.Errorf("host group %s does not exist (see 'kecectl host-group list')", id)
		}
	}
	r, err := c.client.UpdateHostGroupWithResponse(c.ctx, id, adminapi.HostGroupUpdate{SlotCapacity: int32(*slots), Revision: *rev})
	if err := c.result(r, err, http.StatusOK); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r.JSON200)
	}
	fmt.Fprintf(c.out, "host group %s now has %d slots (revision %d)\n", id, r.JSON200.SlotCapacity, r.JSON200.Revision)
	return nil
}

// ---- nodes ----

func nodeRows(w *tabwriter.Writer, ns []adminapi.Judger) {
	row(w, "ID", "NAME", "POOL", "GROUP", "DESIRED", "ONLINE", "HEARTBEAT", "RUNTIME", "SLOTS", "LEASES", "REVISION")
	for _, n := range ns {
		desired := string(n.DesiredState)
		if n.Revoked {
			desired += " (revoked)"
		}
		online := "no"
		if n.Health.Online {
			online = "yes"
		}
		if n.Health.ReportedDraining {
			online += " (draining itself)"
		}
		row(w, n.NodeId, n.Name, n.Pool, n.HostGroupId, desired, online, age(n.Health.HeartbeatAgeMs),
			orDash(n.Health.RuntimeVersion), n.Slots, n.LeasesInFlight, n.Revision)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (c *cli) nodeList(args []string) error {
	const hint = "kecectl node list [--pool POOL] [--state STATE]"
	fs := c.verbFlags("node list")
	pool := fs.String("pool", "", "cpp, java, python, arkts or mysql")
	state := fs.String("state", "", "PENDING_VERIFICATION, ENABLED, DRAINING or DISABLED")
	if _, err := parse(fs, hint, args); err != nil {
		return err
	}
	var p adminapi.ListJudgersParams
	if *pool != "" {
		v := adminapi.Pool(*pool)
		p.Pool = &v
	}
	if *state != "" {
		v := adminapi.DesiredState(strings.ToUpper(*state))
		p.State = &v
	}
	r, err := c.client.ListJudgersWithResponse(c.ctx, &p)
	if err := c.result(r, err, http.StatusOK); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r.JSON200)
	}
	w := c.table()
	nodeRows(w, r.JSON200.Judgers)
	return w.Flush()
}

func (c *cli) nodeShow(args []string) error {
	const hint = "kecectl node show ID"
	id, err := oneID(c.verbFlags("node show"), hint, args)
	if err != nil {
		return err
	}
	r, err := c.client.GetJudgerWithResponse(c.ctx, id)
	if err := c.result(r, err, http.StatusOK); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r.JSON200)
	}
	d := r.JSON200
	w := c.table()
	nodeRows(w, []adminapi.Judger{d.Node})
	if err := w.Flush(); err != nil {
		return err
	}
	if d.Node.Address != nil {
		fmt.Fprintf(c.out, "address: %s\n", *d.Node.Address)
	}
	if len(d.Node.Health.Dependencies) > 0 {
		fmt.Fprintln(c.out, "\ndependencies:")
		w = c.table()
		for _, dep := range d.Node.Health.Dependencies {
			row(w, "  "+dep.Name, map[bool]string{true: "healthy", false: "UNHEALTHY"}[dep.Healthy], deref(dep.Detail, ""))
		}
		_ = w.Flush()
	}
	fmt.Fprintln(c.out, "\nchecks:")
	w = c.table()
	row(w, "  CHECK", "JOB", "STATE", "RUNTIME", "CREATED", "ERROR")
	for _, ch := range d.Checks {
		row(w, "  "+ch.CheckId, ch.JobId, ch.State, deref(ch.RuntimeVersion, "-"), ch.CreatedAt.Format(time.RFC3339), deref(ch.ErrorCode, ""))
	}
	_ = w.Flush()
	fmt.Fprintln(c.out, "\nrecent attempts:")
	w = c.table()
	row(w, "  JOB", "LEASE", "OUTCOME", "STARTED", "ERROR")
	for _, a := range d.RecentAttempts {
		row(w, "  "+a.JobId, a.LeaseEpoch, a.Outcome, a.StartedAt.Format(time.RFC3339), deref(a.ErrorCode, ""))
	}
	_ = w.Flush()
	fmt.Fprintln(c.out, "\naudit:")
	w = c.table()
	row(w, "  AT", "ACTOR", "ACTION", "REASON")
	for _, e := range d.Audit {
		row(w, "  "+e.At.Format(time.RFC3339), e.Actor, e.Action, e.Reason)
	}
	return w.Flush()
}

func (c *cli) nodeCreate(args []string) error {
	const hint = "kecectl node create --name NAME --pool POOL --group HOST_GROUP_ID --slots N [--address URL]"
	fs := c.verbFlags("node create")
	name := fs.String("name", "", "node name")
	pool := fs.String("pool", "", "cpp, java, python, arkts or mysql")
	group := fs.String("group", "", "host group id")
	slots := fs.Int("slots", 0, "slots")
	address := fs.String("address", "", "base URL of the node's /healthz (optional)")
	if pos, err := parse(fs, hint, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef(hint, "unexpected argument %q", pos[0])
	}
	if *name == "" || *pool == "" || !validID(*group) || *slots < 1 {
		return usagef(hint, "--name, --pool, --group (a host group id) and a positive --slots are required")
	}
	body := adminapi.JudgerCreate{Name: *name, Pool: adminapi.Pool(*pool), HostGroupId: *group, Slots: int32(*slots)}
	if *address != "" {
		body.Address = address
	}
	r, err := c.client.CreateJudgerWithResponse(c.ctx, body)
	if err := c.result(r, err, http.StatusCreated); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r.JSON201)
	}
	fmt.Fprintf(c.out, "node %s (%s, pool %s) registered, PENDING_VERIFICATION\n", r.JSON201.Node.NodeId, r.JSON201.Node.Name, r.JSON201.Node.Pool)
	fmt.Fprintf(c.out, "join code (shown once, expires %s):\n%s\n", r.JSON201.JoinCodeExpiresAt.Format(time.RFC3339), r.JSON201.JoinCode)
	return nil
}

// nodeAction runs a reason-only node verb: verify, enable, drain, revoke.
func (c *cli) nodeAction(verb string) func([]string) error {
	return func(args []string) error {
		hint := "kecectl node " + verb + " ID --reason TEXT"
		fs := c.verbFlags("node " + verb)
		id, reason, err := idAndReason(fs, hint, args)
		if err != nil {
			return err
		}
		body := adminapi.ReasonRequest{Reason: reason}
		var node *adminapi.Judger
		switch verb {
		case "verify":
			r, err := c.client.VerifyJudgerWithResponse(c.ctx, id, body)
			if err := c.result(r, err, http.StatusAccepted); err != nil {
				return err
			}
			if c.json {
				return c.printJSON(r.JSON202)
			}
			fmt.Fprintf(c.out, "self-check %s queued as job %s; watch it with 'kecectl node show %s'\n", r.JSON202.CheckId, r.JSON202.JobId, id)
			return nil
		case "enable":
			r, err := c.client.EnableJudgerWithResponse(c.ctx, id, body)
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			node = r.JSON200
		case "drain":
			r, err := c.client.DrainJudgerWithResponse(c.ctx, id, body)
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			node = r.JSON200
		case "revoke":
			r, err := c.client.RevokeJudgerWithResponse(c.ctx, id, body)
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			node = r.JSON200
		}
		return c.printNode(node)
	}
}

func (c *cli) printNode(n *adminapi.Judger) error {
	if c.json {
		return c.printJSON(n)
	}
	revoked := ""
	if n.Revoked {
		revoked = ", revoked"
	}
	fmt.Fprintf(c.out, "node %s (%s): %s%s, %d slots, %d leases in flight, revision %d\n", n.NodeId, n.Name, n.DesiredState,
		revoked, n.Slots, n.LeasesInFlight, n.Revision)
	return nil
}

func (c *cli) nodeDisable(args []string) error {
	const hint = "kecectl node disable ID --reason TEXT [--force]"
	fs := c.verbFlags("node disable")
	force := fs.Bool("force", false, "disable even while the node holds live leases")
	id, reason, err := idAndReason(fs, hint, args)
	if err != nil {
		return err
	}
	r, err := c.client.DisableJudgerWithResponse(c.ctx, id, adminapi.DisableRequest{Reason: reason, Force: *force})
	if err := c.result(r, err, http.StatusOK); err != nil {
		return err
	}
	return c.printNode(r.JSON200)
}

func (c *cli) nodeResize(args []string) error {
	const hint = "kecectl node resize ID --slots N --reason TEXT [--revision R]"
	fs := c.verbFlags("node resize")
	slots := fs.Int("slots", 0, "new slot count")
	rev := fs.Int64("revision", 0, "revision the change is based on (default: the current one)")
	id, reason, err := idAndReason(fs, hint, args)
	if err != nil {
		return err
	}
	if *slots < 1 {
		return usagef(hint, "a positive --slots is required")
	}
	if *rev == 0 {
		g, err := c.client.GetJudgerWithResponse(c.ctx, id)
		if err := c.result(g, err, http.StatusOK); err != nil {
			return err
		}
		*rev = g.JSON200.Node.Revision
	}
	r, err := c.client.UpdateJudgerWithResponse(c.ctx, id, adminapi.JudgerUpdate{Slots: int32(*slots), Revision: *rev, Reason: reason})
	if err := c.result(r, err, http.StatusOK); err != nil {
		return err
	}
	return c.printNode(r.JSON200)
}

func (c *cli) printJoinCode(j *adminapi.JoinCodeIssued, what string) error {
	if c.json {
		return c.printJSON(j)
	}
	fmt.Fprintf(c.out, "%s for node %s (shown once, expires %s):\n%s\n", what, j.NodeId, j.JoinCodeExpiresAt.Format(time.RFC3339), j.JoinCode)
	return nil
}

func (c *cli) nodeRotate(args []string) error {
	const hint = "kecectl node rotate ID --reason TEXT"
	fs := c.verbFlags("node rotate")
	id, reason, err := idAndReason(fs, hint, args)
	if err != nil {
		return err
	}
	r, err := c.client.RotateJudgerCredentialWithResponse(c.ctx, id, adminapi.ReasonRequest{Reason: reason})
	if err := c.result(r, err, http.StatusOK); err != nil {
		return err
	}
	return c.printJoinCode(r.JSON200, "credential revoked; the node must join again with this join code")
}

func (c *cli) nodeJoinCode(args []string) error {
	const hint = "kecectl node join-code ID"
	id, err := oneID(c.verbFlags("node join-code"), hint, args)
	if err != nil {
		return err
	}
	r, err := c.client.ResetJoinCodeWithResponse(c.ctx, id)
	if err := c.result(r, err, http.StatusOK); err != nil {
		return err
	}
	return c.printJoinCode(r.JSON200, "new join code")
}

func (c *cli) nodeProbe(args []string) error {
	const hint = "kecectl node probe ID"
	id, err := oneID(c.verbFlags("node probe"), hint, args)
	if err != nil {
		return err
	}
	r, err := c.client.ProbeJudgerWithResponse(c.ctx, id)
	if err := c.result(r, err, http.StatusOK); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r.JSON200)
	}
	p := r.JSON200
	fmt.Fprintf(c.out, "probe %s: reachable=%v dialed=%s status=%s latency=%dms\n", p.Address, p.Reachable,
		deref(p.DialedIp, "-"), deref(p.StatusCode, "-"), p.LatencyMs)
	if p.Error != nil {
		fmt.Fprintf(c.out, "error: %s: %s\n", p.Error.Code, p.Error.Message)
	}
	if p.Health != nil {
		return c.printJSON(p.Health)
	}
	return nil
}

// ---- jobs ----

func (c *cli) jobList(args []string) error {
	const hint = "kecectl job list [--state S] [--pool P] [--kind K] [--type T] [--limit N] [--before ID]"
	fs := c.verbFlags("job list")
	state := fs.String("state", "", "QUEUED, RUNNING, COMPLETED, FAILED or CANCELLED")
	pool := fs.String("pool", "", "pool")
	kind := fs.String("kind", "", "SUBMISSION or CHECK")
	typ := fs.String("type", "", "submission type")
	limit := fs.Int("limit", 50, "page size (1..500)")
	before := fs.String("before", "", "only jobs with a smaller id (the previous page's next id)")
	if _, err := parse(fs, hint, args); err != nil {
		return err
	}
	if *limit < 1 || *limit > 500 {
		return usagef(hint, "--limit must be 1..500")
	}
	l := int32(*limit)
	p := adminapi.ListJudgeJobsParams{Limit: &l}
	if *state != "" {
		v := adminapi.JobState(strings.ToUpper(*state))
		p.State = &v
	}
	if *pool != "" {
		v := adminapi.Pool(*pool)
		p.Pool = &v
	}
	if *kind != "" {
		v := adminapi.JobKind(strings.ToUpper(*kind))
		p.Kind = &v
	}
	if *typ != "" {
		p.SubmissionType = typ
	}
	if *before != "" {
		p.BeforeId = before
	}
	r, err := c.client.ListJudgeJobsWithResponse(c.ctx, &p)
	if err := c.result(r, err, http.StatusOK); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r.JSON200)
	}
	w := c.table()
	jobRows(w, r.JSON200.Jobs)
	if err := w.Flush(); err != nil {
		return err
	}
	if r.JSON200.NextBeforeId != nil {
		fmt.Fprintf(c.out, "more: --before %s\n", *r.JSON200.NextBeforeId)
	}
	return nil
}

func jobRows(w *tabwriter.Writer, js []adminapi.JudgeJob) {
	row(w, "ID", "KIND", "SUBMISSION", "GEN", "POOL", "STATE", "PHASE", "CASES", "ATTEMPTS", "NODE", "ERROR", "CREATED")
	for _, j := range js {
		row(w, j.JobId, j.Kind, j.SubmissionType+"/"+j.SubmissionId, j.Generation, j.Pool, j.State, deref(j.Phase, "-"),
			fmt.Sprintf("%d/%d", j.CasesDone, j.CasesTotal), fmt.Sprintf("%d/%d", j.AttemptCount, j.MaxAttempts),
			deref(j.NodeId, "-"), deref(j.LastErrorCode, ""), j.CreatedAt.Format(time.RFC3339))
	}
}

func (c *cli) jobShow(args []string) error {
	const hint = "kecectl job show ID"
	id, err := oneID(c.verbFlags("job show"), hint, args)
	if err != nil {
		return err
	}
	r, err := c.client.GetJudgeJobWithResponse(c.ctx, id)
	if err := c.result(r, err, http.StatusOK); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r.JSON200)
	}
	d := r.JSON200
	w := c.table()
	jobRows(w, []adminapi.JudgeJob{d.Job})
	_ = w.Flush()
	if d.Job.Current != nil && !*d.Job.Current {
		fmt.Fprintln(c.out, "superseded: a newer generation of this submission exists")
	}
	if v := d.Verdict; v != nil {
		fmt.Fprintf(c.out, "verdict: %s, score %g/%d\n", v.Status, v.Score, v.MaxScore)
		w = c.table()
		row(w, "  CASE", "STATUS", "SCORE", "TIME", "MEMORY")
		for _, cs := range v.Cases {
			row(w, "  "+cs.CaseId, cs.Status, strconv.FormatFloat(cs.Score, 'f', -1, 64), strconv.FormatInt(cs.TimeMs, 10)+"ms", strconv.FormatInt(cs.MemoryKb, 10)+"KiB")
		}
		_ = w.Flush()
	}
	fmt.Fprintln(c.out, "attempts:")
	w = c.table()
	row(w, "  LEASE", "NODE", "SESSION", "OUTCOME", "ERROR", "STARTED", "ENDED")
	for _, a := range d.Attempts {
		ended := "-"
		if a.EndedAt != nil {
			ended = a.EndedAt.Format(time.RFC3339)
		}
		row(w, "  "+strconv.FormatInt(a.LeaseEpoch, 10), a.NodeId, a.SessionEpoch, a.Outcome, deref(a.ErrorCode, ""),
			a.StartedAt.Format(time.RFC3339), ended)
	}
	return w.Flush()
}

func (c *cli) jobRejudge(args []string) error {
	const hint = "kecectl job rejudge ID --reason TEXT"
	fs := c.verbFlags("job rejudge")
	id, reason, err := idAndReason(fs, hint, args)
	if err != nil {
		return err
	}
	r, err := c.client.RejudgeJudgeJobWithResponse(c.ctx, id, adminapi.ReasonRequest{Reason: reason})
	if err := c.result(r, err, http.StatusAccepted); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r.JSON202)
	}
	fmt.Fprintf(c.out, "rejudge queued: job %s, generation %d (%s)\n", r.JSON202.JobId, r.JSON202.Generation, r.JSON202.State)
	return nil
}

func (c *cli) jobCancel(args []string) error {
	const hint = "kecectl job cancel ID --reason TEXT"
	fs := c.verbFlags("job cancel")
	id, reason, err := idAndReason(fs, hint, args)
	if err != nil {
		return err
	}
	r, err := c.client.CancelJudgeJobWithResponse(c.ctx, id, adminapi.ReasonRequest{Reason: reason})
	if err := c.result(r, err, http.StatusOK); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r.JSON200)
	}
	fmt.Fprintf(c.out, "job %s: %s\n", r.JSON200.JobId, r.JSON200.State)
	return nil
}

// ---- settlement events ----

func (c *cli) eventsDead(args []string) error {
	const hint = "kecectl events dead [--limit N] [--before ID]"
	fs := c.verbFlags("events dead")
	limit := fs.Int("limit", 100, "page size (1..500)")
	before := fs.String("before", "", "only events with a smaller id")
	if _, err := parse(fs, hint, args); err != nil {
		return err
	}
	if *limit < 1 || *limit > 500 {
		return usagef(hint, "--limit must be 1..500")
	}
	l, st := int32(*limit), adminapi.DeliveryStateDead
	p := adminapi.ListSettlementEventsParams{State: &st, Limit: &l}
	if *before != "" {
		p.BeforeId = before
	}
	r, err := c.client.ListSettlementEventsWithResponse(c.ctx, &p)
	if err := c.result(r, err, http.StatusOK); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r.JSON200)
	}
	w := c.table()
	row(w, "EVENT", "JOB", "SUBMISSION", "GEN", "ATTEMPTS", "LAST ERROR", "CREATED")
	for _, e := range r.JSON200.Events {
		row(w, e.EventId, e.JobId, e.SubmissionType+"/"+e.SubmissionId, e.Generation, e.DeliveryAttempts, deref(e.LastError, ""),
			e.CreatedAt.Format(time.RFC3339))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if r.JSON200.NextBeforeId != nil {
		fmt.Fprintf(c.out, "more: --before %s\n", *r.JSON200.NextBeforeId)
	}
	return nil
}

func (c *cli) eventsRedeliver(args []string) error {
	const hint = "kecectl events redeliver ID --reason TEXT"
	fs := c.verbFlags("events redeliver")
	id, reason, err := idAndReason(fs, hint, args)
	if err != nil {
		return err
	}
	r, err := c.client.RedeliverSettlementEventWithResponse(c.ctx, id, adminapi.ReasonRequest{Reason: reason})
	if err := c.result(r, err, http.StatusOK); err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r.JSON200)
	}
	fmt.Fprintf(c.out, "event %s of job %s is %s again\n", r.JSON200.EventId, r.JSON200.JobId, r.JSON200.State)
	return nil
}

// ---- reconcile ----

func (c *cli) reconcile(args []string) error {
	const hint = "kecectl reconcile [--json]"
	if pos, err := parse(c.verbFlags("reconcile"), hint, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef(hint, "unexpected argument %q", pos[0])
	}
	r, err := c.client.ReconcileWithResponse(c.ctx)
	if err := c.result(r, err, http.StatusOK); err != nil {
		return err
	}
	rep := r.JSON200
	if c.json {
		if err := c.printJSON(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(c.out, "as of %s: %d rules checked, %d violations\n", rep.AsOf.Format(time.RFC3339), len(rep.RulesChecked), len(rep.Violations))
		if len(rep.Violations) > 0 {
			w := c.table()
			row(w, "RULE", "SUBJECT", "ID", "MESSAGE")
			for _, v := range rep.Violations {
				row(w, v.Rule, v.SubjectType, v.SubjectId, v.Message)
			}
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
	if !rep.Ok {
		return violationsFound(len(rep.Violations))
	}
	return nil
}
