package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts"
)

// recipe returns the shell block that follows <!-- recipe: NAME --> in the
// operations guide: the commands an operator types, written once.
func recipe(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(repo(operationsGuide))
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)<!-- recipe: " + regexp.QuoteMeta(name) + " -->\n```sh\n(.*?)```").FindSubmatch(data)
	require.NotNil(t, m, "%s has no recipe %q", operationsGuide, name)
	return string(m[1])
}

// The judge host recipe: its join line is exactly what kecectl and the
// console print for its NODE and POOL, the credential path is the one the
// units and the env examples use, and the files it installs exist.
func TestJudgeHostRecipe(t *testing.T) {
	t.Parallel()
	r := recipe(t, "judge-host")
	vars := regexp.MustCompile(`(?m)^NODE=(\S+) POOL=(\S+) CONTROL_URL=(\S+)$`).FindStringSubmatch(r)
	require.NotNil(t, vars, "the recipe starts by naming NODE, POOL and CONTROL_URL")
	node, pool, url := vars[1], vars[2], vars[3]
	join := contracts.JoinCommand(url, pool, node, "kjc_…")
	require.Contains(t, strings.Split(r, "\n"), join, "the recipe's join line is what kecectl prints")

	cred := contracts.NodeCredentialFile(node)
	for _, f := range []string{nodeCppEnv, nodeMySQLEnv} {
		data, err := os.ReadFile(repo(f))
		require.NoError(t, err)
		inst := strings.TrimSuffix(strings.TrimPrefix(f, "deploy/systemd/node-"), ".env.example")
		require.Contains(t, string(data), "\nKECE_CREDENTIAL_FILE="+contracts.NodeCredentialFile(inst)+"\n", f)
		require.NotContains(t, string(data), "sudo -u", "%s: one recipe, in %s", f, operationsGuide)
	}
	require.Equal(t, "/var/lib/kece/node-"+node+"/credential", cred)
	for _, u := range []string{nodeCodeUnit, nodeSQLUnit} {
		data, err := os.ReadFile(repo(u))
		require.NoError(t, err)
		require.Contains(t, string(data), "\nStateDirectory=kece/node-%i\n", u)
		require.Contains(t, string(data), "\nUser=kece-node\n", "%s: join's default --owner", u)
	}
	for _, f := range regexp.MustCompile(`deploy/systemd/[\w@.-]+\.service`).FindAllString(r, -1) {
		require.FileExists(t, repo(f))
	}
	require.Contains(t, r, `deploy/systemd/$EXAMPLE.env.example`)
	require.FileExists(t, repo("deploy/systemd/node-"+node+".env.example"))

	// The other documents link here instead of giving a second variant: no
	// systemd-run or sudo recipe, and a join with flags anywhere else is the
	// line kecectl prints (it names the credential file the unit reads).
	joinCall := regexp.MustCompile("join --(join-)?code [^`/]|kece-node join --")
	for _, doc := range []string{"README.md", "docs/node.md", "docs/admin.md", "docs/console.md", nodeCppEnv, nodeMySQLEnv,
		"deploy/node/node.env.example", composeNode, composeNodeEnv} {
		data, err := os.ReadFile(repo(doc))
		require.NoError(t, err)
		require.NotContains(t, string(data), "systemd-run", doc)
		require.NotRegexp(t, `sudo -u kece-node\s+kece-node join`, string(data), doc)
		for i, line := range strings.Split(string(data), "\n") {
			if joinCall.MatchString(line) {
				require.Contains(t, line, "--credential-file", "%s:%d: a join other than the printed line; link to %s instead", doc, i+1, operationsGuide)
			}
		}
	}
}
