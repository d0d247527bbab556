package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/manifest"
)

// createBizToken issues a business token through the admin API.
func (a *adminEnv) createBizToken(name, group string, types ...string) string {
	a.t.Helper()
	body := adminapi.BusinessTokenCreate{Name: name}
	if group != "" {
		body.ConsumerGroup = &group
	}
	if types != nil {
		body.SubmissionTypes = &types
	}
	r, err := a.c.CreateBusinessTokenWithResponse(a.ctx, body)
	require.NoError(a.t, err)
	require.Equal(a.t, http.StatusCreated, r.StatusCode(), string(r.Body))
	require.True(a.t, strings.HasPrefix(r.JSON201.Token, "kbt_"))
	require.Equal(a.t, name, r.JSON201.BusinessToken.Name)
	return r.JSON201.Token
}

// A token scoped to ALGO gets 403 on enqueueing DATABASE and 404 on reading,
// rejudging or cancelling a DATABASE submission, which stays untouched;
// the same calls on ALGO work, and an unscoped token keeps doing everything.
func TestTokenScopeOverHTTP(t *testing.T) {
	t.Parallel()
	a := startAdmin(t, controltest.Options{})
	ctx := a.ctx
	algoTok := a.createBizToken("algo-backend", "algo", "ALGO")
	all := bizClient(t, a.env.URL, a.env.Business) // created before scopes: every type
	algo := bizClient(t, a.env.URL, algoTok)

	// Test data shared by every token (as all published before it had owners).
	manID := idString(a.env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 256, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 100}))
	enqueue := func(c *businessapi.ClientWithResponses, typ, id string) *businessapi.EnqueueSubmissionResponse {
		r, err := c.EnqueueSubmissionWithResponse(ctx, nil, businessapi.SubmissionCreate{SubmissionType: typ, SubmissionId: id,
			Language: "cpp17", Source: "int main(){}", ManifestId: manID})
		require.NoError(t, err)
		conforms(t, r.HTTPResponse, r.Body)
		return r
	}
	require.Equal(t, http.StatusAccepted, enqueue(all, "DATABASE", "d1").StatusCode())
	require.Equal(t, http.StatusAccepted, enqueue(all, "ALGO", "a1").StatusCode())

	r := enqueue(algo, "DATABASE", "d2")
	require.Equal(t, http.StatusForbidden, r.StatusCode(), string(r.Body))
	code, field := apiError(t, r.Body)
	require.Equal(t, "SUBMISSION_TYPE_FORBIDDEN", code)
	require.Equal(t, "submissionType", field)
	require.Zero(t, a.count(`SELECT COUNT(*) FROM judge_submission WHERE submission_id = 'd2'`))
	require.Equal(t, http.StatusAccepted, enqueue(algo, "ALGO", "a2").StatusCode())

	// A bulk enqueue with one out-of-scope item is refused whole, naming it.
	br, err := algo.EnqueueSubmissionsWithResponse(ctx, nil, businessapi.SubmissionsCreate{Submissions: []businessapi.SubmissionCreate{
		{SubmissionType: "ALGO", SubmissionId: "a3", Language: "cpp17", Source: "int main(){}", ManifestId: manID},
		{SubmissionType: "DATABASE", SubmissionId: "d3", Language: "cpp17", Source: "int main(){}", ManifestId: manID}}})
	require.NoError(t, err)
	conforms(t, br.HTTPResponse, br.Body)
	require.Equal(t, http.StatusForbidden, br.StatusCode(), string(br.Body))
	code, _ = apiError(t, br.Body)
	require.Equal(t, "SUBMISSION_TYPE_FORBIDDEN", code)
	require.Contains(t, string(br.Body), `"index":1`)
	require.Zero(t, a.count(`SELECT COUNT(*) FROM judge_submission WHERE submission_id IN ('a3', 'd3')`), "a refused bulk writes nothing")

	// Out of scope reads as absent: the same answer as a submission that does not exist.
	for _, id := range []string{"d1", "no-such"} {
		g, err := algo.GetSubmissionWithResponse(ctx, "DATABASE", id, nil)
		require.NoError(t, err)
		conforms(t, g.HTTPResponse, g.Body)
		require.Equal(t, http.StatusNotFound, g.StatusCode(), string(g.Body))
		code, _ := apiError(t, g.Body)
		require.Equal(t, "SUBMISSION_NOT_FOUND", code)
		rj, err := algo.RejudgeSubmissionWithResponse(ctx, "DATABASE", id, businessapi.ReasonRequest{Reason: "x"})
		require.NoError(t, err)
		require.Equal(t, http.StatusNotFound, rj.StatusCode(), string(rj.Body))
		cn, err := algo.CancelSubmissionWithResponse(ctx, "DATABASE", id, businessapi.ReasonRequest{Reason: "x"})
		require.NoError(t, err)
		require.Equal(t, http.StatusNotFound, cn.StatusCode(), string(cn.Body))
		code, _ = apiError(t, cn.Body)
		require.Equal(t, "SUBMISSION_NOT_FOUND", code)
	}
	g, err := all.GetSubmissionWithResponse(ctx, "DATABASE", "d1", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, g.StatusCode())
	require.Equal(t, businessapi.SubmissionStatusCodePending, g.JSON200.Status, "the refused cancel changed nothing")
	require.EqualValues(t, 1, g.JSON200.Generation, "the refused rejudge changed nothing")

	// In scope: a submission of the token's type, whoever enqueued it.
	g, err = algo.GetSubmissionWithResponse(ctx, "ALGO", "a1", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, g.StatusCode(), string(g.Body))
	cn, err := algo.CancelSubmissionWithResponse(ctx, "ALGO", "a1", businessapi.ReasonRequest{Reason: "mine"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, cn.StatusCode(), string(cn.Body))
	rj, err := algo.RejudgeSubmissionWithResponse(ctx, "ALGO", "a2", businessapi.ReasonRequest{Reason: "again"})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, rj.StatusCode(), string(rj.Body))
	require.EqualValues(t, 2, rj.JSON202.Generation)
}

// Two backends in two consumer groups each get every settlement of their
// types once; acknowledging in one group leaves the other's copy alone, and
// the default group still gets everything.
func TestConsumerGroupsOverHTTP(t *testing.T) {
	t.Parallel()
	a := startAdmin(t, controltest.Options{})
	ctx := a.ctx
	all := bizClient(t, a.env.URL, a.env.Business)
	algo := bizClient(t, a.env.URL, a.createBizToken("algo-backend", "algo", "ALGO"))
	db := bizClient(t, a.env.URL, a.createBizToken("db-backend", "db", "DATABASE"))

	manID := publish(t, all, codeManifest(t, all, "1 2\n", "3\n"))
	want := map[string][]string{}
	for _, s := range []struct{ typ, id string }{{"ALGO", "a1"}, {"ALGO", "a2"}, {"DATABASE", "d1"}} {
		r, err := all.EnqueueSubmissionWithResponse(ctx, nil, businessapi.SubmissionCreate{SubmissionType: s.typ, SubmissionId: s.id,
			Language: "cpp17", Source: "int main(){}", ManifestId: manID})
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, r.StatusCode(), string(r.Body))
		// Cancelling settles the submission: one event per group that takes the type.
		cn, err := all.CancelSubmissionWithResponse(ctx, s.typ, s.id, businessapi.ReasonRequest{Reason: "settle"})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, cn.StatusCode(), string(cn.Body))
		want[s.typ] = append(want[s.typ], s.id)
	}

	drain := func(c *businessapi.ClientWithResponses, consumer string) (ids []string, subs map[string][]string) {
		subs = map[string][]string{}
		for {
			r, err := c.ClaimSettlementEventsWithResponse(ctx, businessapi.EventClaimRequest{Consumer: consumer, Max: 2, LeaseMs: 60000})
			require.NoError(t, err)
			conforms(t, r.HTTPResponse, r.Body)
			require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
			if len(r.JSON200.Events) == 0 {
				return ids, subs
			}
			var batch []string
			for _, e := range r.JSON200.Events {
				batch = append(batch, e.EventId)
				subs[e.SubmissionType] = append(subs[e.SubmissionType], e.SubmissionId)
			}
			ack, err := c.AckSettlementEventsWithResponse(ctx, businessapi.EventAckRequest{Consumer: consumer, EventIds: batch})
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, ack.StatusCode(), string(ack.Body))
			require.ElementsMatch(t, batch, ack.JSON200.Acked)
			ids = append(ids, batch...)
		}
	}
	algoIDs, got := drain(algo, "same-name")
	require.ElementsMatch(t, want["ALGO"], got["ALGO"])
	require.Empty(t, got["DATABASE"])
	dbIDs, got := drain(db, "same-name")
	require.ElementsMatch(t, want["DATABASE"], got["DATABASE"], "the ALGO group's acks took nothing from the DATABASE group")
	require.Empty(t, got["ALGO"])
	_, got = drain(all, "legacy")
	require.ElementsMatch(t, want["ALGO"], got["ALGO"], "the default group is unchanged")
	require.ElementsMatch(t, want["DATABASE"], got["DATABASE"])

	// An event id of another group is not held, even under the same consumer name.
	ack, err := algo.AckSettlementEventsWithResponse(ctx, businessapi.EventAckRequest{Consumer: "same-name", EventIds: dbIDs})
	require.NoError(t, err)
	require.Empty(t, ack.JSON200.Acked)
	require.ElementsMatch(t, dbIDs, ack.JSON200.NotHeld)

	// Admins see each group's rows.
	group := adminapi.ConsumerGroup("algo")
	l, err := a.c.ListSettlementEventsWithResponse(ctx, &adminapi.ListSettlementEventsParams{ConsumerGroup: &group})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, l.StatusCode(), string(l.Body))
	require.Len(t, l.JSON200.Events, len(algoIDs))
	for _, e := range l.JSON200.Events {
		require.Equal(t, "algo", e.ConsumerGroup)
		require.Equal(t, adminapi.DeliveryStateDelivered, e.State)
	}
}

// Business tokens over the admin API: scope and group in the answer, the
// secret once, names unique, reserved types refused, revoke audited and
// effective at once.
func TestBusinessTokensAdminAPI(t *testing.T) {
	t.Parallel()
	a := startAdmin(t, controltest.Options{})
	ctx := a.ctx
	types := []string{"DATABASE", "ALGO"}
	group := "grader"
	r, err := a.c.CreateBusinessTokenWithResponse(ctx, adminapi.BusinessTokenCreate{Name: "grader", SubmissionTypes: &types, ConsumerGroup: &group})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.StatusCode(), string(r.Body))
	require.Equal(t, []string{"ALGO", "DATABASE"}, *r.JSON201.BusinessToken.SubmissionTypes)
	require.Equal(t, "grader", r.JSON201.BusinessToken.ConsumerGroup)
	require.Equal(t, adminapi.BusinessTokenStateActive, r.JSON201.BusinessToken.State)
	secret := r.JSON201.Token

	dup, err := a.c.CreateBusinessTokenWithResponse(ctx, adminapi.BusinessTokenCreate{Name: "grader"})
	require.NoError(t, err)
	wantErr(t, dup, dup.Body, http.StatusConflict, "NAME_TAKEN")
	reserved := []string{"KECE_CHECK"}
	bad, err := a.c.CreateBusinessTokenWithResponse(ctx, adminapi.BusinessTokenCreate{Name: "sneaky", SubmissionTypes: &reserved})
	require.NoError(t, err)
	wantErr(t, bad, bad.Body, http.StatusUnprocessableEntity, "REQUEST_INVALID")
	status, body := rawJSON(t, a.env.URL+"/api/v1/admin/business-tokens", a.env.Admin, `{"name":"lower","submissionTypes":["algo"]}`)
	require.Equal(t, http.StatusBadRequest, status, body)

	l, err := a.c.ListBusinessTokensWithResponse(ctx)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, l.StatusCode())
	byName := map[string]adminapi.BusinessToken{}
	for _, tk := range l.JSON200.Tokens {
		byName[tk.Name] = tk
	}
	require.Nil(t, byName[tokenName(t, a.env, a.env.Business)].SubmissionTypes, "an unscoped token: every type")
	require.Equal(t, "default", byName[tokenName(t, a.env, a.env.Business)].ConsumerGroup)
	require.NotContains(t, string(l.Body), "kbt_", "never a secret")

	rv, err := a.c.RevokeBusinessTokenWithResponse(ctx, "grader", adminapi.ReasonRequest{Reason: "backend retired"})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, rv.StatusCode(), string(rv.Body))
	require.Equal(t, adminapi.BusinessTokenStateRevoked, rv.JSON200.State)
	again, err := a.c.RevokeBusinessTokenWithResponse(ctx, "grader", adminapi.ReasonRequest{Reason: "again"})
	require.NoError(t, err)
	wantErr(t, again, again.Body, http.StatusNotFound, "TOKEN_NOT_FOUND")
	st, code := callWith(t, http.MethodGet, a.env.URL+"/api/v1/submissions/ALGO/x", secret)
	require.Equal(t, http.StatusUnauthorized, st)
	require.Equal(t, "TOKEN_EXPIRED", code, "a revoked token's secret is one it no longer accepts")
	require.Equal(t, 1, a.count(`SELECT COUNT(*) FROM judge_audit WHERE action = 'token.create' AND detail LIKE '%grader%'`))
	require.Equal(t, 1, a.count(`SELECT COUNT(*) FROM judge_audit WHERE action = 'token.revoke' AND reason = 'backend retired'`))
}

// rawJSON POSTs a body as is (past the generated client's types).
func rawJSON(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, string(out)
}

// idString renders a BIGINT id as the API spells it.
func idString(id int64) string { return strconv.FormatInt(id, 10) }

// The abuse probes on test data: a token scoped to DATABASE against a
// manifest and artifacts ALGO published. Each refusal is the answer for
// something that does not exist; tokens that may use the data keep working,
// and shared (pre-ownership) data stays usable by every token.
func TestTestDataTenancyOverHTTP(t *testing.T) {
	t.Parallel()
	a := startAdmin(t, controltest.Options{})
	ctx := a.ctx
	all := bizClient(t, a.env.URL, a.env.Business)
	algo := bizClient(t, a.env.URL, a.createBizToken("algo-backend", "algo", "ALGO"))
	db := bizClient(t, a.env.URL, a.createBizToken("db-backend", "db", "DATABASE"))

	secretIn, secretOut := []byte("7 5\n"), []byte("12\n")
	algoMan := publish(t, algo, codeManifest(t, algo, string(secretIn), string(secretOut)))
	missing := "987654321"

	// Probe 1: read ALGO's manifest by its id (was 200 with the whole body).
	for _, id := range []string{algoMan, missing} {
		g, err := db.GetManifestWithResponse(ctx, id)
		require.NoError(t, err)
		conforms(t, g.HTTPResponse, g.Body)
		require.Equal(t, http.StatusNotFound, g.StatusCode(), string(g.Body))
		require.Equal(t, fmt.Sprintf(`{"code":"MANIFEST_NOT_FOUND","message":"manifest %s: not found"}`, id), strings.TrimSpace(string(g.Body)))
	}
	for _, c := range []*businessapi.ClientWithResponses{algo, all} {
		g, err := c.GetManifestWithResponse(ctx, algoMan)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, g.StatusCode(), "the publisher and a token of every type read it")
	}

	// Probe 2: enqueue against it, single and bulk (was 202).
	for _, id := range []string{algoMan, missing} {
		r, err := db.EnqueueSubmissionWithResponse(ctx, nil, businessapi.SubmissionCreate{SubmissionType: "DATABASE", SubmissionId: "d-" + id,
			Language: "cpp17", Source: "int main(){}", ManifestId: id})
		require.NoError(t, err)
		conforms(t, r.HTTPResponse, r.Body)
		require.Equal(t, http.StatusUnprocessableEntity, r.StatusCode(), string(r.Body))
		code, field := apiError(t, r.Body)
		require.Equal(t, "MANIFEST_NOT_FOUND", code)
		require.Equal(t, "manifestId", field)
		require.Contains(t, string(r.Body), "manifest "+id+" does not exist")
		br, err := db.EnqueueSubmissionsWithResponse(ctx, nil, businessapi.SubmissionsCreate{Submissions: []businessapi.SubmissionCreate{
			{SubmissionType: "DATABASE", SubmissionId: "bulk-" + id, Language: "cpp17", Source: "int main(){}", ManifestId: id}}})
		require.NoError(t, err)
		require.Equal(t, http.StatusUnprocessableEntity, br.StatusCode(), string(br.Body))
		require.Contains(t, string(br.Body), `"code":"MANIFEST_NOT_FOUND"`)
	}
	require.Zero(t, a.count(`SELECT COUNT(*) FROM judge_job WHERE submission_type = 'DATABASE'`), "nothing was written")
	r, err := algo.EnqueueSubmissionWithResponse(ctx, nil, businessapi.SubmissionCreate{SubmissionType: "ALGO", SubmissionId: "a1",
		Language: "cpp17", Source: "int main(){}", ManifestId: algoMan})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, r.StatusCode(), string(r.Body))

	// Probe 3: upload content ALGO stored, guessing an expected output (was
	// 200 "already stored": the content exists). Now 201, as for new
	// content; only the same tenant's second upload answers 200.
	up := func(c *businessapi.ClientWithResponses, body []byte) int {
		r, err := c.UploadArtifactWithBodyWithResponse(ctx, digestOf(body), "application/octet-stream", bytes.NewReader(body))
		require.NoError(t, err)
		conforms(t, r.HTTPResponse, r.Body)
		return r.StatusCode()
	}
	require.Equal(t, http.StatusCreated, up(db, []byte("a guess nobody stored\n")))
	require.Equal(t, http.StatusOK, up(algo, secretOut), "the owner again: already stored")

	// Probe 4: publish a manifest over ALGO's digests without uploading
	// them (was 201: publishing told that both digests exist).
	m := businessapi.Manifest{Kind: businessapi.ManifestKindCode, Limits: businessapi.Limits{TimeMs: 1000, MemoryMb: 256, OutputKb: 64},
		Checker: businessapi.Checker{Type: businessapi.CheckerTypeTolerant},
		Cases: []businessapi.ManifestCase{{CaseId: "c1", InputSha256: digestOf(secretIn), InputSize: int64(len(secretIn)),
			OutputSha256: digestOf(secretOut), OutputSize: int64(len(secretOut)), Weight: 100}}}
	pr, err := db.PublishManifestWithResponse(ctx, m)
	require.NoError(t, err)
	conforms(t, pr.HTTPResponse, pr.Body)
	require.Equal(t, http.StatusUnprocessableEntity, pr.StatusCode(), string(pr.Body))
	code, field := apiError(t, pr.Body)
	require.Equal(t, "ARTIFACT_MISSING", code)
	require.Equal(t, "cases[0].inputSha256", field)
	require.Equal(t, http.StatusCreated, up(db, secretIn), "ALGO's content, uploaded by DATABASE: as new")
	require.Equal(t, http.StatusCreated, up(db, secretOut))
	pr, err = db.PublishManifestWithResponse(ctx, m)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, pr.StatusCode(), "its own manifest of the same content: new, never \"already published\"")
	require.NotEqual(t, algoMan, pr.JSON201.ManifestId)

	// Shared data (published before owners existed) stays usable by every token.
	shared := idString(a.env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 256, OutputKb: 64}, manifest.Checker{Type: "exact"},
		controltest.Case{In: "1\n", Out: "1\n", Weight: 1}))
	for i, c := range []*businessapi.ClientWithResponses{algo, db, all} {
		g, err := c.GetManifestWithResponse(ctx, shared)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, g.StatusCode(), string(g.Body))
		typ := []string{"ALGO", "DATABASE", "OTHER"}[i]
		r, err := c.EnqueueSubmissionWithResponse(ctx, nil, businessapi.SubmissionCreate{SubmissionType: typ, SubmissionId: "shared",
			Language: "cpp17", Source: "int main(){}", ManifestId: shared})
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, r.StatusCode(), string(r.Body))
	}
}
