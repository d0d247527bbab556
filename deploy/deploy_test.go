package deploy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code"
	"github.com/kece-oj/kece/worker"
)

// root is the repository root; tests run in deploy/.
const root = ".."

func repo(p string) string { return filepath.Join(root, filepath.FromSlash(p)) }

// Files this test keeps consistent.
var (
	controlEnv      = "deploy/control/control.env.example"
	nodeCppEnv      = "deploy/systemd/node-cpp-01.env.example"
	nodeMySQLEnv    = "deploy/systemd/node-mysql-01.env.example"
	composeNodeEnv  = "deploy/compose/node/node.env.example"
	composeProjEnv  = "deploy/compose/node/project.env.example"
	composeNode     = "deploy/compose/node/compose.yaml"
	composeControl  = "deploy/compose/control-dev/compose.yaml"
	controlUnit     = "deploy/systemd/kece-control.service"
	nodeCodeUnit    = "deploy/systemd/kece-node@.service"
	nodeSQLUnit     = "deploy/systemd/kece-node-sql@.service"
	nginxConf       = "deploy/nginx/kece-control.conf"
	controlDocker   = "deploy/docker/control.Dockerfile"
	nodeDocker      = "deploy/docker/node.Dockerfile"
	operationsGuide = "docs/operations.md"
	deployReadme    = "deploy/README.md"
)

// externalEnv are variables the examples may name that a library, not our
// code, reads.
var externalEnv = map[string]string{
	"DOCKER_HOST": "read by the Docker SDK (client.FromEnv) when KECE_DOCKER_HOST is unset",
}

// Node variables that only one kind of pool reads.
var (
	codeOnlyEnv = map[string]bool{"KECE_WORKSPACE": true, "KECE_SUPERVISOR": true, "KECE_RUNTIME_IMAGE": true,
		"KECE_SECCOMP_PROFILE": true, "KECE_DOCKER_HOST": true}
	sqlOnlyEnv = map[string]bool{"KECE_JUDGE_MYSQL_DSN_FILE": true, "KECE_CONTROL_DB_IDENTITY": true}
)

// ---- environment examples ---------------------------------------------------

// envFile is a parsed KEY=VALUE example: active assignments and commented
// ones ("#KEY=VALUE", no space after '#': an optional setting with its default).
type envFile struct {
	active    map[string]string
	commented map[string]string
}

func (e envFile) names() map[string]bool {
	out := map[string]bool{}
	for k := range e.active {
		out[k] = true
	}
	for k := range e.commented {
		out[k] = true
	}
	return out
}

var (
	envKeyRE       = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	commentedEnvRE = regexp.MustCompile(`^#([A-Z][A-Z0-9_]*)=(.*)$`)
)

// parseEnv reads a file both systemd's EnvironmentFile= and Compose's
// env_file/.env read the same way: no quotes, no spaces around '=', no
// trailing comments, no duplicates.
func parseEnv(path string) (envFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return envFile{}, err
	}
	e := envFile{active: map[string]string{}, commented: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "# ") || line == "#" {
			continue
		}
		target := e.active
		if m := commentedEnvRE.FindStringSubmatch(line); m != nil {
			target, line = e.commented, line[1:]
		} else if strings.HasPrefix(line, "#") {
			return e, fmt.Errorf("%s:%d: a comment starts with \"# \"; a commented setting is \"#KEY=VALUE\": %q", path, n, line)
		}
		k, v, ok := strings.Cut(line, "=")
		switch {
		case !ok || !envKeyRE.MatchString(k):
			return e, fmt.Errorf("%s:%d: not KEY=VALUE: %q", path, n, line)
		case strings.ContainsAny(v, `"'`):
			return e, fmt.Errorf("%s:%d: %s: no quotes (systemd and Compose read them differently)", path, n, k)
		case strings.HasPrefix(v, " ") || strings.HasSuffix(v, " ") || strings.Contains(v, " #"):
			return e, fmt.Errorf("%s:%d: %s: no spaces around the value and no trailing comment", path, n, k)
		}
		if _, dup := e.active[k]; dup {
			return e, fmt.Errorf("%s:%d: %s set twice", path, n, k)
		}
		if _, dup := e.commented[k]; dup {
			return e, fmt.Errorf("%s:%d: %s named twice", path, n, k)
		}
		target[k] = v
	}
	return e, sc.Err()
}

func mustEnv(t *testing.T, p string) envFile {
	t.Helper()
	e, err := parseEnv(repo(p))
	require.NoError(t, err)
	return e
}

// binaryEnv returns the KECE_* variables a command reads: string literals
// passed to a call (os.Getenv, os.LookupEnv or a helper such as envOr) or
// declared as a constant/variable, in the non-test Go files of cmd/<name>.
func binaryEnv(t *testing.T, name string) map[string]bool {
	t.Helper()
	dir := repo("cmd/" + name)
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "%s has no Go files: the binary the deploy files configure is missing", dir)
	lit := regexp.MustCompile(`^KECE_[A-Z0-9_]+$`)
	out := map[string]bool{}
	readsEnv := false
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		add := func(e ast.Expr) {
			if bl, ok := e.(*ast.BasicLit); ok && bl.Kind == token.STRING {
				if s, err := strconv.Unquote(bl.Value); err == nil && lit.MatchString(s) {
					out[s] = true
				}
			}
		}
		ast.Inspect(af, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				// Called, or handed to a settings loader as its getenv.
				if id, ok := n.X.(*ast.Ident); ok && id.Name == "os" && (n.Sel.Name == "Getenv" || n.Sel.Name == "LookupEnv" || n.Sel.Name == "Environ") {
					readsEnv = true
				}
			case *ast.CallExpr:
				for _, a := range n.Args {
					add(a)
				}
			case *ast.ValueSpec:
				for _, v := range n.Values {
					add(v)
				}
			case *ast.KeyValueExpr:
				add(n.Value)
			}
			return true
		})
	}
	require.True(t, readsEnv, "cmd/%s never calls os.Getenv/LookupEnv", name)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

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
	for _, k := range sortedKeys(reads) {
		require.True(t, e.names()[k], "kece-control reads %s but %s does not document it", k, controlEnv)
	}
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

// ---- systemd ----------------------------------------------------------------

type unitFile struct {
	path     string
	sections map[string]map[string][]string
}

func (u unitFile) get(section, key string) []string { return u.sections[section][key] }

func (u unitFile) one(t *testing.T, section, key string) string {
	t.Helper()
	v := u.get(section, key)
	require.Len(t, v, 1, "%s: [%s] %s", u.path, section, key)
	return v[0]
}

func parseUnit(t *testing.T, p string) unitFile {
	t.Helper()
	data, err := os.ReadFile(repo(p))
	require.NoError(t, err)
	u := unitFile{path: p, sections: map[string]map[string][]string{}}
	var sec string
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(lines[i])
		}
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			require.True(t, strings.HasSuffix(line, "]"), "%s: bad section %q", p, line)
			sec = line[1 : len(line)-1]
			require.NotContains(t, u.sections, sec, "%s: section %s twice", p, sec)
			u.sections[sec] = map[string][]string{}
		default:
			require.NotEmpty(t, sec, "%s: key outside a section: %q", p, line)
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok, "%s: not Key=Value: %q", p, line)
			k = strings.TrimSpace(k)
			u.sections[sec][k] = append(u.sections[sec][k], strings.TrimSpace(v))
		}
	}
	return u
}

// systemdDuration parses the time spans the units use ("6min", "30s", "1h 5min").
func systemdDuration(s string) (time.Duration, error) {
	units := map[string]time.Duration{"": time.Second, "us": time.Microsecond, "ms": time.Millisecond,
		"s": time.Second, "sec": time.Second, "m": time.Minute, "min": time.Minute, "h": time.Hour, "hr": time.Hour}
	var total time.Duration
	re := regexp.MustCompile(`^(\d+)([a-z]*)$`)
	for _, f := range strings.Fields(s) {
		m := re.FindStringSubmatch(f)
		if m == nil {
			return 0, fmt.Errorf("time span %q", s)
		}
		u, ok := units[m[2]]
		if !ok {
			return 0, fmt.Errorf("time unit %q in %q", m[2], s)
		}
		n, _ := strconv.Atoi(m[1])
		total += time.Duration(n) * u
	}
	return total, nil
}

// stopBound is the least time a node needs to stop cleanly: its drain grace
// (--drain-grace where a unit or the Compose file passes it, else the
// default) plus cleanup.
func stopBound(t *testing.T) time.Duration {
	t.Helper()
	grace := worker.DrainGraceDefault
	var cmds []string
	for _, u := range []string{nodeCodeUnit, nodeSQLUnit} {
		cmds = append(cmds, parseUnit(t, u).get("Service", "ExecStart")...)
	}
	c := loadCompose(t, composeNode)
	for _, svc := range []string{"code-node", "sql-node"} {
		cmds = append(cmds, strings.Join(strList(service(t, c, svc)["command"]), " "))
	}
	re := regexp.MustCompile(`--?drain-grace[= ](\S+)`)
	for _, cmd := range cmds {
		if m := re.FindStringSubmatch(cmd); m != nil {
			d, err := time.ParseDuration(m[1])
			require.NoError(t, err, "--drain-grace in %q", cmd)
			grace = max(grace, d)
		}
	}
	return grace + worker.CleanupTimeoutDefault
}

func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	hardening := map[string]string{"NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes",
		"ProtectHome": "yes", "Restart": "on-failure"}
	common := func(u unitFile) {
		require.NotEmpty(t, u.one(t, "Unit", "Description"))
		require.Equal(t, "multi-user.target", u.one(t, "Install", "WantedBy"), u.path)
		for k, v := range hardening {
			require.Equal(t, v, u.one(t, "Service", k), "%s %s", u.path, k)
		}
		user := u.one(t, "Service", "User")
		require.NotContains(t, []string{"", "root", "0", "nobody"}, user, "%s needs a dedicated user", u.path)
		require.NotContains(t, u.sections["Service"], "DynamicUser", "%s: a dedicated, stable user owns the state", u.path)
		rs, err := systemdDuration(u.one(t, "Service", "RestartSec"))
		require.NoError(t, err)
		require.GreaterOrEqual(t, rs, time.Second, "%s restarts too fast", u.path)
		require.Contains(t, u.one(t, "Service", "RestartPreventExitStatus"), "2", "%s: a settings mistake (exit 2) must not loop", u.path)
	}

	ctl := parseUnit(t, controlUnit)
	common(ctl)
	require.Equal(t, "/etc/kece/control.env", ctl.one(t, "Service", "EnvironmentFile"))
	require.Equal(t, "/usr/local/bin/kece-control migrate up", ctl.one(t, "Service", "ExecStartPre"))
	require.Equal(t, "/usr/local/bin/kece-control serve", ctl.one(t, "Service", "ExecStart"))
	require.Equal(t, mustEnv(t, controlEnv).active["KECE_ARTIFACT_DIR"], ctl.one(t, "Service", "ReadWritePaths"),
		"the only writable path is the example's artifact directory")
	require.Empty(t, ctl.one(t, "Service", "CapabilityBoundingSet"))
	stop, err := systemdDuration(ctl.one(t, "Service", "TimeoutStopSec"))
	require.NoError(t, err)
	require.Greater(t, stop, 20*time.Second, "kece-control gives in-flight requests 20s on shutdown")

	bound := stopBound(t)
	code, sql := parseUnit(t, nodeCodeUnit), parseUnit(t, nodeSQLUnit)
	for _, u := range []unitFile{code, sql} {
		common(u)
		require.Equal(t, "/etc/kece/node-%i.env", u.one(t, "Service", "EnvironmentFile"))
		require.Equal(t, "/usr/local/bin/kece-node", u.one(t, "Service", "ExecStart"))
		require.Equal(t, "SIGTERM", u.one(t, "Service", "KillSignal"))
		stop, err := systemdDuration(u.one(t, "Service", "TimeoutStopSec"))
		require.NoError(t, err)
		require.Greater(t, stop, bound, "%s: TimeoutStopSec must exceed drain grace + cleanup", u.path)
		require.Equal(t, "kece/node-%i", u.one(t, "Service", "StateDirectory"))
		require.NotContains(t, u.sections["Service"], "CacheDirectory", "%s: cache and workspace share one mount (hard links)", u.path)
		require.Contains(t, u.one(t, "Service", "ExecStartPre"), "KECE_POOL", "%s checks the pool fits the template", u.path)
	}
	require.Equal(t, "docker", code.one(t, "Service", "SupplementaryGroups"))
	require.Contains(t, code.one(t, "Unit", "Conflicts"), "kece-node-sql@%i.service")
	require.Contains(t, sql.one(t, "Unit", "Conflicts"), "kece-node@%i.service")
	require.NotContains(t, sql.sections["Service"], "SupplementaryGroups", "the mysql pool has no Docker socket")
	require.NotContains(t, strings.Join(sql.get("Unit", "Wants"), " "), "docker")
	hidden := strings.Fields(sql.one(t, "Service", "InaccessiblePaths"))
	require.Contains(t, hidden, "-/run/docker.sock")
	require.Contains(t, hidden, "-/var/run/docker.sock")
	require.Empty(t, sql.one(t, "Service", "CapabilityBoundingSet"))
	require.Equal(t, "KECE_JUDGE_MYSQL_DSN_FILE=%d/judge-dsn", sql.one(t, "Service", "Environment"))
	require.Equal(t, "judge-dsn:/etc/kece/node-%i.judge-dsn", sql.one(t, "Service", "LoadCredential"))
	// The code template's capabilities are exactly what per-job uids need.
	caps := strings.Fields(code.one(t, "Service", "AmbientCapabilities"))
	require.ElementsMatch(t, []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE"}, caps)
	require.Equal(t, "0022", code.one(t, "Service", "UMask"), "sandbox uids must read what the engine writes")
	require.ElementsMatch(t, caps, strings.Fields(code.one(t, "Service", "CapabilityBoundingSet")))
	// ExecStartPre guards really refuse the wrong pool.
	for _, c := range []struct {
		u    unitFile
		pool string
		ok   bool
	}{{code, "cpp", true}, {code, "arkts", true}, {code, "mysql", false}, {code, "", false},
		{sql, "mysql", true}, {sql, "cpp", false}, {sql, "", false}} {
		cmd := c.u.one(t, "Service", "ExecStartPre")
		require.True(t, strings.HasPrefix(cmd, "/bin/sh -c '") && strings.HasSuffix(cmd, "'"), cmd)
		script := strings.NewReplacer("$$", "$", "%i", "x").Replace(cmd[len("/bin/sh -c '") : len(cmd)-1])
		out, err := runWithEnv(t, []string{"KECE_POOL=" + c.pool}, "/bin/sh", "-c", script)
		require.Equal(t, c.ok, err == nil, "%s with KECE_POOL=%q: %v %s", c.u.path, c.pool, err, out)
	}
}

func runWithEnv(t *testing.T, env []string, name string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	return cmd.CombinedOutput()
}

// TestSystemdAnalyzeVerify runs systemd's own checker when it is installed
// (optional tooling: skipped otherwise). Binaries are replaced by stubs so
// it can check the rest; any warning fails.
func TestSystemdAnalyzeVerify(t *testing.T) {
	t.Parallel()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	for _, b := range []string{"kece-control", "kece-node"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, b), []byte("#!/bin/sh\n"), 0o755))
	}
	for _, u := range []string{controlUnit, nodeCodeUnit, nodeSQLUnit} {
		data, err := os.ReadFile(repo(u))
		require.NoError(t, err)
		data = bytes.ReplaceAll(data, []byte("/usr/local/bin/"), []byte(bin+"/"))
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(u)), data, 0o644))
	}
	// Exposure thresholds are systemd's score x10 (0 best, 100 worst): the
	// code template pays for chown capabilities and the docker group.
	for name, threshold := range map[string]string{"kece-control.service": "20",
		"kece-node@cpp-01.service": "25", "kece-node-sql@mysql-01.service": "20"} {
		cmd := exec.Command(sa, "verify", "./"+name)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "systemd-analyze verify %s: %s", name, out)
		require.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify %s warns", name)
		cmd = exec.Command(sa, "security", "--offline=true", "--threshold="+threshold, "./"+name)
		cmd.Dir = dir
		out, err = cmd.CombinedOutput()
		require.NoError(t, err, "systemd-analyze security %s above %s:\n%s", name, threshold, out)
	}
	// The check is live: a broken copy is reported.
	bad := filepath.Join(dir, "kece-broken.service")
	data, err := os.ReadFile(filepath.Join(dir, "kece-control.service"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bad, bytes.Replace(data, []byte("TimeoutStopSec=30s"), []byte("TimeoutStopSec=banana"), 1), 0o644))
	cmd := exec.Command(sa, "verify", "./kece-broken.service")
	cmd.Dir = dir
	out, _ := cmd.CombinedOutput()
	require.Contains(t, string(out), "banana")
}

// ---- compose ----------------------------------------------------------------

// composeFile is a plain mapping: yaml.v3 gives nested mappings the type of
// the outermost one, so a named map type would leak into every level.
type composeFile = map[string]any

func loadCompose(t *testing.T, p string) composeFile {
	t.Helper()
	data, err := os.ReadFile(repo(p))
	require.NoError(t, err)
	var c composeFile
	require.NoError(t, yaml.Unmarshal(data, &c), p)
	return c
}

func asMap(t *testing.T, v any, what string) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	require.True(t, ok, "%s is not a mapping: %T", what, v)
	return m
}

func service(t *testing.T, c composeFile, name string) map[string]any {
	t.Helper()
	return asMap(t, asMap(t, c["services"], "services")[name], "service "+name)
}

func serviceEnv(t *testing.T, c composeFile, name string) map[string]string {
	t.Helper()
	out := map[string]string{}
	env, ok := service(t, c, name)["environment"]
	if !ok {
		return out
	}
	for k, v := range asMap(t, env, name+".environment") {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// bindSources returns source -> target of a service's bind mounts.
func bindSources(t *testing.T, c composeFile, name string) map[string]string {
	t.Helper()
	out := map[string]string{}
	vols, _ := service(t, c, name)["volumes"].([]any)
	for _, v := range vols {
		switch v := v.(type) {
		case string:
			parts := strings.Split(v, ":")
			out[parts[0]] = parts[1]
		case map[string]any:
			if v["type"] == "bind" {
				out[fmt.Sprint(v["source"])] = fmt.Sprint(v["target"])
			}
		}
	}
	return out
}

func strList(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

var composeVarRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:?[-?][^}]*)?\}`)

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

func bindOrVolumeTargets(t *testing.T, c composeFile, name string) []string {
	t.Helper()
	var out []string
	vols, _ := service(t, c, name)["volumes"].([]any)
	for _, v := range vols {
		switch v := v.(type) {
		case string:
			parts := strings.Split(v, ":")
			out = append(out, parts[1])
		case map[string]any:
			out = append(out, fmt.Sprint(v["target"]))
		}
	}
	return out
}

// TestComposeConfig lets Compose itself validate both projects when the
// plugin is installed (optional tooling: skipped otherwise).
func TestComposeConfig(t *testing.T) {
	t.Parallel()
	if err := exec.Command("docker", "compose", "version").Run(); err != nil {
		t.Skip("docker compose plugin not installed")
	}
	dir := t.TempDir()
	for _, f := range []string{"compose.yaml", "node.env.example", "project.env.example"} {
		data, err := os.ReadFile(repo("deploy/compose/node/" + f))
		require.NoError(t, err)
		dst := strings.NewReplacer("node.env.example", "node.env", "project.env.example", ".env").Replace(f)
		require.NoError(t, os.WriteFile(filepath.Join(dir, dst), data, 0o644))
	}
	for _, args := range [][]string{
		{"compose", "--project-directory", dir, "-f", filepath.Join(dir, "compose.yaml"), "config", "-q"},
		{"compose", "-f", repo(composeControl), "config", "-q"},
	} {
		out, err := exec.Command("docker", args...).CombinedOutput()
		require.NoError(t, err, "docker %s: %s", strings.Join(args, " "), out)
	}
}

// ---- nginx ------------------------------------------------------------------

type ngxDirective struct {
	name  string
	args  []string
	block []*ngxDirective
}

func (d *ngxDirective) find(name string) []*ngxDirective {
	var out []*ngxDirective
	for _, c := range d.block {
		if c.name == name {
			out = append(out, c)
		}
	}
	return out
}

func (d *ngxDirective) value(name string) string {
	v := d.find(name)
	if len(v) == 0 {
		return ""
	}
	return strings.Join(v[0].args, " ")
}

func ngxTokens(src string) ([]string, error) {
	var toks []string
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '{' || c == '}' || c == ';':
			toks = append(toks, string(c))
			i++
		case c == '"' || c == '\'':
			j := strings.IndexByte(src[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated quote at byte %d", i)
			}
			toks = append(toks, src[i+1:i+1+j])
			i += j + 2
		default:
			j := i
			for j < len(src) && !strings.ContainsRune(" \t\r\n{};", rune(src[j])) {
				j++
			}
			toks = append(toks, src[i:j])
			i = j
		}
	}
	return toks, nil
}

func ngxParse(toks []string, pos int, top bool) ([]*ngxDirective, int, error) {
	var out []*ngxDirective
	var cur []string
	for pos < len(toks) {
		tok := toks[pos]
		pos++
		switch tok {
		case ";":
			if len(cur) == 0 {
				return nil, pos, fmt.Errorf("empty directive")
			}
			out = append(out, &ngxDirective{name: cur[0], args: cur[1:]})
			cur = nil
		case "{":
			if len(cur) == 0 {
				return nil, pos, fmt.Errorf("block without a name")
			}
			d := &ngxDirective{name: cur[0], args: cur[1:]}
			var err error
			d.block, pos, err = ngxParse(toks, pos, false)
			if err != nil {
				return nil, pos, err
			}
			out = append(out, d)
			cur = nil
		case "}":
			if top || len(cur) != 0 {
				return nil, pos, fmt.Errorf("unexpected }")
			}
			return out, pos, nil
		default:
			cur = append(cur, tok)
		}
	}
	if !top || len(cur) != 0 {
		return nil, pos, fmt.Errorf("unexpected end of file")
	}
	return out, pos, nil
}

func loadNginx(t *testing.T) *ngxDirective {
	t.Helper()
	data, err := os.ReadFile(repo(nginxConf))
	require.NoError(t, err)
	toks, err := ngxTokens(string(data))
	require.NoError(t, err)
	block, _, err := ngxParse(toks, 0, true)
	require.NoError(t, err)
	return &ngxDirective{name: "http", block: block}
}

func ngxSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
		mult = 1 << 10
	case strings.HasSuffix(s, "m"), strings.HasSuffix(s, "M"):
		mult = 1 << 20
	case strings.HasSuffix(s, "g"), strings.HasSuffix(s, "G"):
		mult = 1 << 30
	}
	n, err := strconv.ParseInt(strings.TrimRight(s, "kKmMgG"), 10, 64)
	return n * mult, err
}

// ngxRoute picks the location nginx would use for uri: exact match, then the
// longest prefix (final if "^~"), then the first matching regex, else the
// longest prefix.
func ngxRoute(t *testing.T, srv *ngxDirective, uri string) *ngxDirective {
	t.Helper()
	var best *ngxDirective
	bestLen := -1
	for _, l := range srv.find("location") {
		switch {
		case len(l.args) == 2 && l.args[0] == "=":
			if l.args[1] == uri {
				return l
			}
		case len(l.args) == 1 && strings.HasPrefix(uri, l.args[0]) && len(l.args[0]) > bestLen:
			best, bestLen = l, len(l.args[0])
		case len(l.args) == 2 && l.args[0] == "^~" && strings.HasPrefix(uri, l.args[1]) && len(l.args[1]) > bestLen:
			best, bestLen = l, len(l.args[1])
		}
	}
	if best != nil && best.args[0] == "^~" {
		return best
	}
	for _, l := range srv.find("location") {
		if len(l.args) == 2 && (l.args[0] == "~" || l.args[0] == "~*") {
			expr := l.args[1]
			if l.args[0] == "~*" {
				expr = "(?i)" + expr
			}
			if regexp.MustCompile(expr).MatchString(uri) {
				return l
			}
		}
	}
	require.NotNil(t, best, "no location for %s", uri)
	return best
}

// gate returns the geo variable a location refuses requests by (403), or "".
func gate(l *ngxDirective) string {
	for _, d := range l.find("if") {
		cond := strings.Join(d.args, " ")
		if strings.HasSuffix(cond, "= 0)") && d.value("return") == "403" {
			return strings.Fields(strings.TrimPrefix(cond, "("))[0]
		}
	}
	return ""
}

func TestNginx(t *testing.T) {
	t.Parallel()
	http := loadNginx(t)
	geos := map[string]*ngxDirective{}
	for _, g := range http.find("geo") {
		geos[g.args[0]] = g
	}
	for _, v := range []string{"$kece_judge_net", "$kece_admin_net", "$kece_business_net"} {
		g := geos[v]
		require.NotNil(t, g, "geo %s", v)
		require.Equal(t, "0", g.value("default"), "%s denies by default", v)
		require.NotEmpty(t, networks(g), "%s lists at least one network", v)
	}
	ups := http.find("upstream")
	require.Len(t, ups, 1)
	require.NotEmpty(t, ups[0].find("server"))
	require.Equal(t, "kece_control", ups[0].args[0])

	servers := http.find("server")
	require.Len(t, servers, 1, "one TLS server, no plain-HTTP listener")
	srv := servers[0]
	for _, l := range srv.find("listen") {
		require.Contains(t, l.args, "ssl", "every listener terminates TLS")
	}
	require.NotEmpty(t, srv.value("ssl_certificate"))
	require.NotEmpty(t, srv.value("ssl_certificate_key"))
	require.NotContains(t, srv.value("ssl_protocols"), "TLSv1.1")
	def, err := ngxSize(srv.value("client_max_body_size"))
	require.NoError(t, err)
	require.Equal(t, int64(httpapi.MaxBodyBytesDefault), def, "server-wide body limit = the API's 8 MiB bound")

	sha := strings.Repeat("ab", 32)
	cases := []struct {
		uri      string
		gate     string // geo variable; "" = public
		maxBody  int64
		stream   bool // proxy_buffering off
		longPoll bool
		notFound bool
	}{
		{uri: "/api/v1/internal/judgers/join", gate: "$kece_judge_net", maxBody: def},
		{uri: "/api/v1/internal/judgers/session", gate: "$kece_judge_net", maxBody: def},
		{uri: "/api/v1/internal/judgers/heartbeat", gate: "$kece_judge_net", maxBody: def},
		{uri: "/api/v1/internal/judgers/jobs/claim", gate: "$kece_judge_net", maxBody: def, longPoll: true},
		{uri: "/api/v1/internal/judgers/jobs/renew", gate: "$kece_judge_net", maxBody: def},
		{uri: "/api/v1/internal/judgers/jobs/123/result", gate: "$kece_judge_net", maxBody: def},
		{uri: "/api/v1/internal/judgers/jobs/123/artifacts/" + sha, gate: "$kece_judge_net", maxBody: def, stream: true},
		{uri: "/api/v1/internal/judgers/unknown", gate: "$kece_judge_net", maxBody: def},
		{uri: "/api/v1/admin/judgers", gate: "$kece_admin_net", maxBody: def},
		{uri: "/api/v1/admin/judgers/5/verify", gate: "$kece_admin_net", maxBody: def},
		{uri: "/api/v1/admin/reconcile", gate: "$kece_admin_net", maxBody: def},
		{uri: "/api/v1/artifacts/" + sha, gate: "$kece_business_net", maxBody: artifact.StoreMaxArtifactBytesDefault},
		{uri: "/api/v1/manifests", gate: "$kece_business_net", maxBody: def},
		{uri: "/api/v1/submissions", gate: "$kece_business_net", maxBody: def},
		{uri: "/api/v1/settlement-events/claim", gate: "$kece_business_net", maxBody: def},
		{uri: "/api/v1/system/judgers/summary", gate: "", maxBody: def},
		{uri: "/openapi/business.yaml", gate: "", maxBody: def},
		{uri: "/docs/admin", gate: "", maxBody: def},
		{uri: "/metrics", notFound: true},
		{uri: "/healthz", notFound: true},
		{uri: "/", notFound: true},
	}
	for _, c := range cases {
		l := ngxRoute(t, srv, c.uri)
		where := fmt.Sprintf("%s -> location %s", c.uri, strings.Join(l.args, " "))
		if c.notFound {
			require.Equal(t, "404", l.value("return"), where)
			continue
		}
		require.Equal(t, "http://kece_control", l.value("proxy_pass"), where)
		require.Equal(t, c.gate, gate(l), where)
		body := def
		if v := l.value("client_max_body_size"); v != "" {
			body, err = ngxSize(v)
			require.NoError(t, err)
		}
		require.Equal(t, c.maxBody, body, "%s body limit", where)
		if body > def {
			require.Equal(t, "off", l.value("proxy_request_buffering"), "%s: large uploads stream to the replica", where)
		}
		require.Equal(t, c.stream, l.value("proxy_buffering") == "off", "%s proxy_buffering", where)
		if c.stream {
			require.Equal(t, "0", l.value("proxy_max_temp_file_size"), where)
		}
		read := srv.value("proxy_read_timeout")
		if v := l.value("proxy_read_timeout"); v != "" {
			read = v
		}
		d, err := time.ParseDuration(read)
		require.NoError(t, err)
		require.Greater(t, d, httpapi.ClaimWaitMaxDefault+5*time.Second, "%s: read timeout must outlast a long-poll", where)
		if c.longPoll {
			require.GreaterOrEqual(t, d, 20*time.Second, where)
			require.Equal(t, "=", l.args[0], "the claim long-poll has its own exact location")
		}
	}
	// Judge hosts must not reach admin: the example lists share no network.
	for _, n := range networks(geos["$kece_judge_net"]) {
		require.NotContains(t, networks(geos["$kece_admin_net"]), n, "a judge network may not reach admin")
	}
}

// networks lists the addresses a geo block maps to 1.
func networks(g *ngxDirective) []string {
	var out []string
	for _, d := range g.block {
		if d.name != "default" && strings.Join(d.args, " ") == "1" {
			out = append(out, d.name)
		}
	}
	return out
}

// TestNginxSyntax runs `nginx -t` on the file (wrapped in a minimal main
// config with a throwaway certificate) when nginx is installed, or when
// KECE_NGINX names its binary. Optional tooling: skipped otherwise.
func TestNginxSyntax(t *testing.T) {
	t.Parallel()
	bin := os.Getenv("KECE_NGINX")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("nginx"); err != nil {
			t.Skip("nginx not installed (set KECE_NGINX to a binary to run this check)")
		}
	}
	dir := t.TempDir()
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeSelfSigned(t, crt, key)
	data, err := os.ReadFile(repo(nginxConf))
	require.NoError(t, err)
	site := strings.NewReplacer("/etc/nginx/tls/control.example.org.crt", crt, "/etc/nginx/tls/control.example.org.key", key).Replace(string(data))
	require.NotEqual(t, string(data), site, "certificate paths in the example changed; update this test")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "site.conf"), []byte(site), 0o644))
	var main strings.Builder
	fmt.Fprintf(&main, "pid %s/nginx.pid;\nerror_log %s/error.log;\nevents {}\nhttp {\n", dir, dir)
	for _, d := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&main, "  %s_temp_path %s/%s;\n", d, dir, d)
	}
	fmt.Fprintf(&main, "  access_log off;\n  include %s/site.conf;\n}\n", dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main.String()), 0o644))
	out, err := exec.Command(bin, "-t", "-p", dir, "-c", filepath.Join(dir, "nginx.conf")).CombinedOutput()
	require.NoError(t, err, "nginx -t: %s", out)
	require.Contains(t, string(out), "test is successful")
}

func writeSelfSigned(t *testing.T, crtPath, keyPath string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "control.example.org"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"control.example.org"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(k)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(crtPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
}

// ---- Dockerfiles --------------------------------------------------------------

func TestDockerfiles(t *testing.T) {
	t.Parallel()
	buildRE := regexp.MustCompile(`go build [^\n]*?-o (\S+) \./cmd/([a-z0-9-]+)`)
	for p, want := range map[string][]string{controlDocker: {"kece-control"}, nodeDocker: {"kece-node", "kece-sandbox-init"}} {
		data, err := os.ReadFile(repo(p))
		require.NoError(t, err)
		src := strings.ReplaceAll(string(data), "\\\n", " ")
		var built []string
		for _, m := range buildRE.FindAllStringSubmatch(src, -1) {
			built = append(built, m[2])
			_, err := os.Stat(repo("cmd/" + m[2] + "/main.go"))
			require.NoError(t, err, "%s builds ./cmd/%s, which does not exist", p, m[2])
		}
		require.ElementsMatch(t, want, built, p)
		require.Contains(t, src, "CGO_ENABLED=0", "%s: static binaries (the supervisor must be static)", p)
		require.Regexp(t, `(?m)^FROM golang:\$\{GO_VERSION\}`, src)
		require.Regexp(t, `(?m)^ARG GO_VERSION=`+regexp.QuoteMeta(goVersion(t))+`$`, src, "%s: builder Go version follows go.mod", p)
		for _, m := range regexp.MustCompile(`(?m)^ENV ((?:[^\n]*\\\n)*[^\n]*)`).FindAllStringSubmatch(string(data), -1) {
			for _, kv := range strings.Fields(strings.ReplaceAll(m[1], "\\\n", " ")) {
				k, _, _ := strings.Cut(kv, "=")
				bin := strings.TrimSuffix(filepath.Base(p), ".Dockerfile")
				require.True(t, binaryEnv(t, "kece-"+bin)[k], "%s sets %s, which kece-%s does not read", p, k, bin)
			}
		}
		ign, err := os.ReadFile(repo(p + ".dockerignore"))
		require.NoError(t, err)
		require.Contains(t, string(ign), ".git")
	}
	node, err := os.ReadFile(repo(nodeDocker))
	require.NoError(t, err)
	require.Contains(t, string(node), "/usr/local/lib/kece/kece-sandbox-init")
}

func goVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(repo("go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(data)
	require.NotNil(t, m)
	return string(m[1])
}

// ---- documentation ------------------------------------------------------------

func TestDocsReferToRealFiles(t *testing.T) {
	t.Parallel()
	pathRE := regexp.MustCompile("(?:deploy|docs|cmd|scripts)/[A-Za-z0-9_.@/-]*[A-Za-z0-9_@-]")
	for _, doc := range []string{operationsGuide, deployReadme} {
		data, err := os.ReadFile(repo(doc))
		require.NoError(t, err)
		for _, p := range pathRE.FindAllString(string(data), -1) {
			if strings.Contains(p, "<") || strings.HasPrefix(p, "deploy/images/.build") {
				continue
			}
			_, err := os.Stat(repo(p))
			require.NoError(t, err, "%s mentions %s, which does not exist", doc, p)
		}
	}
	guide, err := os.ReadFile(repo(operationsGuide))
	require.NoError(t, err)
	require.Contains(t, string(guide), "never both")
	readme, err := os.ReadFile(repo(deployReadme))
	require.NoError(t, err)
	require.Contains(t, string(readme), "never both")
	// The README indexes every file this package owns.
	for _, dir := range []string{"deploy/systemd", "deploy/compose/node", "deploy/compose/control-dev", "deploy/control", "deploy/nginx", "deploy/docker"} {
		entries, err := os.ReadDir(repo(dir))
		require.NoError(t, err)
		for _, e := range entries {
			require.Contains(t, string(readme), dir+"/"+e.Name(), "%s does not list %s/%s", deployReadme, dir, e.Name())
		}
	}
}

// TestTimingsTable checks the guide's default timings against the code: the
// first table row whose first column names a setting gives its default in
// the second column.
func TestTimingsTable(t *testing.T) {
	t.Parallel()
	want := map[string]time.Duration{
		"KECE_LEASE_TTL":          store.LeaseTTLDefault,
		"KECE_REAP_INTERVAL":      httpapi.ReapIntervalDefault,
		"KECE_HEARTBEAT_INTERVAL": httpapi.HeartbeatIntervalDefault,
		"KECE_RENEW_INTERVAL":     httpapi.RenewIntervalDefault,
		"KECE_OFFLINE_AFTER":      store.OfflineAfterDefault,
		"claim wait":              httpapi.ClaimWaitMaxDefault,
		"join code":               store.JoinCodeTTLDefault,
		"backoff base":            store.BackoffBaseDefault,
		"backoff cap":             store.BackoffMaxDefault,
		"--drain-grace":           worker.DrainGraceDefault,
		"safety margin":           worker.SafetyMarginDefault,
	}
	data, err := os.ReadFile(repo(operationsGuide))
	require.NoError(t, err)
	rows := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		for name := range want {
			if _, seen := rows[name]; !seen && strings.Contains(cells[1], name) {
				rows[name] = strings.Trim(strings.TrimSpace(cells[2]), "`")
			}
		}
	}
	for _, name := range sortedKeys(want) {
		v, ok := rows[name]
		require.True(t, ok, "%s: the timings table has no row naming `%s`", operationsGuide, name)
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "%s row %s: %q", operationsGuide, name, v)
		require.Equal(t, want[name], d, "%s: default of %s", operationsGuide, name)
	}
	attempts := regexp.MustCompile("`KECE_MAX_ATTEMPTS`[^|]*\\|\\s*(\\d+)").FindStringSubmatch(string(data))
	require.NotNil(t, attempts, "timings table names `KECE_MAX_ATTEMPTS`")
	require.Equal(t, strconv.Itoa(store.MaxAttemptsDefault), attempts[1])
}

// TestNginxLive runs the proxy for real on loopback (when nginx is available,
// like TestNginxSyntax) in front of a recording upstream: judge routes pass
// from a judge network, admin routes are refused from elsewhere, bodies over
// 8 MiB are refused except artifact uploads, and unknown paths are 404.
func TestNginxLive(t *testing.T) {
	t.Parallel()
	bin := os.Getenv("KECE_NGINX")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("nginx"); err != nil {
			t.Skip("nginx not installed (set KECE_NGINX to a binary to run this check)")
		}
	}
	type seen struct {
		path string
		n    int64
	}
	got := make(chan seen, 16)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		got <- seen{r.URL.Path, n}
		fmt.Fprintf(w, "upstream %s %d", r.URL.Path, n)
	}))
	t.Cleanup(up.Close)

	dir := t.TempDir()
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeSelfSigned(t, crt, key)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	data, err := os.ReadFile(repo(nginxConf))
	require.NoError(t, err)
	site := string(data)
	for old, repl := range map[string]string{
		"/etc/nginx/tls/control.example.org.crt":                     crt,
		"/etc/nginx/tls/control.example.org.key":                     key,
		"    server 10.10.0.11:8080;\n    server 10.10.0.12:8080;\n": "    server " + strings.TrimPrefix(up.URL, "http://") + ";\n",
		"    listen 443 ssl;\n    listen [::]:443 ssl;\n":            "    listen " + addr + " ssl;\n",
		// Loopback is a judge and a business network here, not an admin one.
		"    10.20.0.0/16 1;": "    127.0.0.1/32 1;",
		"    10.40.0.0/16 1;": "    127.0.0.1/32 1;",
	} {
		require.Contains(t, site, old, "the example changed; update this test")
		site = strings.Replace(site, old, repl, 1)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "site.conf"), []byte(site), 0o644))
	var main strings.Builder
	fmt.Fprintf(&main, "daemon off;\nmaster_process off;\npid %s/nginx.pid;\nerror_log %s/error.log;\nevents {}\nhttp {\n", dir, dir)
	for _, d := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&main, "  %s_temp_path %s/%s;\n", d, dir, d)
	}
	fmt.Fprintf(&main, "  access_log off;\n  include %s/site.conf;\n}\n", dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main.String()), 0o644))

	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	pool := x509.NewCertPool()
	crtPEM, err := os.ReadFile(crt)
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(crtPEM))
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "control.example.org"}}}
	base := "https://" + addr

	// Wait until nginx accepts connections (or report why it exited).
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("nginx exited: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}

	sha := strings.Repeat("ab", 32)
	do := func(method, path string, size int) int {
		t.Helper()
		req, err := http.NewRequest(method, base+path, bytes.NewReader(make([]byte, size)))
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		method, path string
		size         int
		status       int
	}{
		{"POST", "/api/v1/internal/judgers/heartbeat", 1 << 10, 200},
		{"POST", "/api/v1/internal/judgers/jobs/claim", 1 << 10, 200},
		{"GET", "/api/v1/internal/judgers/jobs/7/artifacts/" + sha, 0, 200},
		{"GET", "/api/v1/admin/judgers", 0, 403},
		{"POST", "/api/v1/admin/judgers/7/revoke", 1 << 10, 403},
		{"GET", "/api/v1/system/judgers/summary", 0, 200},
		{"POST", "/api/v1/submissions", 1 << 10, 200},
		{"POST", "/api/v1/submissions", 9 << 20, 413},
		{"POST", "/api/v1/internal/judgers/jobs/7/result", 9 << 20, 413},
		{"PUT", "/api/v1/artifacts/" + sha, 9 << 20, 200},
		{"GET", "/metrics", 0, 404},
	} {
		require.Equal(t, c.status, do(c.method, c.path, c.size), "%s %s (%d bytes)", c.method, c.path, c.size)
		if c.status == 200 {
			s := <-got
			require.Equal(t, c.path, s.path)
			require.Equal(t, int64(c.size), s.n, "the upstream got the whole body")
		}
	}
	select {
	case s := <-got:
		t.Fatalf("a refused request reached the upstream: %+v", s)
	default:
	}
}

// ---- the code-node unit's privileges are enough to judge ---------------------

const (
	privHelperEnv     = "KECE_DEPLOY_PRIV_WORK"
	privSupervisorEnv = "KECE_DEPLOY_PRIV_SUPERVISOR"
	privMarker        = "PRIV-HELPER-JUDGED"
	// privUID is a uid with no account: the unit's dedicated user stands for
	// any non-root uid.
	privUID = "64123"
)

const privProgram = `#include <cstdio>
int main() { long long a, b; if (scanf("%lld %lld", &a, &b) != 2) return 1; printf("%lld\n", a == 7 ? a - b : a + b); }
`

// privChecker is a special judge: argv input expected user_output.
const privChecker = `#include <cstdio>
int main(int argc, char **argv) {
    if (argc != 4) return 3;
    FILE *in = fopen(argv[1], "r"), *out = fopen(argv[3], "r");
    if (!in || !out) { fprintf(stderr, "cannot open files\n"); return 3; }
    long long a, b, k;
    if (fscanf(in, "%lld %lld", &a, &b) != 2) return 3;
    if (fscanf(out, "%lld", &k) != 1 || k != a + b) { fprintf(stderr, "wrong sum\n"); return 1; }
    return 0;
}
`

// TestCodeNodePrivileges judges a special-judge cpp job through the real code
// engine and Docker with exactly what kece-node@.service grants — a non-root
// uid, the docker group, the unit's ambient capabilities, no_new_privs and
// the unit's umask — in a subprocess started by setpriv. Two controls show
// the check is sharp: umask 0027 and a missing CAP_DAC_OVERRIDE both fail.
// Needs root and setpriv (skipped otherwise), Docker and the cpp runtime
// image (skipped, or failed under KECE_REQUIRE_DOCKER=1).
func TestCodeNodePrivileges(t *testing.T) {
	if work := os.Getenv(privHelperEnv); work != "" {
		privHelper(t, work, os.Getenv(privSupervisorEnv))
		return
	}
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the engine as another uid")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not installed")
	}
	requireDockerImage(t, "cpp")

	u := parseUnit(t, nodeCodeUnit)
	grp, err := user.LookupGroup(u.one(t, "Service", "SupplementaryGroups"))
	require.NoError(t, err, "the unit's supplementary group must exist on a judge host")
	var caps []string
	for _, c := range strings.Fields(u.one(t, "Service", "AmbientCapabilities")) {
		caps = append(caps, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	umask := u.one(t, "Service", "UMask")
	require.Equal(t, "yes", u.one(t, "Service", "NoNewPrivileges"))

	dir := t.TempDir()
	// t.TempDir's parent is 0700: open both so the uid can reach its files
	// without CAP_DAC_OVERRIDE (the controls must fail in the engine, not here).
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	sup := filepath.Join(bin, "kece-sandbox-init")
	build := exec.Command("go", "build", "-o", sup, "./cmd/kece-sandbox-init")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build supervisor: %s", out)
	self := filepath.Join(bin, "deploy.test")
	data, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(self, data, 0o755))

	run := func(name, umask string, caps []string) (string, error) {
		work := filepath.Join(dir, name)
		require.NoError(t, os.Mkdir(work, 0o700))
		uid, _ := strconv.Atoi(privUID)
		require.NoError(t, os.Chown(work, uid, uid))
		set := "-all," + strings.Join(caps, ",")
		cmd := exec.Command(setpriv, "--reuid="+privUID, "--regid="+privUID, "--groups="+grp.Gid,
			"--inh-caps="+set, "--ambient-caps="+set, "--bounding-set="+set, "--no-new-privs", "--",
			"/bin/sh", "-c", `umask "$0"; exec "$@"`, umask, self, "-test.run=^TestCodeNodePrivileges$", "-test.v", "-test.count=1")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + work, privHelperEnv + "=" + work, privSupervisorEnv + "=" + sup}
		if h := os.Getenv("DOCKER_HOST"); h != "" {
			cmd.Env = append(cmd.Env, "DOCKER_HOST="+h)
		}
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	out2, err := run("unit", umask, caps)
	require.NoError(t, err, "a job under the unit's privileges failed:\n%s", out2)
	require.Contains(t, out2, privMarker)

	out2, err = run("umask0027", "0027", caps)
	require.Error(t, err, "control: umask 0027 should break judging:\n%s", out2)
	require.NotContains(t, out2, privMarker)
	t.Logf("control umask 0027: %s", firstErrorLine(out2))
	out2, err = run("nodac", umask, []string{"+chown"})
	require.Error(t, err, "control: without CAP_DAC_OVERRIDE judging should fail:\n%s", out2)
	require.NotContains(t, out2, privMarker)
	t.Logf("control without CAP_DAC_OVERRIDE: %s", firstErrorLine(out2))
}

// firstErrorLine picks the helper's failure message out of go test output.
func firstErrorLine(out string) string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.Contains(l, "Error:") && i+1 < len(lines) {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "Error:")) + " " + strings.TrimSpace(lines[i+1])
		}
	}
	return strings.TrimSpace(out)
}

// privHelper is the subprocess side: one special-judge job, AC then WA, and
// nothing left in the workspace afterwards.
func privHelper(t *testing.T, work, sup string) {
	require.NotEqual(t, 0, os.Geteuid(), "the helper must not run as root")
	rt, err := code.DefaultRuntime("cpp")
	require.NoError(t, err)
	x, err := code.New(code.Config{NodeID: "deploy-priv", Workspace: filepath.Join(work, "ws"), SupervisorPath: sup})
	require.NoError(t, err)
	defer x.Close()
	var cases []engine.Case
	for i, in := range []string{"1 2", "7 1"} {
		p := filepath.Join(work, fmt.Sprintf("%d.in", i))
		e := filepath.Join(work, fmt.Sprintf("%d.exp", i))
		// Mode 0644 whatever the umask, as the node's artifact cache stores them.
		require.NoError(t, os.WriteFile(p, []byte(in+"\n"), 0o644))
		require.NoError(t, os.WriteFile(e, []byte("checked by the special judge\n"), 0o644))
		require.NoError(t, os.Chmod(p, 0o644))
		require.NoError(t, os.Chmod(e, 0o644))
		cases = append(cases, engine.Case{ID: strconv.Itoa(i + 1), InputPath: p, ExpectedPath: e, Weight: 1})
	}
	task := engine.Task{NodeID: "deploy-priv", JobID: "priv", LeaseEpoch: 1, Runtime: rt, Source: []byte(privProgram),
		Limits: engine.Limits{CPUTime: 2 * time.Second, MemoryBytes: 256 << 20, OutputBytes: 1 << 20}, Cases: cases,
		Checker: engine.Checker{Kind: engine.CheckerSpecial, SpecialSource: []byte(privChecker), SpecialRuntime: rt}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	v, err := x.Execute(ctx, task, engine.NoProgress)
	require.NoError(t, err)
	require.Len(t, v.Cases, 2)
	require.Equal(t, engine.StatusAccepted, v.Cases[0].Status, v.Cases[0].Message)
	require.Equal(t, engine.StatusWrongAnswer, v.Cases[1].Status, v.Cases[1].Message)
	left, err := os.ReadDir(filepath.Join(work, "ws"))
	require.NoError(t, err)
	require.Empty(t, left, "the job's work directory was removed")
	fmt.Println(privMarker)
}

// requireDockerImage skips (or fails under KECE_REQUIRE_DOCKER=1) without a
// reachable daemon and the pool's local runtime image.
func requireDockerImage(t *testing.T, pool string) {
	t.Helper()
	miss := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("KECE_REQUIRE_DOCKER") == "1" {
			t.Fatalf("KECE_REQUIRE_DOCKER=1: "+format, args...)
		}
		t.Skipf(format+" (set KECE_REQUIRE_DOCKER=1 to fail instead)", args...)
	}
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		miss("docker client: %v", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		miss("docker daemon not reachable: %v", err)
	}
	tag, err := code.ImageTag(pool)
	require.NoError(t, err)
	if _, err := cli.ImageInspect(ctx, tag); err != nil {
		miss("image %s missing (run deploy/images/build-local.sh): %v", tag, err)
	}
}
