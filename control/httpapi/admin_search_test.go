package httpapi_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/manifest"
)

// waVerdict fails the job's first case, with a compile log to show.
func waVerdict(job machineapi.ClaimedJob) machineapi.ResultRequest {
	r := checkVerdict(job)
	r.Verdict.Status = machineapi.VerdictStatusWA
	r.Verdict.CompileLog = "warning: unused variable"
	r.Verdict.Score -= r.Verdict.Cases[0].Score
	r.Verdict.Cases[0].Status, r.Verdict.Cases[0].Score, r.Verdict.Cases[0].Message = machineapi.VerdictStatusWA, 0, "expected 3, got 4"
	return r
}

// searchEnv is a control plane with an enabled cpp node and a manifest.
type searchEnv struct {
	*adminEnv
	nc  *nodeClient
	man int64
}

func startSearch(t *testing.T) *searchEnv {
	a := startAdmin(t, controltest.Options{})
	manID := a.env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 100})
	n := a.env.NewNode("cpp", 4, 4)
	nc := joinAndOpen(t, a.env, n.JoinCode, "boot-search-"+t.Name())
	a.env.ForceEnable(n.ID)
	return &searchEnv{adminEnv: a, nc: nc, man: manID}
}

// judge claims the job and posts result(job) for it.
func (s *searchEnv) judge(jobID int64, result func(machineapi.ClaimedJob) machineapi.ResultRequest) {
	s.t.Helper()
	var got []machineapi.ClaimedJob
	require.Eventually(s.t, func() bool { got = claimNow(s.t, s.nc); return len(got) > 0 }, 5*time.Second, 10*time.Millisecond)
	require.Len(s.t, got, 1)
	require.Equal(s.t, idStr(jobID), got[0].JobId)
	res, err := s.nc.c.SubmitResultWithResponse(s.ctx, got[0].JobId, result(got[0]))
	require.NoError(s.t, err)
	require.Equal(s.t, http.StatusOK, res.StatusCode(), string(res.Body))
}

func (s *searchEnv) search(p adminapi.ListJudgeJobsParams) []string {
	s.t.Helper()
	r, err := s.c.ListJudgeJobsWithResponse(s.ctx, &p)
	require.NoError(s.t, err)
	require.Equal(s.t, http.StatusOK, r.StatusCode(), string(r.Body))
	ids := []string{}
	for _, j := range r.JSON200.Jobs {
		ids = append(ids, j.JobId)
	}
	return ids
}

func TestAdminJobSearchAndJobPage(t *testing.T) {
	t.Parallel()
	s := startSearch(t)
	ac := s.env.Enqueue("ALGO", "p-1", "cpp17", "int main(){}", s.man)
	s.judge(ac, checkVerdict)
	wa := s.env.Enqueue("ALGO", "p-2", "cpp17", "int main(){}", s.man)
	s.judge(wa, waVerdict)
	rj, err := s.c.RejudgeJudgeJobWithResponse(s.ctx, idStr(wa), adminapi.ReasonRequest{Reason: "tests fixed"})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, rj.StatusCode(), string(rj.Body))
	other := s.env.Enqueue("CONTEST", "p-2", "cpp17", "int main(){}", s.man)

	typ, sid := "ALGO", "p-2"
	require.Equal(t, []string{rj.JSON202.JobId, idStr(wa)}, s.search(adminapi.ListJudgeJobsParams{SubmissionType: &typ, SubmissionId: &sid}))
	verdict := adminapi.VerdictStatusWA
	require.Equal(t, []string{idStr(wa)}, s.search(adminapi.ListJudgeJobsParams{Verdict: &verdict}))
	queued, pool := adminapi.JobStateQueued, adminapi.PoolCpp
	require.Equal(t, []string{idStr(other), rj.JSON202.JobId}, s.search(adminapi.ListJudgeJobsParams{State: &queued, Pool: &pool}))

	// Time range: the first two jobs an hour in the past, the others now.
	past := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	_, err = s.env.DB.ExecContext(s.ctx, `UPDATE judge_job SET created_at = ? WHERE id IN (?, ?)`, past, ac, wa)
	require.NoError(t, err)
	after, before := past, past.Add(time.Second)
	kind := adminapi.JobKindSubmission
	require.Equal(t, []string{idStr(wa), idStr(ac)}, s.search(adminapi.ListJudgeJobsParams{CreatedAfter: &after, CreatedBefore: &before, Kind: &kind}))

	// List items say how each job ended.
	r, err := s.c.ListJudgeJobsWithResponse(s.ctx, &adminapi.ListJudgeJobsParams{SubmissionType: &typ})
	require.NoError(t, err)
	byID := map[string]adminapi.JudgeJob{}
	for _, j := range r.JSON200.Jobs {
		byID[j.JobId] = j
	}
	require.Equal(t, adminapi.VerdictStatusAC, *byID[idStr(ac)].Verdict)
	require.Equal(t, adminapi.VerdictStatusWA, *byID[idStr(wa)].Verdict)
	require.Nil(t, byID[rj.JSON202.JobId].Verdict)

	// Keyset paging: one job a page, each once, newest first.
	var seen []string
	lim := int32(1)
	p := adminapi.ListJudgeJobsParams{Kind: &kind, Limit: &lim}
	for {
		r, err := s.c.ListJudgeJobsWithResponse(s.ctx, &p)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
		for _, j := range r.JSON200.Jobs {
			seen = append(seen, j.JobId)
		}
		if r.JSON200.NextBeforeId == nil {
			break
		}
		p.BeforeId = r.JSON200.NextBeforeId
	}
	require.Equal(t, []string{idStr(other), rj.JSON202.JobId, idStr(wa), idStr(ac)}, seen)

	// The job page: attempts timeline, case results and compile log, the
	// submission's generations and the job's audit trail.
	gj, err := s.c.GetJudgeJobWithResponse(s.ctx, idStr(wa))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, gj.StatusCode(), string(gj.Body))
	d := gj.JSON200
	require.Len(t, d.Attempts, 1)
	require.Equal(t, "COMPLETED", d.Attempts[0].Outcome)
	require.Equal(t, int64(1), d.Attempts[0].LeaseEpoch)
	require.NotNil(t, d.Attempts[0].EndedAt)
	require.Equal(t, "warning: unused variable", d.Verdict.CompileLog)
	require.Equal(t, adminapi.VerdictStatusWA, d.Verdict.Cases[0].Status)
	require.Equal(t, "expected 3, got 4", d.Verdict.Cases[0].Message)
	require.Len(t, d.Generations, 2)
	require.Equal(t, rj.JSON202.JobId, d.Generations[0].JobId)
	require.True(t, d.Generations[0].Current)
	require.Equal(t, idStr(wa), d.Generations[1].JobId)
	require.Equal(t, adminapi.VerdictStatusWA, *d.Generations[1].Verdict)
	require.False(t, *d.Job.Current)
	gj, err = s.c.GetJudgeJobWithResponse(s.ctx, rj.JSON202.JobId)
	require.NoError(t, err)
	require.Len(t, gj.JSON200.Audit, 1)
	require.Equal(t, "job.rejudge", gj.JSON200.Audit[0].Action)
	require.Equal(t, "tests fixed", gj.JSON200.Audit[0].Reason)
	require.Equal(t, "127.0.0.1", *gj.JSON200.Audit[0].RemoteAddr, "the caller's address is recorded")
	gj, err = s.c.GetJudgeJobWithResponse(s.ctx, "999999")
	require.NoError(t, err)
	wantErr(t, gj, gj.Body, http.StatusNotFound, "JOB_NOT_FOUND")
}

func TestAdminJobSearchRefusesBadFilters(t *testing.T) {
	t.Parallel()
	a := startAdmin(t, controltest.Options{})
	for _, tc := range []struct{ query, field string }{
		{"submissionId=42", "submissionId"},
		{"createdAfter=2026-11-30T10:00:00Z&createdBefore=2026-11-30T10:00:00Z", "createdAfter"},
		{"createdAfter=2026-11-30T11:00:00Z&createdBefore=2026-11-30T10:00:00Z", "createdAfter"},
		{"verdict=SYSTEM_ERROR", ""},
		{"verdict=wa", ""},
		{"createdAfter=yesterday", ""},
		{"submissionType=ALGO&submissionId=" + url.QueryEscape("a b"), ""},
		{"limit=501", ""},
		{"limit=0", ""},
		{"beforeId=0", ""},
		{"pool=cobol", ""},
	} {
		resp := do(t, "GET", a.env.URL+"/api/v1/admin/judge-jobs?"+tc.query, a.env.Admin, "")
		require.Equal(t, http.StatusBadRequest, resp.status, "%s: %s", tc.query, resp.body)
		code, field := apiError(t, resp.body)
		require.Equal(t, "REQUEST_INVALID", code, tc.query)
		if tc.field != "" {
			require.Equal(t, tc.field, field, tc.query)
		}
	}
}

func TestAdminAuditList(t *testing.T) {
	t.Parallel()
	a := startAdmin(t, controltest.Options{})
	g := a.group("audit-rack", 4)
	n := a.judger("audit-node", adminapi.PoolCpp, g.HostGroupId, 1, "")
	dr, err := a.c.DrainJudgerWithResponse(a.ctx, n.Node.NodeId, adminapi.DrainRequest{Reason: "kernel update"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, dr.StatusCode(), string(dr.Body))

	list := func(p adminapi.ListAuditParams) adminapi.AuditList {
		t.Helper()
		r, err := a.c.ListAuditWithResponse(a.ctx, &p)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
		return *r.JSON200
	}
	all := list(adminapi.ListAuditParams{})
	require.Nil(t, all.NextBeforeId)
	actions := []string{}
	for _, e := range all.Entries {
		actions = append(actions, e.Action)
		if e.Actor == "kece-control" { // the test's tokens, made without the API
			require.Nil(t, e.RemoteAddr)
			continue
		}
		require.Regexp(t, `^ADMIN:`, e.Actor, "every API entry names the admin token")
		require.NotNil(t, e.RemoteAddr)
		require.Equal(t, "127.0.0.1", *e.RemoteAddr)
	}
	require.Equal(t, []string{"node.drain", "node.create", "host_group.create", "token.create", "token.create"}, actions, "newest first")
	require.Equal(t, g.HostGroupId, *all.Entries[2].HostGroupId)

	action := "node.drain"
	drains := list(adminapi.ListAuditParams{Action: &action, NodeId: &n.Node.NodeId})
	require.Len(t, drains.Entries, 1)
	require.Equal(t, "kernel update", drains.Entries[0].Reason)
	actor := all.Entries[0].Actor
	require.Len(t, list(adminapi.ListAuditParams{Actor: &actor}).Entries, 3)
	nobody := "ADMIN:nobody"
	require.Empty(t, list(adminapi.ListAuditParams{Actor: &nobody}).Entries)
	after := all.Entries[0].At
	require.Len(t, list(adminapi.ListAuditParams{After: &after}).Entries, 1)

	lim := int32(2)
	page := list(adminapi.ListAuditParams{Limit: &lim, Actor: &actor})
	require.Len(t, page.Entries, 2)
	require.NotNil(t, page.NextBeforeId)
	rest := list(adminapi.ListAuditParams{Limit: &lim, Actor: &actor, BeforeId: page.NextBeforeId})
	require.Len(t, rest.Entries, 1)
	require.Equal(t, "host_group.create", rest.Entries[0].Action)

	for _, q := range []string{"after=2026-11-30T10:00:00Z&before=2026-11-30T09:00:00Z", "nodeId=abc", "action=Node%20drain",
		"limit=1000", "before=soon"} {
		resp := do(t, "GET", a.env.URL+"/api/v1/admin/audit?"+q, a.env.Admin, "")
		require.Equal(t, http.StatusBadRequest, resp.status, "%s: %s", q, resp.body)
		code, _ := apiError(t, resp.body)
		require.Equal(t, "REQUEST_INVALID", code, q)
	}
}

func TestAdminVerdictMix(t *testing.T) {
	t.Parallel()
	s := startSearch(t)
	ac := s.env.Enqueue("ALGO", "v-1", "cpp17", "int main(){}", s.man)
	s.judge(ac, checkVerdict)
	wa := s.env.Enqueue("ALGO", "v-2", "cpp17", "int main(){}", s.man)
	s.judge(wa, waVerdict)
	cn := s.env.Enqueue("ALGO", "v-3", "cpp17", "int main(){}", s.man)
	c, err := s.c.CancelJudgeJobWithResponse(s.ctx, idStr(cn), adminapi.ReasonRequest{Reason: "spam"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, c.StatusCode(), string(c.Body))

	r, err := s.c.GetVerdictMixWithResponse(s.ctx, &adminapi.GetVerdictMixParams{})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
	m := r.JSON200
	require.Equal(t, int32(15), m.Minutes, "default window")
	require.Equal(t, int32(60), m.BucketSeconds)
	require.Len(t, m.Pools, 5)
	for _, p := range m.Pools {
		require.Len(t, p.Buckets, 15)
		require.Equal(t, m.AsOf.Add(-time.Minute), p.Buckets[14].Start)
		if p.Pool != adminapi.PoolCpp {
			require.Zero(t, p.Finished)
			continue
		}
		require.Equal(t, int64(3), p.Finished)
		// The three jobs finished moments ago, so all fall in the last
		// bucket (the minute ending at asOf), and the buckets add up to the
		// pool's total.
		var sum int64
		for _, b := range p.Buckets {
			sum += b.Finished
		}
		require.Equal(t, p.Finished, sum, "cpp buckets sum to Finished: %+v", p.Buckets)
		require.Equal(t, int64(3), p.Buckets[14].Finished, "the last bucket holds the finishes: %+v", p.Buckets)
		got := map[adminapi.JobOutcome]int64{}
		for _, o := range p.Outcomes {
			got[o.Outcome] = o.Count
		}
		require.Equal(t, map[adminapi.JobOutcome]int64{adminapi.JobOutcomeAC: 1, adminapi.JobOutcomeWA: 1, adminapi.JobOutcomeCancelled: 1}, got)
	}

	day := int32(1440)
	r, err = s.c.GetVerdictMixWithResponse(s.ctx, &adminapi.GetVerdictMixParams{Minutes: &day})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
	require.Equal(t, int32(720), r.JSON200.BucketSeconds)
	require.Len(t, r.JSON200.Pools[0].Buckets, 120)

	for _, q := range []string{"minutes=0", "minutes=1441", "minutes=ten"} {
		resp := do(t, "GET", s.env.URL+"/api/v1/admin/verdict-mix?"+q, s.env.Admin, "")
		require.Equal(t, http.StatusBadRequest, resp.status, "%s: %s", q, resp.body)
		code, _ := apiError(t, resp.body)
		require.Equal(t, "REQUEST_INVALID", code, q)
	}
}
