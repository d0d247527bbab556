package httpapi_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
)

// Join codes: lifetime chosen at creation and on reset (bounded by the
// contract), a reset with no body takes the default, and a join naming
// another pool is 409 POOL_MISMATCH without spending the code.
func TestJoinCodeLifetimeAndPool(t *testing.T) {
	t.Parallel()
	a := startAdmin(t, controltest.Options{})
	g := a.group("jc-host", 4)
	ttl := int64(48 * 3600)
	r, err := a.c.CreateJudgerWithResponse(a.ctx, adminapi.JudgerCreate{Name: "jc-1", Pool: adminapi.PoolJava, HostGroupId: g.HostGroupId,
		Slots: 1, JoinCodeTtlSeconds: &ttl})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.StatusCode(), string(r.Body))
	require.WithinDuration(t, time.Now().Add(48*time.Hour), r.JSON201.JoinCodeExpiresAt, time.Minute)

	tooLong := int64(8 * 24 * 3600)
	bad, err := a.c.CreateJudgerWithResponse(a.ctx, adminapi.JudgerCreate{Name: "jc-2", Pool: adminapi.PoolJava, HostGroupId: g.HostGroupId,
		Slots: 1, JoinCodeTtlSeconds: &tooLong})
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, bad.StatusCode(), string(bad.Body))

	// Reset without a body (curl, scripts): default 1 h.
	req, err := http.NewRequestWithContext(a.ctx, http.MethodPost, a.env.URL+"/api/v1/admin/judgers/"+r.JSON201.Node.NodeId+"/join-code", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+a.env.Admin)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	week := int64(7 * 24 * 3600)
	jc, err := a.c.ResetJoinCodeWithResponse(a.ctx, r.JSON201.Node.NodeId, adminapi.JoinCodeRequest{TtlSeconds: &week})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, jc.StatusCode(), string(jc.Body))
	require.WithinDuration(t, time.Now().Add(7*24*time.Hour), jc.JSON200.JoinCodeExpiresAt, time.Minute)

	anon := client(t, a.env.URL, "")
	cpp := machineapi.PoolCpp
	j, err := anon.JoinNodeWithResponse(a.ctx, machineapi.JoinRequest{JoinCode: jc.JSON200.JoinCode, Pool: &cpp})
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, j.StatusCode(), string(j.Body))
	require.Contains(t, string(j.Body), `"POOL_MISMATCH"`)
	require.Equal(t, 0, a.count(`SELECT COUNT(*) FROM judge_join_code WHERE consumed_at IS NOT NULL`))
	java := machineapi.PoolJava
	j, err = anon.JoinNodeWithResponse(a.ctx, machineapi.JoinRequest{JoinCode: jc.JSON200.JoinCode, Pool: &java})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, j.StatusCode(), string(j.Body))

	// Rotation issues a code with the chosen lifetime too.
	twoDays := int64(2 * 24 * 3600)
	rot, err := a.c.RotateJudgerCredentialWithResponse(a.ctx, r.JSON201.Node.NodeId, adminapi.RotateRequest{Reason: "leak",
		JoinCodeTtlSeconds: &twoDays})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, rot.StatusCode(), string(rot.Body))
	require.WithinDuration(t, time.Now().Add(48*time.Hour), rot.JSON200.JoinCodeExpiresAt, time.Minute)

	// An unknown pool name is a contract violation.
	raw, err := http.Post(a.env.URL+"/api/v1/internal/judgers/join", "application/json",
		bytes.NewReader([]byte(`{"joinCode":"kjc_aaaaaaaaaaaa","pool":"rust"}`)))
	require.NoError(t, err)
	raw.Body.Close()
	require.Equal(t, http.StatusBadRequest, raw.StatusCode)
}

// Drain with deadlineSeconds: the node view carries drainDeadlineAt, and the
// running server's maintenance pass disables the node when it passes.
func TestDrainDeadlineThroughTheAPI(t *testing.T) {
	t.Parallel()
	a := startAdmin(t, controltest.Options{})
	n := a.env.NewNode("cpp", 2, 4)
	nc := joinAndOpen(t, a.env, n.JoinCode, "boot-drain-deadline-api")
	require.NotNil(t, nc)
	a.env.ForceEnable(n.ID)
	id := idStr(n.ID)

	zero := int64(0)
	dr, err := a.c.DrainJudgerWithResponse(a.ctx, id, adminapi.DrainRequest{Reason: "x", DeadlineSeconds: &zero})
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, dr.StatusCode(), string(dr.Body))

	hour := int64(3600)
	dr, err = a.c.DrainJudgerWithResponse(a.ctx, id, adminapi.DrainRequest{Reason: "kernel", DeadlineSeconds: &hour})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, dr.StatusCode(), string(dr.Body))
	require.NotNil(t, dr.JSON200.DrainDeadlineAt)
	require.WithinDuration(t, time.Now().Add(time.Hour), *dr.JSON200.DrainDeadlineAt, time.Minute)

	one := int64(1)
	dr, err = a.c.DrainJudgerWithResponse(a.ctx, id, adminapi.DrainRequest{Reason: "sooner", DeadlineSeconds: &one})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, dr.StatusCode(), string(dr.Body))
	require.Eventually(t, func() bool {
		g, err := a.c.GetJudgerWithResponse(a.ctx, id)
		return err == nil && g.JSON200 != nil && g.JSON200.Node.DesiredState == adminapi.DesiredStateDisabled &&
			g.JSON200.Node.DrainDeadlineAt == nil
	}, 10*time.Second, 50*time.Millisecond, "the server disables the node at the deadline")
	require.Equal(t, 1, a.count(`SELECT COUNT(*) FROM judge_audit WHERE node_id = ? AND action = 'node.drain_deadline'`, n.ID))
}
