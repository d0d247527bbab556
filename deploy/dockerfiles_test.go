package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ---- Dockerfiles --------------------------------------------------------------

func TestDockerfiles(t *testing.T) {
	t.Parallel()
	buildRE := regexp.MustCompile(`go build [^\n]*?-o (\S+) \./cmd/([a-z0-9-]+)`)
	for p, want := range map[string][]string{controlDocker: {"kece-control", "kecectl"}, nodeDocker: {"kece-node", "kece-sandbox-init"}} {
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
