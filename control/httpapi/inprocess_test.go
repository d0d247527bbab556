package httpapi_test

import (
	"context"
	"database/sql"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/store"
)

// The console's seam: in-process requests marked with AsAdmin are the
// admin token's, on the admin surface only; nothing else gets in.
func TestInProcessAdmin(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	hc := &http.Client{Transport: httpapi.InProcessTransport(env.Server.Handler())}
	admin, err := adminapi.NewClientWithResponses("http://in-process", adminapi.WithHTTPClient(hc))
	require.NoError(t, err)
	business, err := businessapi.NewClientWithResponses("http://in-process", businessapi.WithHTTPClient(hc))
	require.NoError(t, err)
	adminID, err := env.Store.Tokens().AuthenticateToken(env.Ctx, store.TokenAdmin, env.Admin)
	require.NoError(t, err)
	bizID, err := env.Store.Tokens().AuthenticateToken(env.Ctx, store.TokenBusiness, env.Business)
	require.NoError(t, err)

	as := httpapi.AsAdmin(context.Background(), adminID, "198.51.100.9:4242")
	n := env.NewNode("cpp", 1, 1)
	r, err := admin.RevokeJudgerWithResponse(as, idStr(n.ID), adminapi.ReasonRequest{Reason: "in-process"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
	var actor string
	var remote sql.NullString
	require.NoError(t, env.DB.QueryRow(`SELECT actor, remote_addr FROM judge_audit WHERE action = 'node.revoke'`).Scan(&actor, &remote))
	require.Equal(t, adminID.Actor(), actor)
	// The address AsAdmin carried is the audited caller, without its port.
	require.True(t, remote.Valid, "the revoke's audit row records the caller's address")
	require.Equal(t, "198.51.100.9", remote.String)

	for name, ctx := range map[string]context.Context{
		"no mark":             context.Background(),
		"a business identity": httpapi.AsAdmin(context.Background(), bizID, "198.51.100.9:1"),
		"an empty admin mark": httpapi.AsAdmin(context.Background(), store.TokenIdentity{Kind: store.TokenAdmin}, ""),
	} {
		lr, err := admin.ListJudgersWithResponse(ctx, &adminapi.ListJudgersParams{})
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, lr.StatusCode(), name)
	}
	// The mark is not a business credential.
	sr, err := business.GetSubmissionWithResponse(as, "ALGO", "1", &businessapi.GetSubmissionParams{})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, sr.StatusCode())
	// Public reads stay public in process.
	pr, err := business.GetJudgersSummaryWithResponse(context.Background())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, pr.StatusCode())
}
