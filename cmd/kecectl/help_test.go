package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/cmd/internal/golden"
)

// Help works with no server, no URL and no token, for every command, exits
// 0 and lists the command's flags.
func TestHelpNeedsNoServer(t *testing.T) {
	t.Parallel()
	none := ctl{t: t, env: map[string]string{}}
	for _, path := range []string{"", "host-group", "host-group create", "host-group resize", "node", "node list", "node create", "job show", "job rejudge",
		"node verify", "node enable", "node drain", "node disable", "node join-code", "node resize", "job", "job list",
		"pool", "pool verdicts", "audit", "audit list", "events", "token", "token create", "token update", "webhook", "webhook list", "webhook set", "webhook rotate", "webhook delete", "reconcile", "version", "man"} {
		args := append(strings.Fields(path), "--help")
		out := none.ok(args...)
		name := strings.ReplaceAll(strings.TrimSpace("kecectl "+path), " ", "_")
		golden.Check(t, "./cmd/kecectl", filepath.Join("help", name+".golden"), out)
	}
	// The flags users asked for are listed where they belong.
	out := none.ok("node", "drain", "--help")
	for _, f := range []string{"--deadline", "--wait", "--reason", "--timeout", "-o, --output"} {
		require.Contains(t, out, f)
	}
	require.Contains(t, none.ok("node", "create", "--help"), "--code-ttl")
	require.Contains(t, none.ok("node", "join-code", "--help"), "--code-ttl")
	require.Contains(t, none.ok("node", "verify", "--help"), "--wait")
	require.Contains(t, none.ok("token", "create", "--help"), "--submission-types")
	require.Contains(t, none.ok("node", "enable", "--help"), "--wait")
	// help NODE also works, and -h.
	require.Equal(t, none.ok("node", "--help"), none.ok("help", "node"))
	require.Equal(t, none.ok("node", "drain", "--help"), none.ok("node", "drain", "-h"))
}

func TestUsageErrorsExit2WithoutAServer(t *testing.T) {
	t.Parallel()
	none := ctl{t: t, env: map[string]string{}}
	o := none.fails(exitUsage, `unknown command "nod" for "kecectl"; did you mean job or node?`, "nod", "list")
	require.Contains(t, o.stderr, "Run 'kecectl --help' for usage.")
	o = none.fails(exitUsage, `unknown command "explode" for "kecectl node"`, "node", "explode")
	require.Contains(t, o.stderr, "available: create, disable, drain")
	none.fails(exitUsage, `unknown command "drian" for "kecectl node"; did you mean drain?`, "node", "drian", "x")
	none.fails(exitUsage, `"kecectl node" needs a command`, "node")
	none.fails(exitUsage, `required flag(s) "reason" not set`, "node", "drain", "cpp-1")
	none.fails(exitUsage, "needs NODE (a name or id)", "node", "drain", "--reason", "x")
	none.fails(exitUsage, "unknown flag: --deadlin", "node", "drain", "cpp-1", "--reason", "x", "--deadlin", "1m")
	none.fails(exitUsage, `invalid argument "soon" for "--deadline"`, "node", "drain", "cpp-1", "--reason", "x", "--deadline", "soon")
	none.fails(exitUsage, `"xml" is not an output format`, "-o", "xml", "node", "list")
	none.fails(exitUsage, "--code-ttl 200h0m0s must be between 1m and 168h", "node", "join-code", "cpp-1", "--code-ttl", "200h")
	none.fails(exitUsage, "--deadline 200h0m0s must be between 1s and 168h", "node", "drain", "cpp-1", "--reason", "x", "--deadline", "200h")
	// Durations take days, as on every KECE binary.
	none.fails(exitUsage, "--code-ttl 192h0m0s must be between 1m and 168h", "node", "join-code", "cpp-1", "--code-ttl", "8d")
	none.fails(exitUsage, `invalid argument "7x" for "--expires-in" flag: not a duration such as 90s, 15m, 24h or 7d`, "token", "create", "x", "--expires-in", "7x")
	none.fails(exitUsage, "--reason is required", "node", "drain", "cpp-1", "--reason", "  ")
	none.fails(exitUsage, `"abc" is not a job id`, "job", "show", "abc")
	// Commands that need the server say what is missing.
	none.fails(exitUsage, "set KECE_ADMIN_URL or pass --url", "node", "list")
	none.fails(exitUsage, "no admin token", "--url", "http://127.0.0.1:1", "node", "list")
	none.fails(exitUsage, "must start with http:// or https://", "--url", "127.0.0.1:1", "node", "list")
	none.fails(exitUsage, "cannot read --token-file", "--url", "http://127.0.0.1:1", "--token-file", filepath.Join(t.TempDir(), "none"), "node", "list")
	// The global flags' variables go through the settings loader: a bad one
	// is named and exits 2; a flag given wins over its variable.
	bad := ctl{t: t, env: map[string]string{"KECE_OUTPUT": "xml", "KECE_ADMIN_URL": "127.0.0.1:1"}}
	bad.fails(exitUsage, `KECE_OUTPUT: "xml"`, "node", "list")
	bad.fails(exitUsage, "must start with http:// or https://", "-o", "json", "node", "list")
	require.Contains(t, bad.ok("version", "-o", "json"), `"version"`)
}

func TestVersion(t *testing.T) {
	t.Parallel()
	none := ctl{t: t, env: map[string]string{}}
	out := none.ok("version")
	require.True(t, strings.HasPrefix(out, "kecectl "), out)
	require.Equal(t, out, none.ok("--version"))
	v := decode[map[string]string](t, none.ok("version", "-o", "json"))
	require.NotEmpty(t, v["version"])
	require.NotEmpty(t, v["go"])
	require.Contains(t, none.ok("version", "-o", "yaml"), "version: ")
}

func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	none := ctl{t: t, env: map[string]string{}}
	for shell, want := range map[string]string{
		"bash": "__start_kecectl",
		"zsh":  "#compdef kecectl",
		"fish": "complete -c kecectl",
	} {
		out := none.ok("completion", shell)
		require.Contains(t, out, want, shell)
	}
	// The hidden completion entry point offers verbs and flag values with no server.
	out := none.ok("__complete", "node", "dr")
	require.Contains(t, out, "drain\t")
	out = none.ok("__complete", "-o", "")
	for _, f := range outputFormats {
		require.Contains(t, out, f)
	}
	out = none.ok("__complete", "node", "list", "--pool", "")
	require.Contains(t, out, "cpp")
	require.Contains(t, out, "mysql")
	none.fails(exitUsage, "unknown command", "completion", "tcsh")
}

func TestManPages(t *testing.T) {
	t.Parallel()
	none := ctl{t: t, env: map[string]string{}}
	dir := filepath.Join(t.TempDir(), "man1")
	require.Contains(t, none.ok("man", "--dir", dir), dir)
	b, err := os.ReadFile(filepath.Join(dir, "kecectl-node-drain.1"))
	require.NoError(t, err)
	require.Contains(t, string(b), ".TH \"KECECTL\"")
	require.Contains(t, string(b), "deadline")
	_, err = os.Stat(filepath.Join(dir, "kecectl.1"))
	require.NoError(t, err)
	none.fails(exitUsage, `required flag(s) "dir" not set`, "man")
}
