package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/cmd/internal/golden"
)

// Every command's help needs no database, exits 0 and matches its golden
// file; a group lists its commands.
func TestHelpGolden(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"", "serve", "migrate", "migrate up", "migrate down", "migrate status", "token", "token create",
		"token list", "token rotate", "token revoke", "reconcile", "webhook-secret", "webhook-secret new", "webhook-secret show",
		"webhook-key", "webhook-key new", "webhook-key id", "webhook-key reencrypt",
		"version", "man", "completion"} {
		code, out, errOut := runIn(t, nil, append(strings.Fields(path), "--help")...)
		require.Equal(t, 0, code, "%s: %s", path, errOut)
		name := strings.ReplaceAll(strings.TrimSpace("kece-control "+path), " ", "_")
		golden.Check(t, "./cmd/kece-control", filepath.Join("help", name+".golden"), out)
	}
	_, out, _ := runIn(t, nil, "migrate", "--help")
	for _, sub := range []string{"up", "down", "status"} {
		require.Regexp(t, `(?m)^  `+sub+` `, out)
	}
	_, out, _ = runIn(t, nil, "--help")
	for _, sub := range []string{"serve", "migrate", "token", "reconcile", "webhook-secret", "version", "completion", "man"} {
		require.Regexp(t, `(?m)^  `+sub+` `, out)
	}
	_, out, _ = runIn(t, nil, "token", "create", "--help")
	require.Contains(t, out, "e.g. 90d")
}

func TestCompletionAndManPages(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{"bash": "__start_kece-control", "zsh": "#compdef kece-control", "fish": "complete -c kece-control"} {
		code, out, errOut := runIn(t, nil, "completion", shell)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, want)
	}
	code, out, _ := runIn(t, nil, "__complete", "migrate", "")
	require.Equal(t, 0, code)
	require.Contains(t, out, "status\t")
	dir := filepath.Join(t.TempDir(), "man1")
	code, _, errOut := runIn(t, nil, "man", "--dir", dir)
	require.Equal(t, 0, code, errOut)
	b, err := os.ReadFile(filepath.Join(dir, "kece-control-serve.1"))
	require.NoError(t, err)
	require.Contains(t, string(b), `.TH "KECE-CONTROL"`)
	require.Contains(t, string(b), "KECE_LEASE_TTL")
	code, _, errOut = runIn(t, nil, "man")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `required flag(s) "dir" not set`)
}

// The day unit works wherever a duration is taken.
func TestDurationsTakeDays(t *testing.T) {
	t.Parallel()
	code, _, errOut := runIn(t, nil, "token", "rotate", "--kind", "admin", "--name", "x", "--overlap", "31d", "--mysql-dsn", "a@tcp(b)/c")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--overlap: at most 720h0m0s", "31d parsed, then refused as too long")
	code, _, errOut = runIn(t, nil, "token", "create", "--kind", "admin", "--name", "x", "--expires-in", "soon", "--mysql-dsn", "a@tcp(b)/c")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `--expires-in: "soon": not a duration such as 90s, 15m, 24h or 7d`)
}
