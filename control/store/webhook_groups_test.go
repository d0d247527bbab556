package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/atrest"
	"github.com/kece-oj/kece/control/store"
)

func newKey(t *testing.T) atrest.Key {
	t.Helper()
	k, err := atrest.ParseKey(atrest.NewKeyText())
	require.NoError(t, err)
	return k
}

func TestWebhookGroupSecretsEncryptedAtRest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := newKey(t)
	wg := store.NewWebhookGroups(b.DB, atrest.NewKeyring(key))
	g, created, err := wg.Put(b.Ctx, store.WebhookGroupSpec{Group: "default", URL: "https://oj.example/hook",
		Secret: "whsec_first-secret-value", Actor: "admin"})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, store.WebhookConcurrencyDefault, g.Concurrency)
	require.True(t, g.Enabled, "a new webhook is enabled unless told otherwise")
	require.Len(t, g.Secrets, 1)
	require.Equal(t, "whsec_first-secret-value", g.Secrets[0].Value)
	require.Equal(t, key.ID(), g.Secrets[0].KeyID)

	// What the database holds is neither the secret nor its base64.
	var sealed []byte
	var keyID string
	require.NoError(t, b.DB.QueryRow(`SELECT key_id, sealed FROM judge_webhook_secret`).Scan(&keyID, &sealed))
	require.Equal(t, key.ID(), keyID)
	require.NotContains(t, string(sealed), "first-secret")

	// A second Put updates settings, keeps the secret, and refuses a new
	// secret (that is a rotation).
	off := false
	g2, created, err := wg.Put(b.Ctx, store.WebhookGroupSpec{Group: "default", URL: "https://oj.example/hook2", Concurrency: 2, Enabled: &off, Actor: "admin"})
	require.NoError(t, err)
	require.False(t, created)
	require.False(t, g2.Enabled)
	require.Equal(t, store.WebhookTimeoutDefault, g2.Timeout)
	// What an update leaves out stays as it is.
	g3, _, err := wg.Put(b.Ctx, store.WebhookGroupSpec{Group: "default", URL: "https://oj.example/hook2", Actor: "admin"})
	require.NoError(t, err)
	require.False(t, g3.Enabled)
	require.Equal(t, 2, g3.Concurrency)
	require.Equal(t, "https://oj.example/hook2", g2.URL)
	require.Greater(t, g2.Revision, g.Revision)
	require.Equal(t, "whsec_first-secret-value", g2.Secrets[0].Value)
	_, _, err = wg.Put(b.Ctx, store.WebhookGroupSpec{Group: "default", URL: "https://oj.example/hook", Secret: "whsec_x"})
	require.ErrorIs(t, err, store.ErrValidation)

	// A replica with another key lists the group but cannot open it, and
	// says which group and key.
	lost := store.NewWebhookGroups(b.DB, atrest.NewKeyring(newKey(t)))
	gl, err := lost.Get(b.Ctx, "default")
	require.NoError(t, err)
	require.ErrorIs(t, gl.Secrets[0].OpenErr, atrest.ErrUnknownKey)
	require.Empty(t, gl.Secrets[0].Value)
	require.ErrorContains(t, gl.Readable(), `webhook group "default"`)
	require.ErrorContains(t, gl.Readable(), key.ID())
	// No key at all: reads work, writes say what to configure.
	none := store.NewWebhookGroups(b.DB, nil)
	_, err = none.Rotate(b.Ctx, "default", "whsec_next", 0, "admin", "")
	require.ErrorIs(t, err, store.ErrWebhookKeyMissing)
	// Overlap 0 replaces the unreadable secret: the lost-key recovery.
	gr, err := lost.Rotate(b.Ctx, "default", "whsec_after-loss", 0, "admin", "key lost")
	require.NoError(t, err)
	require.NoError(t, gr.Readable())
	require.Len(t, gr.Secrets, 1)
	require.Equal(t, "whsec_after-loss", gr.Secrets[0].Value)
}

func TestWebhookGroupBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wg := store.NewWebhookGroups(b.DB, atrest.NewKeyring(newKey(t)))
	_, _, err := wg.Put(b.Ctx, store.WebhookGroupSpec{Group: "nobody", URL: "https://x.example/", Secret: "whsec_s"})
	require.ErrorIs(t, err, store.ErrConsumerGroupNotFound)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, _, err = wg.Put(b.Ctx, store.WebhookGroupSpec{Group: "default", URL: "https://x.example/"})
	require.ErrorIs(t, err, store.ErrValidation, "a new group needs a secret")
	_, _, err = wg.Put(b.Ctx, store.WebhookGroupSpec{Group: "Bad Name", URL: "", Concurrency: 99, Timeout: time.Hour, MaxAttempts: -1, Secret: "s"})
	require.ErrorIs(t, err, store.ErrValidation)
	for _, field := range []string{"group", "url", "concurrency", "timeoutMs", "maxAttempts"} {
		require.True(t, strings.Contains(err.Error(), field), "every problem at once: %v lacks %s", err, field)
	}
	_, err = wg.Rotate(b.Ctx, "default", "whsec_s", time.Hour, "admin", "")
	require.ErrorIs(t, err, store.ErrWebhookGroupNotFound)
	require.ErrorIs(t, wg.Delete(b.Ctx, "default", "admin", ""), store.ErrNotFound)
}

func TestWebhookSecretRotationOverlapsThenExpires(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wg := store.NewWebhookGroups(b.DB, atrest.NewKeyring(newKey(t)))
	_, _, err := wg.Put(b.Ctx, store.WebhookGroupSpec{Group: "default", URL: "https://x.example/", Secret: "whsec_one"})
	require.NoError(t, err)
	g, err := wg.Rotate(b.Ctx, "default", "whsec_two", time.Hour, "admin", "yearly")
	require.NoError(t, err)
	require.Len(t, g.Secrets, 2)
	require.Equal(t, "whsec_two", g.Secrets[0].Value, "the newest secret first")
	require.Nil(t, g.Secrets[0].ExpiresAt)
	require.Equal(t, "whsec_one", g.Secrets[1].Value)
	require.NotNil(t, g.Secrets[1].ExpiresAt)
	_, err = wg.Rotate(b.Ctx, "default", "whsec_three", time.Hour, "admin", "")
	require.NoError(t, err)
	_, err = wg.Rotate(b.Ctx, "default", "whsec_four", time.Hour, "admin", "")
	require.NoError(t, err)
	_, err = wg.Rotate(b.Ctx, "default", "whsec_five", time.Hour, "admin", "")
	require.ErrorIs(t, err, store.ErrValidation, "at most four secrets sign at once")

	// The overlap ends (on the database clock): the old ones stop signing.
	_, err = b.DB.Exec(`UPDATE judge_webhook_secret SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE expires_at IS NOT NULL`)
	require.NoError(t, err)
	g, err = wg.Get(b.Ctx, "default")
	require.NoError(t, err)
	require.Len(t, g.Secrets, 1)
	require.Equal(t, "whsec_four", g.Secrets[0].Value)

	var audits int
	require.NoError(t, b.DB.QueryRow(`SELECT COUNT(*) FROM judge_audit WHERE action LIKE 'webhook.%'`).Scan(&audits))
	require.Equal(t, 4, audits)
	require.NoError(t, wg.Delete(b.Ctx, "default", "admin", "moving to pull"))
	gs, err := wg.List(b.Ctx)
	require.NoError(t, err)
	require.Empty(t, gs)
	var left int
	require.NoError(t, b.DB.QueryRow(`SELECT COUNT(*) FROM judge_webhook_secret`).Scan(&left))
	require.Zero(t, left, "secrets go with their group")
}

func TestWebhookKeyRotationReencrypts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	oldKey, newK := newKey(t), newKey(t)
	_, _, err := store.NewWebhookGroups(b.DB, atrest.NewKeyring(oldKey)).Put(b.Ctx,
		store.WebhookGroupSpec{Group: "default", URL: "https://x.example/", Secret: "whsec_kept"})
	require.NoError(t, err)

	// The new key seals, the old one still opens: nothing stops meanwhile.
	both := store.NewWebhookGroups(b.DB, atrest.NewKeyring(newK, oldKey))
	g, err := both.Get(b.Ctx, "default")
	require.NoError(t, err)
	require.Equal(t, "whsec_kept", g.Secrets[0].Value)
	n, unreadable, err := both.Reencrypt(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Empty(t, unreadable)
	n, _, err = both.Reencrypt(b.Ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a second run has nothing to do")

	// Now the old key file can go.
	onlyNew := store.NewWebhookGroups(b.DB, atrest.NewKeyring(newK))
	g, err = onlyNew.Get(b.Ctx, "default")
	require.NoError(t, err)
	require.Equal(t, "whsec_kept", g.Secrets[0].Value)
	require.Equal(t, newK.ID(), g.Secrets[0].KeyID)
	// A keyring that lacks the key names the group it cannot rewrite.
	_, unreadable, err = store.NewWebhookGroups(b.DB, atrest.NewKeyring(newKey(t))).Reencrypt(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"default"}, unreadable)
}
