package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/control/atrest"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/replica"
	"github.com/kece-oj/kece/control/webhook"
)

func webhookKeys(t *testing.T) *atrest.Keyring {
	t.Helper()
	k, err := atrest.ParseKey(atrest.NewKeyText())
	require.NoError(t, err)
	return atrest.NewKeyring(k)
}

func ptr[T any](v T) *T { return &v }

// TestAdminWebhookGroups: create (a generated secret shown once), update,
// rotate (both secrets listed, the old one with an expiry), delete; never a
// secret in a read.
func TestAdminWebhookGroups(t *testing.T) {
	t.Parallel()
	a := startAdmin(t, controltest.Options{Replica: replica.Config{WebhookKeys: webhookKeys(t)}})
	r, err := a.c.PutWebhookGroupWithResponse(a.ctx, "default", adminapi.WebhookGroupPut{Url: "https://oj.example/hook", Concurrency: ptr(2)})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.StatusCode(), string(r.Body))
	require.NotNil(t, r.JSON201.Secret)
	_, err = webhook.ParseSecret(*r.JSON201.Secret)
	require.NoError(t, err)
	g := r.JSON201.WebhookGroup
	require.True(t, g.Enabled)
	require.Equal(t, 2, g.Concurrency)
	require.Len(t, g.Secrets, 1)
	require.True(t, g.Secrets[0].Readable)

	r, err = a.c.PutWebhookGroupWithResponse(a.ctx, "default", adminapi.WebhookGroupPut{Url: "https://oj.example/hook2", Enabled: ptr(false)})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
	require.Nil(t, r.JSON200.Secret, "an update shows no secret")
	require.False(t, r.JSON200.WebhookGroup.Enabled)

	given := webhook.NewSecret().String()
	rr, err := a.c.RotateWebhookSecretWithResponse(a.ctx, "default", adminapi.WebhookSecretRotate{Secret: &given, OverlapMs: ptr(int64(3_600_000))})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, rr.StatusCode(), string(rr.Body))
	require.Nil(t, rr.JSON200.Secret, "a given secret is not echoed")
	require.Len(t, rr.JSON200.WebhookGroup.Secrets, 2)
	require.Nil(t, rr.JSON200.WebhookGroup.Secrets[0].ExpiresAt)
	require.NotNil(t, rr.JSON200.WebhookGroup.Secrets[1].ExpiresAt)

	l, err := a.c.ListWebhookGroupsWithResponse(a.ctx)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, l.StatusCode())
	require.Len(t, l.JSON200.Groups, 1)
	require.NotContains(t, string(l.Body), strings.TrimPrefix(given, webhook.SecretPrefix), "reads never carry a secret")
	require.Equal(t, 3, a.count(`SELECT COUNT(*) FROM judge_audit WHERE action LIKE 'webhook.%'`))

	d, err := a.c.DeleteWebhookGroupWithResponse(a.ctx, "default")
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, d.StatusCode())
	gr, err := a.c.GetWebhookGroupWithResponse(a.ctx, "default")
	require.NoError(t, err)
	wantErr(t, gr, gr.Body, http.StatusNotFound, "WEBHOOK_GROUP_NOT_FOUND")
}

// TestAdminWebhookGroupsBadInput: each mistake gets its status and code.
func TestAdminWebhookGroupsBadInput(t *testing.T) {
	t.Parallel()
	a := startAdmin(t, controltest.Options{Replica: replica.Config{WebhookKeys: webhookKeys(t)}})
	for _, c := range []struct {
		group, url string
		secret     *string
		status     int
		code       string
	}{
		{"default", "ftp://oj.example/", nil, http.StatusBadRequest, "WEBHOOK_URL_INVALID"},
		{"default", "/relative", nil, http.StatusBadRequest, "WEBHOOK_URL_INVALID"},
		{"default", "https://user:pw@oj.example/", nil, http.StatusBadRequest, "WEBHOOK_URL_INVALID"},
		{"default", "https://oj.example/", ptr("short"), http.StatusBadRequest, "WEBHOOK_SECRET_INVALID"},
		{"default", "https://oj.example/", ptr("a-raw-secret-that-is-long-enough"), http.StatusBadRequest, "WEBHOOK_SECRET_INVALID"},
		{"nobody", "https://oj.example/", nil, http.StatusBadRequest, "CONSUMER_GROUP_UNKNOWN"},
		{"Bad Group", "https://oj.example/", nil, http.StatusBadRequest, "REQUEST_INVALID"},
	} {
		r, err := a.c.PutWebhookGroupWithResponse(a.ctx, c.group, adminapi.WebhookGroupPut{Url: c.url, Secret: c.secret})
		require.NoError(t, err)
		wantErr(t, r, r.Body, c.status, c.code)
	}
	r, err := a.c.PutWebhookGroupWithResponse(a.ctx, "default", adminapi.WebhookGroupPut{Url: "https://oj.example/", Concurrency: ptr(99)})
	require.NoError(t, err)
	wantErr(t, r, r.Body, http.StatusBadRequest, "REQUEST_INVALID")
	rr, err := a.c.RotateWebhookSecretWithResponse(a.ctx, "default", adminapi.WebhookSecretRotate{})
	require.NoError(t, err)
	wantErr(t, rr, rr.Body, http.StatusNotFound, "WEBHOOK_GROUP_NOT_FOUND")
	r, err = a.c.PutWebhookGroupWithResponse(a.ctx, "default", adminapi.WebhookGroupPut{Url: "https://oj.example/"})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.StatusCode())
	r, err = a.c.PutWebhookGroupWithResponse(a.ctx, "default", adminapi.WebhookGroupPut{Url: "https://oj.example/", Secret: ptr(webhook.NewSecret().String())})
	require.NoError(t, err)
	wantErr(t, r, r.Body, http.StatusUnprocessableEntity, "REQUEST_INVALID")

	// A replica without a key lists, but cannot store a secret.
	noKey := startAdmin(t, controltest.Options{})
	r, err = noKey.c.PutWebhookGroupWithResponse(noKey.ctx, "default", adminapi.WebhookGroupPut{Url: "https://oj.example/"})
	require.NoError(t, err)
	wantErr(t, r, r.Body, http.StatusConflict, "WEBHOOK_KEY_MISSING")
}
