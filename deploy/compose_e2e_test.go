package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// composeProject is one copy of deploy/compose/node, as an operator makes
// it for one node: .env and node.env filled from the examples.
type composeProject struct {
	t       *testing.T
	cli     []string
	dir     string // the project directory (compose.yaml, .env, node.env)
	name    string // COMPOSE_PROJECT_NAME
	nodeDir string // KECE_NODE_DIR: the same path on the host and inside
	service string // code-node or sql-node
}

// compose runs the Compose CLI in the project directory.
func (c *composeProject) compose(ctx context.Context, args ...string) (string, error) {
	all := append(append([]string{}, c.cli[1:]...), args...)
	cmd := exec.CommandContext(ctx, c.cli[0], all...)
	cmd.Dir = c.dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *composeProject) must(ctx context.Context, args ...string) string {
	c.t.Helper()
	out, err := c.compose(ctx, args...)
	require.NoError(c.t, err, "%s %s: %s", strings.Join(c.cli, " "), strings.Join(args, " "), out)
	return out
}

// container is the id of the node service's container (running or not).
func (c *composeProject) container(ctx context.Context) string {
	c.t.Helper()
	out, err := exec.CommandContext(ctx, "docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+c.name,
		"--filter", "label=com.docker.compose.service="+c.service).Output()
	require.NoError(c.t, err)
	ids := strings.Fields(string(out))
	require.Len(c.t, ids, 1, "containers of %s/%s", c.name, c.service)
	return ids[0]
}

func inspect(t *testing.T, ctx context.Context, id, format string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "docker", "inspect", "-f", format, id).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// newComposeProject copies deploy/compose/node for node name of pool and
// fills .env and node.env the way project.env.example and node.env.example
// say. The node directory is created as the examples say (0700; owned by
// 65532 for the sql profile) and removed, with the project, at the end.
func newComposeProject(t *testing.T, p *plane, cli []string, image, name, pool string) *composeProject {
	t.Helper()
	c := &composeProject{t: t, cli: cli, dir: t.TempDir(), name: "kece-node-" + name,
		nodeDir: "/var/lib/kece/node-" + name, service: "code-node"}
	profile := "code"
	if pool == "mysql" {
		profile, c.service = "sql", "sql-node"
	}
	data, err := os.ReadFile(repo(composeNode))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "compose.yaml"), data, 0o644))
	proj := map[string]string{"COMPOSE_PROJECT_NAME": c.name, "COMPOSE_PROFILES": profile, "KECE_NODE_DIR": c.nodeDir,
		"KECE_NODE_IMAGE": image}
	require.NoError(t, os.MkdirAll(c.nodeDir, 0o700))
	t.Cleanup(func() {
		_, _ = c.compose(context.Background(), "down", "--remove-orphans", "--timeout", "30")
		_ = os.RemoveAll(c.nodeDir)
	})
	if pool == "mysql" {
		require.NoError(t, os.Chown(c.nodeDir, 65532, 65532))
		dsn := filepath.Join(c.dir, "judge-mysql.dsn")
		require.NoError(t, os.WriteFile(dsn, []byte("root@tcp(127.0.0.1:33062)/\n"), 0o400))
		require.NoError(t, os.Chown(dsn, 65532, 65532))
		proj["KECE_JUDGE_DSN_FILE"] = dsn
	}
	fillExample(t, composeProjEnv, filepath.Join(c.dir, ".env"), proj)
	fillExample(t, composeNodeEnv, filepath.Join(c.dir, "node.env"), map[string]string{"KECE_POOL": pool,
		"KECE_CONTROL_URL": p.url, "KECE_LOCAL_SLOTS": "2", "KECE_LISTEN": freeAddr(t)})
	return c
}

// fillExample writes example to dst with the given variables set: an
// existing KEY= or #KEY= line is replaced, others appended.
func fillExample(t *testing.T, example, dst string, vars map[string]string) {
	t.Helper()
	data, err := os.ReadFile(repo(example))
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	done := map[string]bool{}
	for i, l := range lines {
		k, _, ok := strings.Cut(strings.TrimPrefix(l, "#"), "=")
		if v, set := vars[k]; ok && set && !done[k] {
			lines[i], done[k] = k+"="+v, true
		}
	}
	for _, k := range sortedKeys(vars) {
		if !done[k] {
			lines = append(lines, k+"="+vars[k])
		}
	}
	require.NoError(t, os.WriteFile(dst, []byte(strings.Join(lines, "\n")), 0o644))
}

// Compose for real, with Debian's docker-compose 1.29 (or the v2 plugin):
// one project per node against a control plane on this host, a cpp node
// and a mysql node. Each joins with the command kecectl printed (run in
// the project), is verified and enabled, and judges; the cpp node's
// `stop` drains (a running job finishes and settles), `up` resumes with the
// same credential; a revoked node stops and is not restarted.
func TestComposeNodeEndToEnd(t *testing.T) {
	requireDocker(t)
	clis := composeCLIs(t)
	if len(clis) == 0 {
		if os.Getenv("KECE_REQUIRE_DOCKER") == "1" {
			t.Fatal("KECE_REQUIRE_DOCKER=1 but no Compose is installed (apt-get install docker-compose)")
		}
		t.Skip("no Compose installed")
	}
	requireDockerImage(t, "cpp")
	t.Parallel()
	useHostStateRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	bin := stampedBins(t)
	_, image := stampedImages(t)
	p := startPlane(t, ctx, bin)
	biz := p.business(t)
	figure(t, "binaries, images and control plane ready in %s; Compose: %s", time.Since(start).Round(time.Second), strings.Join(clis[0], " "))
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	suffix := hex.EncodeToString(rnd[:])

	for _, pool := range []string{"cpp", "mysql"} {
		t.Run(pool, func(t *testing.T) {
			name := "e2e-" + pool + "-" + suffix
			c := newComposeProject(t, p, clis[0], image, name, pool)
			joinLine := p.createNode(ctx, name, pool)
			up := time.Now()
			// The printed command, pasted after `docker-compose run --rm --no-deps SERVICE`.
			c.must(ctx, append([]string{"run", "--rm", "--no-deps", c.service}, strings.Fields(joinLine)[1:]...)...)
			cred, err := os.ReadFile(filepath.Join(c.nodeDir, "credential"))
			require.NoError(t, err, "the printed credential path is the project's")
			c.must(ctx, "up", "-d")
			p.waitOnline(ctx, name, 2*time.Minute)
			p.verifyEnable(ctx, name)
			var manifest, lang, src string
			if pool == "cpp" {
				manifest, lang, src = publishAPlusB(t, ctx, biz, 10000), "cpp17", cppAPlusB
			} else {
				manifest, lang, src = publishSQL(t, ctx, biz), "mysql", sqlAnswer
			}
			require.Equal(t, "AC", verdict(t, ctx, biz, enqueue(t, ctx, biz, manifest, lang, src)))
			figure(t, "%s node: first verdict %s after join (join, up, verify, enable, judge); %s since the test started",
				pool, time.Since(up).Round(time.Second), time.Since(start).Round(time.Second))
			// Docker runs the image's own HEALTHCHECK (kece-node healthcheck) on
			// the compose interval (30 s): the node must turn healthy.
			ctr := c.container(ctx)
			require.Eventually(t, func() bool { return inspect(t, ctx, ctr, "{{.State.Health.Status}}") == "healthy" },
				2*time.Minute, time.Second, "%s node's container never reported healthy", pool)
			figure(t, "%s node: docker reports the container healthy %s after up", pool, time.Since(up).Round(time.Second))

			if pool == "cpp" {
				// stop drains: a job running now finishes and settles first.
				id := enqueue(t, ctx, biz, manifest, lang, cppSlowAPlusB)
				require.Eventually(t, func() bool { return status(t, ctx, biz, id, 0).Status == "JUDGING" }, time.Minute, 100*time.Millisecond)
				stopAt := time.Now()
				c.must(ctx, "stop")
				s := status(t, ctx, biz, id, 0)
				require.Equal(t, "AC", string(s.Status), "the running job settled before the node stopped")
				require.Equal(t, "0", inspect(t, ctx, c.container(ctx), "{{.State.ExitCode}}"), "a drained node exits 0")
				figure(t, "docker-compose stop drained in %s; the running job settled AC", time.Since(stopAt).Round(100*time.Millisecond))

				// up resumes with the same credential.
				c.must(ctx, "up", "-d")
				p.waitOnline(ctx, name, 2*time.Minute)
				again, err := os.ReadFile(filepath.Join(c.nodeDir, "credential"))
				require.NoError(t, err)
				require.Equal(t, cred, again)
				require.Equal(t, "AC", verdict(t, ctx, biz, enqueue(t, ctx, biz, manifest, lang, src)))
			}

			// Revoked: the node exits 3, the wrapper says so and exits 0,
			// and on-failure does not restart it.
			p.ctl(ctx, "node", "revoke", name, "--reason", "e2e: stolen host")
			id := c.container(ctx)
			require.Eventually(t, func() bool { return inspect(t, ctx, id, "{{.State.Status}}") == "exited" }, time.Minute, 200*time.Millisecond)
			require.Equal(t, "0 0", inspect(t, ctx, id, "{{.State.ExitCode}} {{.RestartCount}}"))
			logs, err := exec.CommandContext(ctx, "docker", "logs", id).CombinedOutput()
			require.NoError(t, err)
			require.Contains(t, string(logs), "kece-node exited 3")
			require.Contains(t, string(logs), "not restarting it")
			require.Never(t, func() bool { return inspect(t, ctx, id, "{{.State.Status}} {{.RestartCount}}") != "exited 0" },
				3*time.Second, 500*time.Millisecond, "a revoked node stays down")
			t.Logf("%s node revoked: exited, not restarted; last lines:\n%s", pool, tail(logs, 2))
		})
	}
}

func tail(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
