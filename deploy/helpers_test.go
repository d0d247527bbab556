package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
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

// hostStateRoot is where the end-to-end tests keep host state, at the paths
// the units and Compose projects use.
const hostStateRoot = "/var/lib/kece"

var hostState struct {
	sync.Mutex
	checked, made bool
	users         int
}

// useHostStateRoot registers t as a user of hostStateRoot, before it writes
// there: when the last user ends, the directory is removed if this test
// binary made it and it is empty.
func useHostStateRoot(t *testing.T) {
	t.Helper()
	hostState.Lock()
	defer hostState.Unlock()
	if !hostState.checked {
		_, err := os.Stat(hostStateRoot)
		hostState.checked, hostState.made = true, os.IsNotExist(err)
	}
	hostState.users++
	t.Cleanup(func() {
		hostState.Lock()
		defer hostState.Unlock()
		if hostState.users--; hostState.users == 0 && hostState.made {
			_ = os.Remove(hostStateRoot)
		}
	})
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func runWithEnv(t *testing.T, env []string, name string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	return cmd.CombinedOutput()
}

func goVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(repo("go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(data)
	require.NotNil(t, m)
	return string(m[1])
}

// figuresMu serialises appends to KECE_FIGURES_FILE across parallel tests.
var figuresMu sync.Mutex

// figure logs one measured figure (time to first verdict, sizes, …) and,
// when KECE_FIGURES_FILE names a file, appends it there as "Test: line", so
// a run without -v (.ci/run) still prints the deployment figures at its end.
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	path := os.Getenv("KECE_FIGURES_FILE")
	if path == "" {
		return
	}
	figuresMu.Lock()
	defer figuresMu.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("KECE_FIGURES_FILE: %v", err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s: %s\n", t.Name(), line); err != nil {
		t.Errorf("KECE_FIGURES_FILE: %v", err)
	}
}
