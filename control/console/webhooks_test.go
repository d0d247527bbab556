package console_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/atrest"
	"github.com/kece-oj/kece/control/console"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/replica"
	"github.com/kece-oj/kece/control/webhook"
)

var secretRE = regexp.MustCompile(`(whsec_[^<]+)</textarea>`)

// shownSecret is the secret a page shows, as the browser reads it.
func shownSecret(t *testing.T, body string) string {
	t.Helper()
	m := secretRE.FindStringSubmatch(body)
	require.NotNil(t, m, "no secret shown")
	return html.UnescapeString(m[1])
}

// TestWebhooksPage: create a group's webhook (its generated secret shown
// once), list it, rotate (two secrets), refuse a bad URL with the API's
// code, delete.
func TestWebhooksPage(t *testing.T) {
	t.Parallel()
	key, err := atrest.ParseKey(atrest.NewKeyText())
	require.NoError(t, err)
	env := controltest.Start(t, controltest.Options{Replica: replica.Config{WebhookKeys: atrest.NewKeyring(key)},
		Mount: mountConsole(t, console.Config{})})
	b := &testBundle{t: t, env: env, hc: newClient(t)}
	csrf := b.login(env.Admin)

	empty := b.do("GET", "/console/webhooks", nil)
	require.Equal(t, http.StatusOK, empty.status)
	require.Contains(t, empty.body, "No webhooks")

	bad := b.do("POST", "/console/webhooks", url.Values{"csrf": {csrf}, "group": {"default"}, "url": {"ftp://oj.example/"}})
	require.Equal(t, http.StatusBadRequest, bad.status)
	require.Contains(t, bad.body, "WEBHOOK_URL_INVALID")
	unknown := b.do("POST", "/console/webhooks", url.Values{"csrf": {csrf}, "group": {"nobody"}, "url": {"https://oj.example/"}})
	require.Equal(t, http.StatusBadRequest, unknown.status)
	require.Contains(t, unknown.body, "CONSUMER_GROUP_UNKNOWN")

	made := b.do("POST", "/console/webhooks", url.Values{"csrf": {csrf}, "group": {"default"}, "url": {"https://oj.example/hook"},
		"concurrency": {"3"}, "timeout": {"5s"}})
	require.Equal(t, http.StatusOK, made.status, made.body)
	shown := shownSecret(t, made.body)
	_, err = webhook.ParseSecret(shown)
	require.NoError(t, err)
	list := b.do("GET", "/console/webhooks", nil)
	require.Contains(t, list.body, "https://oj.example/hook")
	require.Contains(t, list.body, "5000 ms")
	require.NotContains(t, html.UnescapeString(list.body), shown, "never shown again")

	rot := b.do("POST", "/console/webhooks/default/rotate", url.Values{"csrf": {csrf}, "overlap": {"2h"}})
	require.Equal(t, http.StatusOK, rot.status, rot.body)
	require.NotEqual(t, shown, shownSecret(t, rot.body))
	require.Contains(t, rot.body, "expires")
	require.Contains(t, rot.body, "current")
	badOverlap := b.do("POST", "/console/webhooks/default/rotate", url.Values{"csrf": {csrf}, "overlap": {"soon"}})
	require.Equal(t, http.StatusBadRequest, badOverlap.status)
	require.Contains(t, badOverlap.body, "e.g. 10s, 15m, 7d")

	del := b.do("POST", "/console/webhooks/default/delete", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, del.status, del.body)
	after := b.do("GET", del.header.Get("Location"), nil)
	require.Contains(t, after.body, "Webhook deleted")
	require.Contains(t, after.body, "No webhooks")
}
