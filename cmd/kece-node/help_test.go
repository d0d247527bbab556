package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/cmd/internal/golden"
)

func runNodeCLI(env map[string]string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

func TestHelpGolden(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"", "run", "join", "healthcheck", "version", "man", "completion"} {
		code, out, errOut := runNodeCLI(nil, append(strings.Fields(path), "--help")...)
		require.Equal(t, 0, code, "%s: %s", path, errOut)
		name := strings.ReplaceAll(strings.TrimSpace("kece-node "+path), " ", "_")
		golden.Check(t, "./cmd/kece-node", filepath.Join("help", name+".golden"), out)
	}
	_, out, _ := runNodeCLI(nil, "--help")
	for _, sub := range []string{"run", "join", "healthcheck", "version", "completion", "man"} {
		require.Regexp(t, `(?m)^  `+sub+` `, out)
	}
	// One name per setting: the old ones are hidden.
	for _, old := range []string{"--heartbeat ", "--renew ", "--cache-max ", "--code "} {
		require.NotContains(t, out, old)
	}
	for _, now := range []string{"--heartbeat-interval", "--renew-interval", "--cache-max-bytes", "--join-code", "--log-format"} {
		require.Contains(t, out, now)
	}
	_, out, _ = runNodeCLI(nil, "join", "--help")
	require.Contains(t, out, "--join-code-file")
	require.NotContains(t, out, "--code ")
}

func TestCompletionAndManPages(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{"bash": "__start_kece-node", "zsh": "#compdef kece-node", "fish": "complete -c kece-node"} {
		code, out, errOut := runNodeCLI(nil, "completion", shell)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, want)
	}
	dir := filepath.Join(t.TempDir(), "man1")
	code, _, errOut := runNodeCLI(nil, "man", "--dir", dir)
	require.Equal(t, 0, code, errOut)
	b, err := os.ReadFile(filepath.Join(dir, "kece-node-join.1"))
	require.NoError(t, err)
	require.Contains(t, string(b), `.TH "KECE-NODE"`)
	require.Contains(t, string(b), "join-code")
}

// Every bad setting is named in one run, the command line's included; with
// nothing configured the node names only what to set.
func TestEveryBadSettingAtOnce(t *testing.T) {
	t.Parallel()
	code, _, errOut := runNodeCLI(nil, "--pool", "nope", "--heartbeat-interval=-1s", "--renew-interval=-2s")
	require.Equal(t, exitConfig, code)
	for _, want := range []string{`--heartbeat-interval: "-1s": must not be negative`, `--renew-interval: "-2s": must not be negative`, `KECE_POOL "nope" is not a pool`} {
		require.Contains(t, errOut, want)
	}
	code, _, errOut = runNodeCLI(nil)
	require.Equal(t, exitConfig, code)
	require.NotContains(t, errOut, "no executor")
	require.NotContains(t, errOut, "KECE_LOCAL_SLOTS", "the slots are sized from the host once the pool is set")
	for _, want := range []string{"KECE_POOL", "KECE_CONTROL_URL", "KECE_CREDENTIAL_FILE", "KECE_CACHE_DIR"} {
		require.Contains(t, errOut, want)
	}
	// The old names still work for one release, with a warning.
	code, _, errOut = runNodeCLI(nil, "--heartbeat=-1s", "--renew", "2x", "--cache-max", "lots")
	require.Equal(t, exitConfig, code)
	for _, want := range []string{"warning: --heartbeat is the old name of --heartbeat-interval", `--heartbeat: "-1s"`,
		`--renew: "2x": not a duration`, `--cache-max: "lots" is not a byte size`} {
		require.Contains(t, errOut, want)
	}
	// A flag given wins over its variable under cobra too.
	code, _, errOut = runNodeCLI(map[string]string{"KECE_POOL": "rust", "KECE_HEARTBEAT_INTERVAL": "often"}, "--pool", "perl", "--heartbeat-interval", "1s")
	require.Equal(t, exitConfig, code)
	require.Contains(t, errOut, `KECE_POOL "perl"`)
	require.NotContains(t, errOut, "often")
	code, _, errOut = runNodeCLI(nil, "--log-format", "yaml")
	require.Equal(t, exitConfig, code)
	require.Contains(t, errOut, `log format "yaml": want json or text`)
}
