package deploy

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEnvExamplesParse(t *testing.T) {
	t.Parallel()
	paths := []string{controlEnv, nodeCppEnv, nodeMySQLEnv, composeNodeEnv, composeProjEnv}
	// The node engineer's example (deploy/node) must parse the same way.
	extra, err := filepath.Glob(repo("deploy/node/*.example"))
	require.NoError(t, err)
	for _, p := range extra {
		rel, err := filepath.Rel(root, p)
		require.NoError(t, err)
		paths = append(paths, filepath.ToSlash(rel))
	}
	for _, p := range paths {
		e := mustEnv(t, p)
		require.NotEmpty(t, e.active, "%s sets nothing", p)
	}

	// The parser itself refuses what systemd and Compose would read apart.
	dir := t.TempDir()
	for _, bad := range []string{`K="v"`, "K = v", "K=v # note", "K=v\nK=w", "lower=v", "#note without space"} {
		p := filepath.Join(dir, "bad.env")
		require.NoError(t, os.WriteFile(p, []byte(bad+"\n"), 0o600))
		_, err := parseEnv(p)
		require.Error(t, err, "%q", bad)
	}
}

func TestControlEnvMatchesBinary(t *testing.T) {
	t.Parallel()
	reads := binaryEnv(t, "kece-control")
	e := mustEnv(t, controlEnv)
	for k := range e.names() {
		require.True(t, reads[k], "%s names %s, which kece-control does not read", controlEnv, k)
	}
	var undocumented []string
	for _, k := range sortedKeys(reads) {
		if !e.names()[k] {
			undocumented = append(undocumented, k)
		}
	}
	require.Empty(t, undocumented, "kece-control reads these but %s does not document them", controlEnv)
	for _, k := range []string{"KECE_ARTIFACT_DIR", "KECE_LISTEN"} {
		require.NotEmpty(t, e.active[k], "%s must set %s (no usable default)", controlEnv, k)
	}
	require.True(t, e.active["KECE_MYSQL_DSN"] != "" || e.active["KECE_MYSQL_DSN_FILE"] != "",
		"%s must set KECE_MYSQL_DSN_FILE or KECE_MYSQL_DSN (no usable default)", controlEnv)
	// The migrate step runs in ExecStartPre; serve must not migrate too.
	require.NotContains(t, e.active, "KECE_MIGRATE")
}

func TestNodeEnvMatchesBinary(t *testing.T) {
	t.Parallel()
	reads := binaryEnv(t, "kece-node")
	cpp, sql, comp := mustEnv(t, nodeCppEnv), mustEnv(t, nodeMySQLEnv), mustEnv(t, composeNodeEnv)
	all := map[string]bool{}
	for p, e := range map[string]envFile{nodeCppEnv: cpp, nodeMySQLEnv: sql, composeNodeEnv: comp} {
		for k := range e.names() {
			_, ext := externalEnv[k]
			require.True(t, reads[k] || ext, "%s names %s, which kece-node does not read", p, k)
			all[k] = true
		}
	}
	// Variables the Compose file and the units set for the node.
	cf := loadCompose(t, composeNode)
	for _, svc := range []string{"code-node", "sql-node"} {
		for k := range serviceEnv(t, cf, svc) {
			require.True(t, reads[k], "%s service %s sets %s, which kece-node does not read", composeNode, svc, k)
			all[k] = true
		}
	}
	for _, u := range []string{nodeCodeUnit, nodeSQLUnit} {
		for _, kv := range parseUnit(t, u).get("Service", "Environment") {
			k, _, _ := strings.Cut(kv, "=")
			require.True(t, reads[k], "%s sets %s, which kece-node does not read", u, k)
			all[k] = true
		}
	}
	for _, k := range sortedKeys(reads) {
		require.True(t, all[k], "kece-node reads %s but no node example documents it", k)
	}
	// Each systemd example documents every variable its kind of pool can use.
	sqlUnitEnv := map[string]bool{}
	for _, kv := range parseUnit(t, nodeSQLUnit).get("Service", "Environment") {
		k, _, _ := strings.Cut(kv, "=")
		sqlUnitEnv[k] = true
	}
	for _, k := range sortedKeys(reads) {
		if !sqlOnlyEnv[k] {
			require.True(t, cpp.names()[k], "kece-node reads %s: document it in %s (or list it in sqlOnlyEnv)", k, nodeCppEnv)
		}
		if !codeOnlyEnv[k] {
			require.True(t, sql.names()[k] || sqlUnitEnv[k], "kece-node reads %s: document it in %s (or list it in codeOnlyEnv)", k, nodeMySQLEnv)
		}
	}

	// What each pool needs is set, and only what it needs.
	required := []string{"KECE_POOL", "KECE_CONTROL_URL", "KECE_CREDENTIAL_FILE", "KECE_LOCAL_SLOTS", "KECE_CACHE_DIR"}
	for _, k := range required {
		require.NotEmpty(t, cpp.active[k], "%s must set %s", nodeCppEnv, k)
		require.NotEmpty(t, sql.active[k], "%s must set %s", nodeMySQLEnv, k)
	}
	// Sandboxes need a host work area and the static supervisor; SQL jobs neither.
	for _, k := range []string{"KECE_WORKSPACE", "KECE_SUPERVISOR"} {
		require.NotEmpty(t, cpp.active[k], "%s must set %s", nodeCppEnv, k)
		require.NotContains(t, sql.names(), k, "%s: %s is for code pools", nodeMySQLEnv, k)
	}
	for _, k := range []string{"KECE_POOL", "KECE_CONTROL_URL", "KECE_LOCAL_SLOTS"} {
		require.NotEmpty(t, comp.active[k], "%s must set %s", composeNodeEnv, k)
	}
	require.Equal(t, "cpp", cpp.active["KECE_POOL"])
	require.Equal(t, "mysql", sql.active["KECE_POOL"])
	require.NotContains(t, cpp.names(), "KECE_JUDGE_MYSQL_DSN_FILE", "a code pool never loads SQL credentials")
	require.NotContains(t, sql.names(), "DOCKER_HOST", "the mysql pool has no Docker")
	require.True(t, reads["KECE_JUDGE_MYSQL_DSN_FILE"], "kece-node must read the judge DSN from a file")
	for _, e := range []envFile{cpp, sql} {
		n, err := strconv.Atoi(e.active["KECE_LOCAL_SLOTS"])
		require.NoError(t, err)
		require.Positive(t, n)
		for _, k := range []string{"KECE_CREDENTIAL_FILE", "KECE_CACHE_DIR"} {
			require.True(t, filepath.IsAbs(e.active[k]), "%s must be absolute", k)
		}
		require.Empty(t, e.active["KECE_JOIN_CODE"], "an example never carries a join code")
	}
	// Systemd examples keep state where the units' StateDirectory and
	// CacheDirectory make it writable under ProtectSystem=strict.
	require.True(t, strings.HasPrefix(cpp.active["KECE_CREDENTIAL_FILE"], "/var/lib/kece/node-cpp-01/"))
	require.True(t, strings.HasPrefix(cpp.active["KECE_WORKSPACE"], "/var/lib/kece/node-cpp-01/"))
	require.True(t, strings.HasPrefix(cpp.active["KECE_CACHE_DIR"], "/var/lib/kece/node-cpp-01/"))
	require.True(t, strings.HasPrefix(sql.active["KECE_CREDENTIAL_FILE"], "/var/lib/kece/node-mysql-01/"))
	require.True(t, strings.HasPrefix(sql.active["KECE_CACHE_DIR"], "/var/lib/kece/node-mysql-01/"))
}
