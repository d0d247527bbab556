package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/probe"
	"github.com/kece-oj/kece/internal/reference"
)

func adminClient(t *testing.T, env *controltest.Env) *adminapi.ClientWithResponses {
	t.Helper()
	c, err := adminapi.NewClientWithResponses(env.URL, adminapi.WithRequestEditorFn(controltest.Bearer(env.Admin)))
	require.NoError(t, err)
	return c
}

type statusResponse interface{ StatusCode() int }

// wantErr checks an error answer's status and machine code.
func wantErr(t *testing.T, r statusResponse, body []byte, status int, code string) {
	t.Helper()
	require.Equal(t, status, r.StatusCode(), string(body))
	var e adminapi.Error
	require.NoError(t, json.Unmarshal(body, &e), string(body))
	require.Equal(t, adminapi.ErrorCode(code), e.Code, e.Message)
	require.NotEmpty(t, e.Message)
}

func (a *adminEnv) count(q string, args ...any) int {
	a.t.Helper()
	var n int
	require.NoError(a.t, a.env.DB.QueryRowContext(a.env.Ctx, q, args...).Scan(&n))
	return n
}

type adminEnv struct {
	t   *testing.T
	env *controltest.Env
	c   *adminapi.ClientWithResponses
	ctx context.Context
}

func startAdmin(t *testing.T, opts controltest.Options) *adminEnv {
	env := controltest.Start(t, opts)
	return &adminEnv{t: t, env: env, c: adminClient(t, env), ctx: env.Ctx}
}

func (a *adminEnv) group(name string, capacity int32) adminapi.HostGroup {
	a.t.Helper()
	r, err := a.c.CreateHostGroupWithResponse(a.ctx, adminapi.HostGroupCreate{Name: name, SlotCapacity: capacity})
	require.NoError(a.t, err)
	require.Equal(a.t, http.StatusCreated, r.StatusCode(), string(r.Body))
	return *r.JSON201
}

func (a *adminEnv) judger(name string, pool adminapi.Pool, group string, slots int32, address string) adminapi.JudgerCreated {
	a.t.Helper()
	body := adminapi.JudgerCreate{Name: name, Pool: pool, HostGroupId: group, Slots: slots}
	if address != "" {
		body.Address = &address
	}
	r, err := a.c.CreateJudgerWithResponse(a.ctx, body)
	require.NoError(a.t, err)
	require.Equal(a.t, http.StatusCreated, r.StatusCode(), string(r.Body))
	return *r.JSON201
}

func (a *adminEnv) detail(nodeID string) adminapi.JudgerDetail {
	a.t.Helper()
	r, err := a.c.GetJudgerWithResponse(a.ctx, nodeID)
	require.NoError(a.t, err)
	require.Equal(a.t, http.StatusOK, r.StatusCode(), string(r.Body))
	return *r.JSON200
}

func heartbeat(t *testing.T, nc *nodeClient, runtime string) {
	t.Helper()
	hb, err := nc.c.SendHeartbeatWithResponse(context.Background(), machineapi.HeartbeatRequest{RuntimeVersion: runtime,
		Dependencies: []machineapi.Dependency{{Name: "docker", Healthy: true}}, LocalSlots: 2})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, hb.StatusCode(), string(hb.Body))
}

func hasAudit(d adminapi.JudgerDetail, action, reason string) bool {
	for _, e := range d.Audit {
		if e.Action == action && e.Reason == reason && strings.HasPrefix(e.Actor, "ADMIN:") {
			return true
		}
	}
	return false
}

func TestAdminHostGroupsAndNodeRegistry(t *testing.T) {
	t.Parallel()
	a := startAdmin(t, controltest.Options{})
	g := a.group("rack-1", 4)
	require.Equal(t, int64(1), g.Revision)

	dup, err := a.c.CreateHostGroupWithResponse(a.ctx, adminapi.HostGroupCreate{Name: "rack-1", SlotCapacity: 2})
	require.NoError(t, err)
	wantErr(t, dup, dup.Body, http.StatusConflict, "NAME_TAKEN")

	up, err := a.c.UpdateHostGroupWithResponse(a.ctx, g.HostGroupId, adminapi.HostGroupUpdate{SlotCapacity: 8, Revision: g.Revision})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, up.StatusCode(), string(up.Body))
	require.Equal(t, int32(8), up.JSON200.SlotCapacity)
	stale, err := a.c.UpdateHostGroupWithResponse(a.ctx, g.HostGroupId, adminapi.HostGroupUpdate{SlotCapacity: 2, Revision: g.Revision})
	require.NoError(t, err)
	wantErr(t, stale, stale.Body, http.StatusConflict, "REVISION_STALE")
	missing, err := a.c.UpdateHostGroupWithResponse(a.ctx, "999999", adminapi.HostGroupUpdate{SlotCapacity: 2, Revision: 1})
	require.NoError(t, err)
	wantErr(t, missing, missing.Body, http.StatusNotFound, "HOST_GROUP_NOT_FOUND")

	created := a.judger("judge-a", adminapi.PoolCpp, g.HostGroupId, 2, "")
	require.True(t, strings.HasPrefix(created.JoinCode, "kjc_"))
	require.Equal(t, adminapi.DesiredStatePendingVerification, created.Node.DesiredState)
	require.False(t, created.Node.Joined)
	require.False(t, created.Node.Health.Online, "configuration and health are apart")
	require.True(t, created.JoinCodeExpiresAt.After(time.Now()))
	a.judger("judge-b", adminapi.PoolPython, g.HostGroupId, 1, "")

	r, err := a.c.CreateJudgerWithResponse(a.ctx, adminapi.JudgerCreate{Name: "judge-a", Pool: adminapi.PoolCpp, HostGroupId: g.HostGroupId, Slots: 1})
	require.NoError(t, err)
	wantErr(t, r, r.Body, http.StatusConflict, "NAME_TAKEN")
	r, err = a.c.CreateJudgerWithResponse(a.ctx, adminapi.JudgerCreate{Name: "judge-x", Pool: adminapi.PoolCpp, HostGroupId: "999999", Slots: 1})
	require.NoError(t, err)
	wantErr(t, r, r.Body, http.StatusNotFound, "HOST_GROUP_NOT_FOUND")
	r, err = a.c.CreateJudgerWithResponse(a.ctx, adminapi.JudgerCreate{Name: "judge-y", Pool: adminapi.PoolCpp, HostGroupId: g.HostGroupId, Slots: 9})
	require.NoError(t, err)
	wantErr(t, r, r.Body, http.StatusUnprocessableEntity, "REQUEST_INVALID")
	raw := do(t, "POST", a.env.URL+"/api/v1/admin/judgers", a.env.Admin, `{"name":"judge-z","pool":"cobol","hostGroupId":"1","slots":1}`)
	require.Equal(t, http.StatusBadRequest, raw.status, "unknown pools are refused by the contract")

	pool := adminapi.PoolPython
	list, err := a.c.ListJudgersWithResponse(a.ctx, &adminapi.ListJudgersParams{Pool: &pool})
	require.NoError(t, err)
	require.Len(t, list.JSON200.Judgers, 1)
	require.Equal(t, "judge-b", list.JSON200.Judgers[0].Name)
	state := adminapi.DesiredStateEnabled
	list, err = a.c.ListJudgersWithResponse(a.ctx, &adminapi.ListJudgersParams{State: &state})
	require.NoError(t, err)
	require.Empty(t, list.JSON200.Judgers)

	groups, err := a.c.ListHostGroupsWithResponse(a.ctx)
	require.NoError(t, err)
	require.Len(t, groups.JSON200.HostGroups, 1)
	require.Equal(t, int32(2), *groups.JSON200.HostGroups[0].NodeCount)

	// Resize with revision; never beyond the host group.
	node := created.Node
	rs, err := a.c.UpdateJudgerWithResponse(a.ctx, node.NodeId, adminapi.JudgerUpdate{Slots: 3, Revision: node.Revision, Reason: "more cores"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, rs.StatusCode(), string(rs.Body))
	require.Equal(t, int32(3), rs.JSON200.Slots)
	rs, err = a.c.UpdateJudgerWithResponse(a.ctx, node.NodeId, adminapi.JudgerUpdate{Slots: 1, Revision: node.Revision, Reason: "stale"})
	require.NoError(t, err)
	wantErr(t, rs, rs.Body, http.StatusConflict, "REVISION_STALE")
	rs, err = a.c.UpdateJudgerWithResponse(a.ctx, node.NodeId, adminapi.JudgerUpdate{Slots: 100, Revision: node.Revision + 1, Reason: "too big"})
	require.NoError(t, err)
	wantErr(t, rs, rs.Body, http.StatusUnprocessableEntity, "REQUEST_INVALID")
	gr, err := a.c.GetJudgerWithResponse(a.ctx, "999999")
	require.NoError(t, err)
	wantErr(t, gr, gr.Body, http.StatusNotFound, "NODE_NOT_FOUND")

	// Join code: reset before joining only.
	jc, err := a.c.ResetJoinCodeWithResponse(a.ctx, node.NodeId, adminapi.JoinCodeRequest{})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, jc.StatusCode(), string(jc.Body))
	anon := client(t, a.env.URL, "")
	old, err := anon.JoinNodeWithResponse(a.ctx, machineapi.JoinRequest{JoinCode: created.JoinCode})
	require.NoError(t, err)
	require.NotEqual(t, http.StatusCreated, old.StatusCode(), "the replaced code no longer joins")
	nc := joinAndOpen(t, a.env, jc.JSON200.JoinCode, "boot-1-admin")
	require.NotNil(t, nc)
	jc, err = a.c.ResetJoinCodeWithResponse(a.ctx, node.NodeId, adminapi.JoinCodeRequest{})
	require.NoError(t, err)
	wantErr(t, jc, jc.Body, http.StatusConflict, "NODE_ALREADY_JOINED")

	d := a.detail(node.NodeId)
	require.True(t, d.Node.Joined)
	require.True(t, hasAudit(d, "node.resize", "more cores"), "%+v", d.Audit)
	for _, e := range d.Audit {
		if e.Action == "node.create" {
			require.Contains(t, e.Actor, "ADMIN:")
		}
	}
}

// checkVerdict is the AC a node posts for the built-in code check.
func checkVerdict(job machineapi.ClaimedJob) machineapi.ResultRequest {
	v := &machineapi.Verdict{Status: machineapi.VerdictStatusAC}
	for _, c := range job.Manifest.Cases {
		v.Cases = append(v.Cases, machineapi.CaseResult{CaseId: c.CaseId, Status: machineapi.VerdictStatusAC, Score: float64(c.Weight)})
		v.Score += float64(c.Weight)
	}
	v.MaxScore = int64(v.Score)
	return machineapi.ResultRequest{LeaseEpoch: job.LeaseEpoch, Outcome: machineapi.OutcomeVerdict, Verdict: v}
}

func claimNow(t *testing.T, nc *nodeClient) []machineapi.ClaimedJob {
	t.Helper()
	r, err := nc.c.ClaimJobsWithResponse(context.Background(), machineapi.ClaimRequest{FreeSlots: 2, WaitMs: 0})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
	return r.JSON200.Jobs
}

func TestAdminVerifyThenEnable(t *testing.T) {
	t.Parallel()
	a := startAdmin(t, controltest.Options{})
	g := a.group("rack-v", 8)
	created := a.judger("judge-v", adminapi.PoolCpp, g.HostGroupId, 2, "")
	other := a.judger("judge-w", adminapi.PoolCpp, g.HostGroupId, 2, "")
	nc := joinAndOpen(t, a.env, created.JoinCode, "boot-v-admin")
	oc := joinAndOpen(t, a.env, other.JoinCode, "boot-w-admin")
	heartbeat(t, nc, "g++ 12.2")
	id := created.Node.NodeId

	en, err := a.c.EnableJudgerWithResponse(a.ctx, id, adminapi.ReasonRequest{Reason: "too early"})
	require.NoError(t, err)
	wantErr(t, en, en.Body, http.StatusConflict, "CHECK_REQUIRED")

	v, err := a.c.VerifyJudgerWithResponse(a.ctx, id, adminapi.ReasonRequest{Reason: "new host"})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, v.StatusCode(), string(v.Body))
	again, err := a.c.VerifyJudgerWithResponse(a.ctx, id, adminapi.ReasonRequest{Reason: "twice"})
	require.NoError(t, err)
	wantErr(t, again, again.Body, http.StatusConflict, "CHECK_IN_PROGRESS")

	// The check is bound to its node: another node of the pool, even
	// enabled, never gets it.
	a.env.ForceEnable(mustID(t, other.Node.NodeId))
	require.Empty(t, claimNow(t, oc))
	jobs := claimNow(t, nc)
	require.Len(t, jobs, 1)
	job := jobs[0]
	require.Equal(t, v.JSON202.JobId, job.JobId)
	require.Equal(t, machineapi.JobKindCheck, job.Kind)
	cppCheck, _ := reference.APlusB("cpp")
	require.Equal(t, cppCheck.Source, job.Submission.Source, "the built-in cpp program")
	require.Len(t, job.Manifest.Cases, 3)
	d := a.detail(id)
	require.Equal(t, adminapi.CheckStateRunning, d.Checks[0].State)

	res, err := nc.c.SubmitResultWithResponse(a.ctx, job.JobId, checkVerdict(job))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode(), string(res.Body))
	d = a.detail(id)
	require.Equal(t, adminapi.CheckStatePassed, d.Checks[0].State)
	require.Equal(t, "g++ 12.2", *d.Checks[0].RuntimeVersion)
	require.NotNil(t, d.Checks[0].Verdict)
	require.Len(t, d.Checks[0].Verdict.Cases, 3, "each case is one check step")
	require.NotEmpty(t, d.RecentAttempts)
	require.Zero(t, a.count(`SELECT COUNT(*) FROM judge_settlement_event`), "checks never reach the business")

	en, err = a.c.EnableJudgerWithResponse(a.ctx, id, adminapi.ReasonRequest{Reason: "check passed"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, en.StatusCode(), string(en.Body))
	require.Equal(t, adminapi.DesiredStateEnabled, en.JSON200.DesiredState)
	require.True(t, en.JSON200.Health.Online)
	require.Equal(t, "docker", en.JSON200.Health.Dependencies[0].Name)
	en, err = a.c.EnableJudgerWithResponse(a.ctx, id, adminapi.ReasonRequest{Reason: "again"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, en.StatusCode(), "enabling an enabled node is a no-op")

	d = a.detail(id)
	require.True(t, hasAudit(d, "node.verify", "new host"), "%+v", d.Audit)
	require.True(t, hasAudit(d, "node.enable", "check passed"), "%+v", d.Audit)

	// Without a fresh heartbeat a passing check is not enough.
	third := a.judger("judge-x", adminapi.PoolPython, g.HostGroupId, 1, "")
	tc := joinAndOpen(t, a.env, third.JoinCode, "boot-x-admin")
	heartbeat(t, tc, "Python 3.11")
	v, err = a.c.VerifyJudgerWithResponse(a.ctx, third.Node.NodeId, adminapi.ReasonRequest{Reason: "verify"})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, v.StatusCode(), string(v.Body))
	jobs = claimNow(t, tc)
	require.Len(t, jobs, 1)
	require.Contains(t, jobs[0].Submission.Source, "print(a + b)")
	res, err = tc.c.SubmitResultWithResponse(a.ctx, jobs[0].JobId, checkVerdict(jobs[0]))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode(), string(res.Body))
	_, err = a.env.DB.ExecContext(a.ctx, `UPDATE judge_node SET last_heartbeat_at = NOW(6) - INTERVAL 1 HOUR WHERE id = ?`, third.Node.NodeId)
	require.NoError(t, err)
	en, err = a.c.EnableJudgerWithResponse(a.ctx, third.Node.NodeId, adminapi.ReasonRequest{Reason: "stale"})
	require.NoError(t, err)
	wantErr(t, en, en.Body, http.StatusConflict, "HEARTBEAT_STALE")
	heartbeat(t, tc, "Python 3.12")
	en, err = a.c.EnableJudgerWithResponse(a.ctx, third.Node.NodeId, adminapi.ReasonRequest{Reason: "other runtime"})
	require.NoError(t, err)
	wantErr(t, en, en.Body, http.StatusConflict, "CHECK_REQUIRED")

	// The mysql pool's check is a SQL problem.
	sqlNode := a.judger("judge-sql", adminapi.PoolMysql, g.HostGroupId, 1, "")
	sc := joinAndOpen(t, a.env, sqlNode.JoinCode, "boot-sql-admin")
	v, err = a.c.VerifyJudgerWithResponse(a.ctx, sqlNode.Node.NodeId, adminapi.ReasonRequest{Reason: "verify"})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, v.StatusCode(), string(v.Body))
	jobs = claimNow(t, sc)
	require.Len(t, jobs, 1)
	require.Equal(t, machineapi.ManifestKindSql, jobs[0].Manifest.Kind)
	require.Contains(t, jobs[0].Submission.Source, "SELECT")
	require.Equal(t, "mysql", jobs[0].Submission.Language)
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return id
}

func TestAdminDisableDrainRevokeRotate(t *testing.T) {
	t.Parallel()
	a := startAdmin(t, controltest.Options{})
	manID := a.env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 100})
	g := a.group("rack-d", 4)
	created := a.judger("judge-d", adminapi.PoolCpp, g.HostGroupId, 2, "")
	id := created.Node.NodeId
	nc := joinAndOpen(t, a.env, created.JoinCode, "boot-d-admin")
	a.env.ForceEnable(mustID(t, id))
	jobID := a.env.Enqueue("ALGO", "d-1", "cpp17", "int main(){}", manID)
	jobs := claimNow(t, nc)
	require.Len(t, jobs, 1)
	require.Equal(t, idStr(jobID), jobs[0].JobId)

	dis, err := a.c.DisableJudgerWithResponse(a.ctx, id, adminapi.DisableRequest{Reason: "maintenance"})
	require.NoError(t, err)
	wantErr(t, dis, dis.Body, http.StatusConflict, "LEASES_ACTIVE")
	dr, err := a.c.DrainJudgerWithResponse(a.ctx, id, adminapi.DrainRequest{Reason: "maintenance"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, dr.StatusCode(), string(dr.Body))
	require.Equal(t, adminapi.DesiredStateDraining, dr.JSON200.DesiredState)
	require.Equal(t, int32(1), dr.JSON200.LeasesInFlight)
	dis, err = a.c.DisableJudgerWithResponse(a.ctx, id, adminapi.DisableRequest{Reason: "host is being replaced", Force: true})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, dis.StatusCode(), string(dis.Body))
	require.Equal(t, adminapi.DesiredStateDisabled, dis.JSON200.DesiredState)
	d := a.detail(id)
	require.True(t, hasAudit(d, "node.disable", "host is being replaced"))
	require.True(t, hasAudit(d, "node.drain", "maintenance"))

	// Rotate: the old session and credential die; a new join works.
	rot, err := a.c.RotateJudgerCredentialWithResponse(a.ctx, id, adminapi.RotateRequest{Reason: "credential leaked"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, rot.StatusCode(), string(rot.Body))
	hb, err := nc.c.SendHeartbeatWithResponse(a.ctx, machineapi.HeartbeatRequest{RuntimeVersion: "x", Dependencies: []machineapi.Dependency{}, LocalSlots: 1})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, hb.StatusCode(), string(hb.Body))
	s, err := client(t, a.env.URL, nc.cred).OpenSessionWithResponse(a.ctx, machineapi.SessionRequest{BootId: "boot-d-admin", ProtocolVersion: 1})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, s.StatusCode(), string(s.Body))
	nc2 := joinAndOpen(t, a.env, rot.JSON200.JoinCode, "boot-d2-admin")
	heartbeat(t, nc2, "g++ 12")

	// Revoke: at once, idempotent, final.
	rv, err := a.c.RevokeJudgerWithResponse(a.ctx, id, adminapi.ReasonRequest{Reason: "host compromised"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, rv.StatusCode(), string(rv.Body))
	require.True(t, rv.JSON200.Revoked)
	hb, err = nc2.c.SendHeartbeatWithResponse(a.ctx, machineapi.HeartbeatRequest{RuntimeVersion: "x", Dependencies: []machineapi.Dependency{}, LocalSlots: 1})
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, hb.StatusCode(), string(hb.Body))
	rv, err = a.c.RevokeJudgerWithResponse(a.ctx, id, adminapi.ReasonRequest{Reason: "again"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, rv.StatusCode())
	rot, err = a.c.RotateJudgerCredentialWithResponse(a.ctx, id, adminapi.RotateRequest{Reason: "x"})
	require.NoError(t, err)
	wantErr(t, rot, rot.Body, http.StatusConflict, "NODE_REVOKED")
	en, err := a.c.EnableJudgerWithResponse(a.ctx, id, adminapi.ReasonRequest{Reason: "x"})
	require.NoError(t, err)
	wantErr(t, en, en.Body, http.StatusConflict, "NODE_REVOKED")
	dr, err = a.c.DrainJudgerWithResponse(a.ctx, id, adminapi.DrainRequest{Reason: "x"})
	require.NoError(t, err)
	wantErr(t, dr, dr.Body, http.StatusConflict, "NODE_REVOKED")
	d = a.detail(id)
	require.True(t, hasAudit(d, "node.revoke", "host compromised"))
	require.True(t, hasAudit(d, "node.rotate_credential", "credential leaked"))
	require.Equal(t, 1, a.count(`SELECT COUNT(*) FROM judge_audit WHERE node_id = ? AND action = 'node.revoke'`, id))
}

func TestAdminJobsAndEvents(t *testing.T) {
	t.Parallel()
	a := startAdmin(t, controltest.Options{})
	manID := a.env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 100})
	n := a.env.NewNode("cpp", 4, 4)
	nc := joinAndOpen(t, a.env, n.JoinCode, "boot-j-admin")
	a.env.ForceEnable(n.ID)
	first := a.env.Enqueue("ALGO", "j-1", "cpp17", "int main(){}", manID)
	done := a.env.Enqueue("ALGO", "j-2", "cpp17", "int main(){return 0;}", manID)

	rj, err := a.c.RejudgeJudgeJobWithResponse(a.ctx, idStr(first), adminapi.ReasonRequest{Reason: "tests fixed"})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, rj.StatusCode(), string(rj.Body))
	require.Equal(t, int64(2), rj.JSON202.Generation)
	rj2, err := a.c.RejudgeJudgeJobWithResponse(a.ctx, idStr(first), adminapi.ReasonRequest{Reason: "twice"})
	require.NoError(t, err)
	wantErr(t, rj2, rj2.Body, http.StatusConflict, "JOB_NOT_CURRENT")

	// Judge j-2 to the end; then it can be neither cancelled nor ... (terminal).
	var claimed []machineapi.ClaimedJob
	require.Eventually(t, func() bool { claimed = append(claimed, claimNow(t, nc)...); return len(claimed) >= 2 }, 5*time.Second, 20*time.Millisecond)
	for _, j := range claimed {
		if j.JobId != idStr(done) {
			continue
		}
		res, err := nc.c.SubmitResultWithResponse(a.ctx, j.JobId, checkVerdict(j))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode(), string(res.Body))
	}
	cn, err := a.c.CancelJudgeJobWithResponse(a.ctx, idStr(done), adminapi.ReasonRequest{Reason: "late"})
	require.NoError(t, err)
	wantErr(t, cn, cn.Body, http.StatusConflict, "JOB_TERMINAL")
	cn, err = a.c.CancelJudgeJobWithResponse(a.ctx, rj.JSON202.JobId, adminapi.ReasonRequest{Reason: "not needed"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, cn.StatusCode(), string(cn.Body))
	require.Equal(t, adminapi.JobStateCancelled, cn.JSON200.State)
	cn, err = a.c.CancelJudgeJobWithResponse(a.ctx, rj.JSON202.JobId, adminapi.ReasonRequest{Reason: "again"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, cn.StatusCode(), "cancelling a cancelled job answers 200")
	cn, err = a.c.CancelJudgeJobWithResponse(a.ctx, "999999", adminapi.ReasonRequest{Reason: "x"})
	require.NoError(t, err)
	wantErr(t, cn, cn.Body, http.StatusNotFound, "JOB_NOT_FOUND")

	gj, err := a.c.GetJudgeJobWithResponse(a.ctx, idStr(done))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, gj.StatusCode(), string(gj.Body))
	require.Equal(t, adminapi.JobStateCompleted, gj.JSON200.Job.State)
	require.True(t, *gj.JSON200.Job.Current)
	require.Len(t, gj.JSON200.Attempts, 1)
	require.Equal(t, "COMPLETED", gj.JSON200.Attempts[0].Outcome)
	require.Equal(t, *gj.JSON200.ResultDigest, *gj.JSON200.Attempts[0].ReceiptDigest)
	require.Equal(t, adminapi.VerdictStatusAC, gj.JSON200.Verdict.Status)
	gj, err = a.c.GetJudgeJobWithResponse(a.ctx, idStr(first))
	require.NoError(t, err)
	require.False(t, *gj.JSON200.Job.Current)
	require.Equal(t, adminapi.JobStateCancelled, gj.JSON200.Job.State)

	st := adminapi.JobStateCancelled
	lim := int32(1)
	lj, err := a.c.ListJudgeJobsWithResponse(a.ctx, &adminapi.ListJudgeJobsParams{State: &st, Limit: &lim})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, lj.StatusCode(), string(lj.Body))
	require.Len(t, lj.JSON200.Jobs, 1)
	require.NotNil(t, lj.JSON200.NextBeforeId)
	lj, err = a.c.ListJudgeJobsWithResponse(a.ctx, &adminapi.ListJudgeJobsParams{State: &st, Limit: &lim, BeforeId: lj.JSON200.NextBeforeId})
	require.NoError(t, err)
	require.Len(t, lj.JSON200.Jobs, 1)
	require.Equal(t, idStr(first), lj.JSON200.Jobs[0].JobId)

	// Dead letters: list and redeliver.
	_, err = a.env.DB.ExecContext(a.ctx, `UPDATE judge_settlement_event SET state = 'DEAD', attempts = 8, last_error = 'HTTP 503' WHERE job_id = ?`, done)
	require.NoError(t, err)
	dead := adminapi.DeliveryStateDead
	ev, err := a.c.ListSettlementEventsWithResponse(a.ctx, &adminapi.ListSettlementEventsParams{State: &dead})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, ev.StatusCode(), string(ev.Body))
	require.Len(t, ev.JSON200.Events, 1)
	require.Equal(t, "HTTP 503", *ev.JSON200.Events[0].LastError)
	eid := ev.JSON200.Events[0].EventId
	rd, err := a.c.RedeliverSettlementEventWithResponse(a.ctx, eid, adminapi.ReasonRequest{Reason: "webhook fixed"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, rd.StatusCode(), string(rd.Body))
	require.Equal(t, adminapi.DeliveryStatePending, rd.JSON200.State)
	require.Zero(t, rd.JSON200.DeliveryAttempts)
	rd, err = a.c.RedeliverSettlementEventWithResponse(a.ctx, eid, adminapi.ReasonRequest{Reason: "again"})
	require.NoError(t, err)
	wantErr(t, rd, rd.Body, http.StatusConflict, "EVENT_NOT_DEAD")
	rd, err = a.c.RedeliverSettlementEventWithResponse(a.ctx, "999999", adminapi.ReasonRequest{Reason: "x"})
	require.NoError(t, err)
	wantErr(t, rd, rd.Body, http.StatusNotFound, "EVENT_NOT_FOUND")
	require.Equal(t, 1, a.count(`SELECT COUNT(*) FROM judge_audit WHERE action = 'event.redeliver' AND reason = 'webhook fixed' AND actor LIKE 'ADMIN:%'`))
	require.Equal(t, 1, a.count(`SELECT COUNT(*) FROM judge_audit WHERE action = 'job.rejudge' AND reason = 'tests fixed' AND actor LIKE 'ADMIN:%'`))
	require.Equal(t, 1, a.count(`SELECT COUNT(*) FROM judge_audit WHERE action = 'job.cancel' AND reason = 'not needed' AND actor LIKE 'ADMIN:%'`))

	// CHECK jobs are not rejudged.
	v, err := a.c.VerifyJudgerWithResponse(a.ctx, idStr(n.ID), adminapi.ReasonRequest{Reason: "verify"})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, v.StatusCode(), string(v.Body))
	rj, err = a.c.RejudgeJudgeJobWithResponse(a.ctx, v.JSON202.JobId, adminapi.ReasonRequest{Reason: "x"})
	require.NoError(t, err)
	wantErr(t, rj, rj.Body, http.StatusConflict, "STATE_CONFLICT")
}

func TestAdminReconcile(t *testing.T) {
	t.Parallel()
	a := startAdmin(t, controltest.Options{})
	manID := a.env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 100})
	n := a.env.NewNode("cpp", 2, 2)
	nc := joinAndOpen(t, a.env, n.JoinCode, "boot-r-admin")
	a.env.ForceEnable(n.ID)
	a.env.Enqueue("ALGO", "r-1", "cpp17", "int main(){}", manID)
	jobs := claimNow(t, nc)
	require.Len(t, jobs, 1)
	res, err := nc.c.SubmitResultWithResponse(a.ctx, jobs[0].JobId, checkVerdict(jobs[0]))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode(), string(res.Body))

	r, err := a.c.ReconcileWithResponse(a.ctx)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
	require.True(t, r.JSON200.Ok, "%+v", r.JSON200.Violations)
	require.Empty(t, r.JSON200.Violations)
	require.NotEmpty(t, r.JSON200.RulesChecked)

	_, err = a.env.DB.ExecContext(a.ctx, `DELETE FROM judge_settlement_event WHERE job_id = ?`, jobs[0].JobId)
	require.NoError(t, err)
	r, err = a.c.ReconcileWithResponse(a.ctx)
	require.NoError(t, err)
	require.False(t, r.JSON200.Ok)
	require.Len(t, r.JSON200.Violations, 1)
	require.Equal(t, "SETTLEMENT_EVENT_MISSING", r.JSON200.Violations[0].Rule)
	require.Equal(t, adminapi.SubjectTypeJob, r.JSON200.Violations[0].SubjectType)
	require.Equal(t, jobs[0].JobId, r.JSON200.Violations[0].SubjectId)
}

// TestAdminAuthMatrix (T17): only admin tokens reach admin routes.
func TestAdminAuthMatrix(t *testing.T) {
	t.Parallel()
	a := startAdmin(t, controltest.Options{})
	n := a.env.NewNode("cpp", 1, 1)
	anon := client(t, a.env.URL, "")
	j, err := anon.JoinNodeWithResponse(a.ctx, machineapi.JoinRequest{JoinCode: n.JoinCode})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, j.StatusCode(), string(j.Body))
	nc := openSession(t, a.env.URL, j.JSON201.Credential, "boot-auth-admin")
	node := idStr(n.ID)
	routes := []struct{ method, path, body string }{
		{"GET", "/api/v1/admin/judge-host-groups", ""},
		{"POST", "/api/v1/admin/judge-host-groups", `{"name":"auth-g","slotCapacity":1}`},
		{"PATCH", "/api/v1/admin/judge-host-groups/" + idStr(n.GroupID), `{"slotCapacity":3,"revision":1}`},
		{"GET", "/api/v1/admin/judgers", ""},
		{"POST", "/api/v1/admin/judgers", `{"name":"auth-n","pool":"cpp","hostGroupId":"` + idStr(n.GroupID) + `","slots":1}`},
		{"GET", "/api/v1/admin/judgers/" + node, ""},
		{"PATCH", "/api/v1/admin/judgers/" + node, `{"slots":1,"revision":1,"reason":"r"}`},
		{"POST", "/api/v1/admin/judgers/" + node + "/join-code", ""},
		{"POST", "/api/v1/admin/judgers/" + node + "/verify", `{"reason":"r"}`},
		{"POST", "/api/v1/admin/judgers/" + node + "/enable", `{"reason":"r"}`},
		{"POST", "/api/v1/admin/judgers/" + node + "/drain", `{"reason":"r"}`},
		{"POST", "/api/v1/admin/judgers/" + node + "/disable", `{"reason":"r","force":true}`},
		{"POST", "/api/v1/admin/judgers/" + node + "/revoke", `{"reason":"r"}`},
		{"POST", "/api/v1/admin/judgers/" + node + "/rotate-credential", `{"reason":"r"}`},
		{"POST", "/api/v1/admin/judgers/" + node + "/probe", ""},
		{"GET", "/api/v1/admin/judge-jobs", ""},
		{"GET", "/api/v1/admin/judge-jobs/1", ""},
		{"POST", "/api/v1/admin/judge-jobs/1/rejudge", `{"reason":"r"}`},
		{"POST", "/api/v1/admin/judge-jobs/1/cancel", `{"reason":"r"}`},
		{"GET", "/api/v1/admin/settlement-events?state=DEAD", ""},
		{"POST", "/api/v1/admin/settlement-events/1/redeliver", `{"reason":"r"}`},
		{"GET", "/api/v1/admin/reconcile", ""},
		{"GET", "/api/v1/admin/audit", ""},
		{"GET", "/api/v1/admin/verdict-mix", ""},
		{"GET", "/api/v1/admin/judge-jobs?submissionType=ALGO&submissionId=1&verdict=AC", ""},
	}
	creds := map[string]string{
		"no token":        "",
		"business token":  a.env.Business,
		"node credential": j.JSON201.Credential,
		"node session":    nc.session.SessionToken,
		"forged admin":    "kat_not-a-real-admin-token",
	}
	auditBefore := a.count(`SELECT COUNT(*) FROM judge_audit`)
	for name, tok := range creds {
		for _, r := range routes {
			resp := do(t, r.method, a.env.URL+r.path, tok, r.body)
			require.Equal(t, http.StatusUnauthorized, resp.status, "%s on %s %s: %s", name, r.method, r.path, resp.body)
			code, _ := apiError(t, resp.body)
			require.Equal(t, "UNAUTHENTICATED", code)
		}
	}
	require.Equal(t, auditBefore, a.count(`SELECT COUNT(*) FROM judge_audit`), "refused requests change nothing")
	require.Zero(t, a.count(`SELECT COUNT(*) FROM judge_host_group WHERE name = 'auth-g'`))
	// The node is still usable: nothing was revoked by the refused calls.
	heartbeat(t, nc, "g++ 12")

	// An admin token is refused on business and machine routes.
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/api/v1/submissions/ALGO/1", ""},
		{"POST", "/api/v1/settlement-events/claim", `{"consumer":"c","max":1,"leaseMs":1000}`},
		{"POST", "/api/v1/manifests", `{}`},
		{"POST", "/api/v1/internal/judgers/heartbeat", `{"runtimeVersion":"x","dependencies":[],"localSlots":1}`},
		{"POST", "/api/v1/internal/judgers/session", `{"bootId":"boot-x-admin","protocolVersion":1}`},
	} {
		resp := do(t, r.method, a.env.URL+r.path, a.env.Admin, r.body)
		require.Equal(t, http.StatusUnauthorized, resp.status, "%s %s: %s", r.method, r.path, resp.body)
	}
	// ... and it does open every admin route above.
	for _, r := range routes {
		resp := do(t, r.method, a.env.URL+r.path, a.env.Admin, r.body)
		require.NotEqual(t, http.StatusUnauthorized, resp.status, "%s %s: %s", r.method, r.path, resp.body)
	}
}

// mapResolver answers from a fixed table; no real DNS.
type mapResolver map[string][]netip.Addr

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

// TestAdminProbe (T18): SSRF rules over the admin API against loopback
// servers that answer, redirect, answer huge bodies and a name that resolves
// outside the allowlist.
func TestAdminProbe(t *testing.T) {
	t.Parallel()
	hits := make(chan string, 16)
	mux := http.NewServeMux()
	mux.HandleFunc("/ok/healthz", func(w http.ResponseWriter, r *http.Request) {
		hits <- r.Header.Get("Authorization") + r.Header.Get("Cookie")
		_, _ = w.Write([]byte(`{"nodeId":"1","pool":"cpp","runtime":"g++ 12"}`))
	})
	mux.HandleFunc("/redirect/healthz", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	mux.HandleFunc("/huge/healthz", func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("a", 16<<10))
		for i := 0; i < 4096; i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	a := startAdmin(t, controltest.Options{HTTP: httpapi.Config{Probe: probe.Config{
		AllowedHosts: []string{"node.lab.test", "evil.lab.test"},
		AllowedCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		AllowedPorts: []int{int(port)},
		AllowHTTP:    true,
		MaxBodyBytes: 32 << 10,
		Timeout:      2 * time.Second,
		Resolver: mapResolver{"node.lab.test": {netip.MustParseAddr("127.0.0.1")},
			"evil.lab.test": {netip.MustParseAddr("10.11.12.13")}},
	}}})
	g := a.group("rack-p", 8)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	probeOf := func(name, address string) *adminapi.ProbeJudgerResponse {
		t.Helper()
		n := a.judger(name, adminapi.PoolCpp, g.HostGroupId, 1, address)
		r, err := a.c.ProbeJudgerWithResponse(a.ctx, n.Node.NodeId)
		require.NoError(t, err)
		return r
	}

	ok := probeOf("p-ok", fmt.Sprintf("http://node.lab.test:%d/ok", port))
	require.Equal(t, http.StatusOK, ok.StatusCode(), string(ok.Body))
	require.True(t, ok.JSON200.Reachable)
	require.Nil(t, ok.JSON200.Error)
	require.Equal(t, "127.0.0.1", *ok.JSON200.DialedIp)
	require.Equal(t, "cpp", (*ok.JSON200.Health)["pool"])
	require.Equal(t, "", <-hits, "no Authorization or Cookie is sent")

	rd := probeOf("p-redirect", base+"/redirect")
	require.Equal(t, http.StatusOK, rd.StatusCode(), string(rd.Body))
	require.Equal(t, adminapi.ProbeErrorCodeRedirectRefused, rd.JSON200.Error.Code)
	require.Nil(t, rd.JSON200.Health)

	huge := probeOf("p-huge", base+"/huge")
	require.Equal(t, http.StatusOK, huge.StatusCode(), string(huge.Body))
	require.Equal(t, adminapi.ProbeErrorCodeTooLarge, huge.JSON200.Error.Code)

	// The name is approved but resolves outside the allowlist: refused, nothing dialled.
	evil := probeOf("p-evil", fmt.Sprintf("http://evil.lab.test:%d/ok", port))
	wantErr(t, evil, evil.Body, http.StatusUnprocessableEntity, "ADDRESS_NOT_ALLOWED")
	require.Empty(t, hits)

	// Static rules refuse an address at registration.
	for _, addr := range []string{"http://10.0.0.1:80/", fmt.Sprintf("http://127.0.0.1:%d", port+1), "http://metadata.internal/", "file:///etc/passwd"} {
		r, err := a.c.CreateJudgerWithResponse(a.ctx, adminapi.JudgerCreate{Name: "p-bad", Pool: adminapi.PoolCpp, HostGroupId: g.HostGroupId, Slots: 1, Address: &addr})
		require.NoError(t, err)
		wantErr(t, r, r.Body, http.StatusUnprocessableEntity, "ADDRESS_NOT_ALLOWED")
	}
	none := probeOf("p-none", "")
	wantErr(t, none, none.Body, http.StatusConflict, "NO_ADDRESS")

	// Probes are audited, refused ones included.
	require.Equal(t, 4, a.count(`SELECT COUNT(*) FROM judge_audit WHERE action = 'node.probe' AND actor LIKE 'ADMIN:%'`))
	require.Equal(t, 1, a.count(`SELECT COUNT(*) FROM judge_audit WHERE action = 'node.probe' AND detail LIKE '%refused%'`))
}
