package deploy

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

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
