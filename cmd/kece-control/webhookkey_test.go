package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/atrest"
	"github.com/kece-oj/kece/control/dbtest"
	"github.com/kece-oj/kece/control/store"
)

// TestWebhookKeyRotation is the operator's key rotation: a new key file,
// the old one as KECE_WEBHOOK_OLD_KEY_FILE, `webhook-key reencrypt`, then
// the old file can go. A key that was lost is named with its groups.
func TestWebhookKeyRotation(t *testing.T) {
	t.Parallel()
	db, dsn := dbtest.Open(t)
	oldText, newText := atrest.NewKeyText(), atrest.NewKeyText()
	oldKey, err := atrest.ParseKey(oldText)
	require.NoError(t, err)
	_, _, err = store.NewWebhookGroups(db, atrest.NewKeyring(oldKey)).Put(context.Background(),
		store.WebhookGroupSpec{Group: "default", URL: "https://oj.example/", Secret: "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="})
	require.NoError(t, err)

	code, out, errOut := runIn(t, nil, "webhook-key", "new")
	require.Equal(t, 0, code, errOut)
	_, err = atrest.ParseKey(out)
	require.NoError(t, err, "new prints a key the loader accepts")

	env := map[string]string{"KECE_MYSQL_DSN_FILE": writeSecret(t, dsn, 0o600),
		"KECE_WEBHOOK_KEY_FILE": writeSecret(t, newText, 0o600), "KECE_WEBHOOK_OLD_KEY_FILE": writeSecret(t, oldText, 0o600)}
	code, out, errOut = runIn(t, env, "webhook-key", "id")
	require.Equal(t, 0, code, errOut)
	ids := strings.Fields(out)
	require.Len(t, ids, 2)
	require.Equal(t, oldKey.ID(), ids[1])

	// Without the old key the secret is unreadable: named, exit 1.
	lost := map[string]string{"KECE_MYSQL_DSN_FILE": env["KECE_MYSQL_DSN_FILE"], "KECE_WEBHOOK_KEY_FILE": env["KECE_WEBHOOK_KEY_FILE"]}
	code, out, _ = runIn(t, lost, "webhook-key", "reencrypt")
	require.Equal(t, 1, code)
	require.Contains(t, out, "[default]")
	require.Contains(t, out, "kecectl webhook rotate GROUP --overlap 0")

	code, out, errOut = runIn(t, env, "webhook-key", "reencrypt")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "re-encrypted 1 secret(s) with key "+ids[0])
	code, out, errOut = runIn(t, lost, "webhook-key", "reencrypt")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "re-encrypted 0 secret(s)", "the old key file can go now")
}
