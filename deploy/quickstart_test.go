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
// mysql nodes joined, verified and enabled by up.sh (docker-compose up -d
// plus the admin steps), then the curl session of docs/business.md, pasted
// into bash, judges a+b.
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
	t.Logf("images ready in %s (%s)", time.Since(start).Round(time.Second), mariadb)

	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	env := append(os.Environ(), "KECE_CONTROL_IMAGE="+control, "KECE_NODE_IMAGE="+node, "KECE_MARIADB_IMAGE="+mariadb,
		"KECE_QS_DIR=/var/lib/kece/qs-e2e-"+hex.EncodeToString(rnd[:]), "COMPOSE_PROJECT_NAME=kece-qs-e2e-"+hex.EncodeToString(rnd[:]))
	upSh := repo("deploy/compose/quickstart/up.sh")
	t.Cleanup(func() {
		down := exec.Command(upSh, "down")
		down.Env = env
		if out, err := down.CombinedOutput(); err != nil {
			t.Logf("up.sh down: %v\n%s", err, out)
		}
	})
	up := time.Now()
	cmd := exec.CommandContext(ctx, upSh)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	require.NoError(t, err, "up.sh: %s", stderr.String())
	t.Logf("up.sh (docker-compose up -d, three nodes joined, verified, enabled): %s", time.Since(up).Round(time.Second))
	kece := regexp.MustCompile(`(?m)^KECE=(\S+)$`).FindSubmatch(out)
	token := regexp.MustCompile(`(?m)^TOKEN=(kbt_\S+)$`).FindSubmatch(out)
	require.NotNil(t, kece, "%s", out)
	require.NotNil(t, token, "%s", out)

	// The curl session of docs/business.md, as pasted into bash.
	doc, err := os.ReadFile(repo("docs/business.md"))
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)## Quick start: from token to verdict with curl.*?```sh\n(.*?)```").FindSubmatch(doc)
	require.NotNil(t, m, "docs/business.md has its curl session")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "session.sh"), m[1], 0o600))
	sh := exec.CommandContext(ctx, "bash", "session.sh")
	sh.Dir = dir
	sh.Env = append(os.Environ(), "KECE="+string(kece[1]), "TOKEN="+string(token[1]))
	session, err := sh.CombinedOutput()
	require.NoError(t, err, "%s", session)
	status, err := os.ReadFile(filepath.Join(dir, "status.json"))
	require.NoError(t, err)
	require.Contains(t, string(status), `"status":"AC"`, "the a+b submission of the curl session")
	t.Logf("quick start: first verdict (python a+b, AC) %s after up.sh started; %s since the test started (images included)",
		time.Since(up).Round(time.Second), time.Since(start).Round(time.Second))
}
