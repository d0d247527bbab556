package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The quick start (deploy/compose/quickstart) from nothing to a verdict:
// MariaDB built from Debian's package, one control replica, cpp, python and
// mysql nodes joined, verified and enabled by a plain `docker-compose up -d`
// (its one-shots setup and enable), then the curl session of
// docs/business.md, pasted into bash with the token from the file the README
// names, judges a+b; up.sh on the running project prints the same token.
func TestComposeQuickstart(t *testing.T) {
	requireDocker(t)
	if len(composeCLIs(t)) == 0 {
		if os.Getenv("KECE_REQUIRE_DOCKER") == "1" {
			t.Fatal("KECE_REQUIRE_DOCKER=1 but no Compose is installed (apt-get install docker-compose)")
		}
		t.Skip("no Compose installed")
	}
	for _, pool := range []string{"cpp", "python"} {
		requireDockerImage(t, pool)
	}
	needTCP(t, "control MariaDB", "127.0.0.1:33061", "KECE_REQUIRE_MYSQL") // only so it skips with the others
	for _, addr := range []string{"127.0.0.1:8090", "127.0.0.1:33071", "127.0.0.1:33072", "127.0.0.1:9471", "127.0.0.1:9472", "127.0.0.1:9473"} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Fatalf("the quick start's port %s is in use (another quick start running? deploy/compose/quickstart/up.sh down)", addr)
		}
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	control, node := stampedImages(t)
	var mstderr bytes.Buffer
	mcmd := exec.CommandContext(ctx, repo("scripts/mariadb-image.sh"))
	mcmd.Stderr = &mstderr
	out, err := mcmd.Output()
	require.NoError(t, err, "scripts/mariadb-image.sh: %s", mstderr.String())
	mariadb := strings.TrimSpace(string(out))
	figure(t, "images ready in %s (%s)", time.Since(start).Round(time.Second), mariadb)

	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	qsDir := "/var/lib/kece/qs-e2e-" + hex.EncodeToString(rnd[:])
	env := append(os.Environ(), "KECE_CONTROL_IMAGE="+control, "KECE_NODE_IMAGE="+node, "KECE_MARIADB_IMAGE="+mariadb,
		"KECE_QS_DIR="+qsDir, "COMPOSE_PROJECT_NAME=kece-qs-e2e-"+hex.EncodeToString(rnd[:]))
	upSh := repo("deploy/compose/quickstart/up.sh")
	useHostStateRoot(t)
	t.Cleanup(func() {
		down := exec.Command(upSh, "down")
		down.Env = env
		if out, err := down.CombinedOutput(); err != nil {
			t.Logf("up.sh down: %v\n%s", err, out)
		}
	})
	// A plain `docker-compose up -d`: the one-shots setup and enable do the
	// admin steps; enable's exit (bounded) says the nodes are enabled.
	cli := composeCLIs(t)[0]
	dc := func(args ...string) []byte {
		t.Helper()
		all := append(append(cli[1:], "-f", repo("deploy/compose/quickstart/compose.yaml")), args...)
		cmd := exec.CommandContext(ctx, cli[0], all...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s %s: %s", cli[0], strings.Join(all, " "), out)
		return out
	}
	up := time.Now()
	dc("up", "-d")
	enable := strings.TrimSpace(string(dc("ps", "-a", "-q", "enable")))
	require.NotEmpty(t, enable, "no enable container")
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Minute)
	defer wcancel()
	code, err := exec.CommandContext(wctx, "docker", "wait", enable).Output()
	require.NoError(t, err, "the enable one-shot never ended:\n%s", dc("logs", "--no-color", "setup", "enable"))
	require.Equal(t, "0", strings.TrimSpace(string(code)), "the enable one-shot failed:\n%s", dc("logs", "--no-color", "setup", "enable"))
	figure(t, "docker-compose up -d plus the enable one-shot (three nodes joined, verified, enabled): %s", time.Since(up).Round(time.Second))
	tok, err := os.ReadFile(filepath.Join(qsDir, "business.token"))
	require.NoError(t, err, "the business token where the README says")
	kece, token := "http://127.0.0.1:8090", strings.TrimSpace(string(tok))
	require.Regexp(t, `^kbt_\S+$`, token)

	// The curl session of docs/business.md, as pasted into bash.
	doc, err := os.ReadFile(repo("docs/business.md"))
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)## Quick start: from token to verdict with curl.*?```sh\n(.*?)```").FindSubmatch(doc)
	require.NotNil(t, m, "docs/business.md has its curl session")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "session.sh"), m[1], 0o600))
	sh := exec.CommandContext(ctx, "bash", "session.sh")
	sh.Dir = dir
	sh.Env = append(os.Environ(), "KECE="+kece, "TOKEN="+token)
	session, err := sh.CombinedOutput()
	require.NoError(t, err, "%s", session)
	status, err := os.ReadFile(filepath.Join(dir, "status.json"))
	require.NoError(t, err)
	require.Contains(t, string(status), `"status":"AC"`, "the a+b submission of the curl session")
	figure(t, "quick start: first verdict (python a+b, AC) %s after docker-compose up -d; %s since the test started (images included)",
		time.Since(up).Round(time.Second), time.Since(start).Round(time.Second))

	// up.sh on the running project: the one-shots run again, skip what
	// exists, and it prints the same URL and token.
	again := time.Now()
	cmd := exec.CommandContext(ctx, upSh)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	require.NoError(t, err, "up.sh: %s", stderr.String())
	require.Contains(t, string(out), "KECE="+kece+"\n")
	require.Contains(t, string(out), "TOKEN="+token+"\n")
	figure(t, "up.sh again on the running project: %s", time.Since(again).Round(time.Second))
}
