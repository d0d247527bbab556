package deploy

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sqlNode joins a mysql-pool node with the command kecectl printed and
// starts it; it returns the process and its listen address.
func sqlNode(t *testing.T, ctx context.Context, p *plane, nodeBin, name string) (*proc, string) {
	t.Helper()
	dir := t.TempDir()
	cred := filepath.Join(dir, "state", "credential")
	args := strings.Fields(p.createNode(ctx, name, "mysql"))[1:]
	mustRun(t, ctx, nil, nodeBin, append(args, "--credential-file", cred)...)
	dsnFile := filepath.Join(dir, "judge-dsn")
	require.NoError(t, os.WriteFile(dsnFile, []byte("root@tcp(127.0.0.1:33062)/\n"), 0o600))
	listen := freeAddr(t)
	pr := startProc(t, name, nodeBin, nil, []string{"KECE_POOL=mysql", "KECE_CONTROL_URL=" + p.url, "KECE_CREDENTIAL_FILE=" + cred,
		"KECE_LOCAL_SLOTS=1", "KECE_WORKSPACE=" + filepath.Join(dir, "work"), "KECE_CACHE_DIR=" + filepath.Join(dir, "cache"),
		"KECE_LISTEN=" + listen, "KECE_JUDGE_MYSQL_DSN_FILE=" + dsnFile})
	return pr, listen
}

// waitNodeVersion waits until `kecectl node list` shows name online with version.
func waitNodeVersion(t *testing.T, ctx context.Context, p *plane, name, version string) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^\d+\s+` + regexp.QuoteMeta(name) + `\s+mysql\s+\S+\s+\S+\s+yes\s+\S+\s+` + regexp.QuoteMeta(version) + `\s`)
	require.Eventually(t, func() bool { return re.MatchString(p.ctl(ctx, "node", "list")) }, time.Minute, 200*time.Millisecond,
		"node %s never listed online with version %s", name, version)
}

// One version, stamped once by the Makefile, reported the same by every
// binary's version command, the node's heartbeats (kecectl node list) and
// both processes' kece_build_info. Then the upgrade rule of
// docs/operations.md with two more builds: a node of another release of
// the same protocol version works with this control plane; a node built
// speaking another protocol version is refused and exits 3 (not restarted).
func TestVersionAgreesEverywhere(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := stampedBins(t)
	for _, b := range []string{"kece-control", "kece-node", "kecectl", "kece-bench", "kece-demo"} {
		out := mustRun(t, ctx, nil, filepath.Join(bin, b), "--version")
		require.True(t, strings.HasPrefix(out, b+" "+stampedVersion+" "), "%s --version: %q", b, out)
	}
	p := startPlane(t, ctx, bin)
	nodeBin := filepath.Join(bin, "kece-node")
	_, listen := sqlNode(t, ctx, p, nodeBin, "sql-new")
	waitNodeVersion(t, ctx, p, "sql-new", stampedVersion)
	buildInfo := `kece_build_info{component="%s",goversion="[^"]+",revision="[^"]+",version="` + regexp.QuoteMeta(stampedVersion) + `"} 1`
	require.Regexp(t, strings.Replace(buildInfo, "%s", "control", 1), httpBody(t, p.url+"/metrics"))
	require.Regexp(t, strings.Replace(buildInfo, "%s", "node", 1), httpBody(t, "http://"+listen+"/metrics"))

	// Another release, same protocol: works beside this control plane.
	old := goBuild(t, "./cmd/kece-node", "-ldflags", "-X github.com/kece-oj/kece/internal/buildinfo.version=v9.8.0-old")
	sqlNode(t, ctx, p, old, "sql-old")
	waitNodeVersion(t, ctx, p, "sql-old", "v9.8.0-old")

	// Another protocol version: the same source with contracts.ProtocolVersion
	// changed, built through an overlay (no test hook in the product).
	src, err := os.ReadFile(repo("contracts/protocol.go"))
	require.NoError(t, err)
	changed := regexp.MustCompile(`(?m)^(\s*ProtocolVersion\s*=\s*)\d+`).ReplaceAll(src, []byte("${1}99"))
	require.NotEqual(t, string(src), string(changed))
	dir := t.TempDir()
	patched := filepath.Join(dir, "protocol.go")
	require.NoError(t, os.WriteFile(patched, changed, 0o600))
	abs, err := filepath.Abs(repo("contracts/protocol.go"))
	require.NoError(t, err)
	overlay := filepath.Join(dir, "overlay.json")
	require.NoError(t, os.WriteFile(overlay, []byte(`{"Replace":{"`+abs+`":"`+patched+`"}}`), 0o600))
	future := goBuild(t, "./cmd/kece-node", "-overlay", overlay, "-ldflags", "-X github.com/kece-oj/kece/internal/buildinfo.version=v99.0.0")
	pr, _ := sqlNode(t, ctx, p, future, "sql-future")
	select {
	case <-pr.exited:
	case <-time.After(time.Minute):
		t.Fatalf("a node of another protocol version kept running:\n%s", pr.log())
	}
	require.Equal(t, 3, pr.cmd.ProcessState.ExitCode(), pr.log())
	require.Contains(t, pr.log(), "PROTOCOL_UNSUPPORTED")
	t.Logf("protocol 99 node: %s", lastLine(pr.log()))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
