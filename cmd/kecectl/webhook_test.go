package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/control/atrest"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/replica"
	"github.com/kece-oj/kece/control/webhook"
)

// TestWebhookCommands: set (a fresh secret alone on stdout), list, an update
// that keeps what it does not give, rotate, delete; and each mistake says
// what to fix.
func TestWebhookCommands(t *testing.T) {
	t.Parallel()
	key, err := atrest.ParseKey(atrest.NewKeyText())
	require.NoError(t, err)
	env := controltest.Start(t, controltest.Options{Replica: replica.Config{WebhookKeys: atrest.NewKeyring(key)}})
	c := ctl{t: t, env: map[string]string{"KECE_ADMIN_URL": env.URL, "KECE_ADMIN_TOKEN": env.Admin}}

	o := c.run("webhook", "set", "default", "--endpoint", "https://oj.example/hook", "--concurrency", "6")
	require.Equal(t, exitOK, o.code, o.stderr)
	_, err = webhook.ParseSecret(strings.TrimSpace(o.stdout))
	require.NoError(t, err, "the new secret alone on stdout")
	require.Contains(t, o.stderr, "shown once")
	c.ok("webhook", "set", "default", "--endpoint", "https://oj.example/hook2", "--disable")
	list := decode[adminapi.WebhookGroupList](t, c.ok("webhook", "list", "-o", "json"))
	require.Len(t, list.Groups, 1)
	require.Equal(t, 6, list.Groups[0].Concurrency, "an update keeps what it does not give")
	require.False(t, list.Groups[0].Enabled)
	require.Regexp(t, `(?m)^default\s+https://oj.example/hook2\s+false\s+6\s+10s\s+8\s+1\s`, c.ok("webhook", "list"))

	given := filepath.Join(t.TempDir(), "next")
	require.NoError(t, os.WriteFile(given, []byte(webhook.NewSecret().String()+"\n"), 0o600))
	o = c.run("webhook", "rotate", "default", "--overlap", "7d", "--secret-file", given)
	require.Equal(t, exitOK, o.code, o.stderr)
	require.Empty(t, o.stdout, "a given secret is not printed")
	require.Contains(t, c.ok("webhook", "list"), "2 (rotating)")

	c.fails(exitUsage, "--endpoint is required", "webhook", "set", "default")
	c.fails(exitUsage, "--overlap must be 0..30d", "webhook", "rotate", "default", "--overlap", "90d")
	c.fails(exitUsage, "--concurrency must be 1..32", "webhook", "set", "default", "--endpoint", "https://x.example/", "--concurrency", "0")
	bad := c.fails(exitFailed, "WEBHOOK_URL_INVALID (HTTP 400)", "webhook", "set", "default", "--endpoint", "ftp://x.example/")
	require.Contains(t, bad.stderr, "hint: give an absolute http:// or https:// URL")
	unknown := c.fails(exitFailed, "CONSUMER_GROUP_UNKNOWN (HTTP 400)", "webhook", "set", "nobody", "--endpoint", "https://x.example/")
	require.Contains(t, unknown.stderr, "kecectl token create --name N --consumer-group GROUP")
	open := filepath.Join(t.TempDir(), "open")
	require.NoError(t, os.WriteFile(open, []byte(webhook.NewSecret().String()), 0o644))
	c.fails(exitUsage, "has mode 0644", "webhook", "rotate", "default", "--secret-file", open)

	require.Contains(t, c.ok("webhook", "delete", "default"), "deleted")
	c.fails(exitFailed, "WEBHOOK_GROUP_NOT_FOUND", "webhook", "rotate", "default")
}
