package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// externalEnv are variables the examples may name that a library, not our
// code, reads.
var externalEnv = map[string]string{
	"DOCKER_HOST": "read by the Docker SDK (client.FromEnv) when KECE_DOCKER_HOST is unset",
}

// Node variables that only one kind of pool reads.
var (
	codeOnlyEnv = map[string]bool{"KECE_WORKSPACE": true, "KECE_SUPERVISOR": true, "KECE_RUNTIME_IMAGE": true,
		"KECE_SECCOMP_PROFILE": true, "KECE_DOCKER_HOST": true, "KECE_WARM_SANDBOXES": true, "KECE_COMPILE_CACHE_MAX_BYTES": true}
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
