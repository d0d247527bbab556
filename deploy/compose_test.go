package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestComposeNode(t *testing.T) {
	t.Parallel()
	c := loadCompose(t, composeNode)
	code, sql := service(t, c, "code-node"), service(t, c, "sql-node")
	require.Equal(t, []string{"code"}, strList(code["profiles"]))
	require.Equal(t, []string{"sql"}, strList(sql["profiles"]))
	require.Equal(t, []string{"code"}, strList(service(t, c, "supervisor")["profiles"]))

	codeBinds, sqlBinds := bindSources(t, c, "code-node"), bindSources(t, c, "sql-node")
	require.Equal(t, "/var/run/docker.sock", codeBinds["/var/run/docker.sock"])
	for src, dst := range sqlBinds {
		require.NotContains(t, src+dst, "docker.sock", "the mysql pool has no Docker socket")
	}
	require.Empty(t, sql["cap_add"], "the mysql pool needs no capabilities")
	require.NotEqual(t, "0:0", sql["user"])
	require.ElementsMatch(t, []string{"CHOWN", "DAC_OVERRIDE"}, strList(code["cap_add"]))
	for name, svc := range map[string]map[string]any{"code-node": code, "sql-node": sql} {
		require.Equal(t, []string{"ALL"}, strList(svc["cap_drop"]), name)
		require.Equal(t, true, svc["read_only"], name)
		require.Equal(t, "SIGTERM", svc["stop_signal"], name)
		grace, err := time.ParseDuration(fmt.Sprint(svc["stop_grace_period"]))
		require.NoError(t, err)
		require.Greater(t, grace, stopBound(t), "%s stop_grace_period must exceed drain grace + cleanup", name)
		require.NotEqual(t, "always", svc["restart"], "%s: a revoked or superseded node must stay down", name)
		require.Equal(t, "node.env", svc["env_file"], name)
	}
	// dockerd resolves bind sources on the host: the node directory (work
	// area, supervisor) is mounted at its own path, and every path the node
	// hands to sandboxes lies inside it.
	require.Equal(t, "${KECE_NODE_DIR}", codeBinds["${KECE_NODE_DIR}"])
	for k, v := range serviceEnv(t, c, "code-node") {
		if strings.HasSuffix(k, "_FILE") || k == "KECE_WORKSPACE" || k == "KECE_CACHE_DIR" || k == "KECE_SUPERVISOR" {
			require.True(t, strings.HasPrefix(v, "${KECE_NODE_DIR"), "%s=%s must lie in the node directory", k, v)
		}
	}
	require.Contains(t, asMap(t, code["depends_on"], "depends_on"), "supervisor")
	require.Contains(t, strings.Join(strList(service(t, c, "supervisor")["entrypoint"]), " "), "/usr/local/lib/kece/kece-sandbox-init",
		"the supervisor copy comes from where node.Dockerfile installs it")

	// Every ${VAR} is defined by the project env example or has a default,
	// and the example defines nothing the file does not use.
	raw, err := os.ReadFile(repo(composeNode))
	require.NoError(t, err)
	proj := mustEnv(t, composeProjEnv)
	used := map[string]bool{}
	for _, m := range composeVarRE.FindAllStringSubmatch(strings.ReplaceAll(string(raw), "$$", ""), -1) {
		used[m[1]] = true
		if !strings.HasPrefix(m[2], ":-") && !strings.HasPrefix(m[2], "-") {
			require.Contains(t, proj.active, m[1], "%s uses ${%s} without default; %s must set it", composeNode, m[1], composeProjEnv)
		}
	}
	for k := range proj.names() {
		require.True(t, used[k] || strings.HasPrefix(k, "COMPOSE_"), "%s names %s, which compose.yaml does not use", composeProjEnv, k)
	}
	require.Contains(t, []string{"code", "sql"}, proj.active["COMPOSE_PROFILES"])
	require.True(t, strings.HasPrefix(proj.active["COMPOSE_PROJECT_NAME"], "kece-node-"))

	// The compose node.env leaves paths to compose.yaml (they must follow the mount).
	ne := mustEnv(t, composeNodeEnv)
	for _, k := range []string{"KECE_CREDENTIAL_FILE", "KECE_WORKSPACE", "KECE_CACHE_DIR"} {
		require.NotContains(t, ne.names(), k, "%s: %s is set by compose.yaml from KECE_NODE_DIR", composeNodeEnv, k)
	}
}

func TestComposeControlDev(t *testing.T) {
	t.Parallel()
	c := loadCompose(t, composeControl)
	db, ctl := service(t, c, "mariadb"), service(t, c, "control")
	require.True(t, strings.HasPrefix(fmt.Sprint(db["image"]), "mariadb:"), "dev control plane runs on MariaDB")
	require.Empty(t, db["ports"], "the dev database is not published")
	require.Equal(t, "service_healthy", asMap(t, asMap(t, ctl["depends_on"], "depends_on")["mariadb"], "depends_on.mariadb")["condition"])
	reads := binaryEnv(t, "kece-control")
	env := serviceEnv(t, c, "control")
	for k := range env {
		require.True(t, reads[k], "%s sets %s, which kece-control does not read", composeControl, k)
	}
	require.Contains(t, env["KECE_MYSQL_DSN"], "@tcp(mariadb:3306)/")
	dbEnv := serviceEnv(t, c, "mariadb")
	require.Contains(t, env["KECE_MYSQL_DSN"], dbEnv["MARIADB_USER"]+":"+dbEnv["MARIADB_PASSWORD"]+"@")
	require.True(t, strings.HasSuffix(env["KECE_MYSQL_DSN"], "/"+dbEnv["MARIADB_DATABASE"]))
	require.Equal(t, "1", env["KECE_MIGRATE"])
	for _, p := range strList(ctl["ports"]) {
		require.True(t, strings.HasPrefix(p, "127.0.0.1:"), "dev ports bind to loopback only: %s", p)
	}
	require.Contains(t, bindOrVolumeTargets(t, c, "control"), env["KECE_ARTIFACT_DIR"], "artifacts live on a volume")
}

// composeCLIs are the Compose implementations installed here: Debian's
// docker-compose 1.29 and the docker compose v2 plugin. The project files
// must be accepted by both.
func composeCLIs(t *testing.T) [][]string {
	t.Helper()
	var clis [][]string
	if exec.Command("docker-compose", "version").Run() == nil {
		clis = append(clis, []string{"docker-compose"})
	}
	if exec.Command("docker", "compose", "version").Run() == nil {
		clis = append(clis, []string{"docker", "compose"})
	}
	return clis
}

// TestComposeConfig lets Compose itself validate both projects, with each
// Compose installed (CI installs docker-compose 1.29: required there).
func TestComposeConfig(t *testing.T) {
	t.Parallel()
	clis := composeCLIs(t)
	if len(clis) == 0 {
		if os.Getenv("KECE_REQUIRE_DOCKER") == "1" {
			t.Fatal("KECE_REQUIRE_DOCKER=1 but neither docker-compose nor the docker compose plugin is installed (apt-get install docker-compose)")
		}
		t.Skip("no Compose installed (apt-get install docker-compose)")
	}
	dir := t.TempDir()
	for _, f := range []string{"compose.yaml", "node.env.example", "project.env.example"} {
		data, err := os.ReadFile(repo("deploy/compose/node/" + f))
		require.NoError(t, err)
		dst := strings.NewReplacer("node.env.example", "node.env", "project.env.example", ".env").Replace(f)
		require.NoError(t, os.WriteFile(filepath.Join(dir, dst), data, 0o644))
	}
	for _, cli := range clis {
		for _, profile := range []string{"code", "sql"} {
			args := append(cli[1:], "--project-directory", dir, "-f", filepath.Join(dir, "compose.yaml"), "--profile", profile, "config", "-q")
			out, err := exec.Command(cli[0], args...).CombinedOutput()
			require.NoError(t, err, "%s %s: %s", cli[0], strings.Join(args, " "), out)
		}
		for _, f := range []string{composeControl, "deploy/compose/quickstart/compose.yaml"} {
			args := append(cli[1:], "-f", repo(f), "config", "-q")
			cmd := exec.Command(cli[0], args...)
			cmd.Env = append(os.Environ(), "KECE_MARIADB_IMAGE=kece/mariadb:check")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s %s: %s", cli[0], strings.Join(args, " "), out)
		}
	}
}
