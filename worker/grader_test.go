package worker

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/engine"
)

// The grader of the job's language (an alias matches its id) is fetched by
// digest and handed to the engine; none is nil; a manifest without one for
// the language is corrupt input; a failed fetch is passed on.
func TestGraderOf(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fetched := map[string]string{}
	get := func(d string, _ int64) (string, error) {
		if d == "missing" {
			return "", errors.New("fetch failed")
		}
		p := filepath.Join(dir, d)
		fetched[d] = p
		return p, os.WriteFile(p, []byte("data of "+d), 0o600)
	}
	name := "solution.py"
	g := &machineapi.Grader{Languages: []machineapi.GraderLanguage{
		{Language: "cpp17", Files: []machineapi.CheckerFile{{Name: "grader.cpp", Sha256: "a", Size: 1}}},
		{Language: "python3", SourceName: &name, Files: []machineapi.CheckerFile{{Name: "main.py", Sha256: "b", Size: 1}}},
	}}
	var n Node
	got, err := n.graderOf(g, "python", get)
	require.NoError(t, err)
	require.Equal(t, &engine.Grader{SourceName: "solution.py", Files: []engine.SourceFile{{Name: "main.py", Data: []byte("data of b")}}}, got)
	require.NotContains(t, fetched, "a", "only the job's language is fetched")

	got, err = n.graderOf(nil, "cpp17", get)
	require.NoError(t, err)
	require.Nil(t, got)
	_, err = n.graderOf(g, "java17", get)
	var ie *engine.InfraError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, engine.InfraCorruptInput, ie.Class)
	g.Languages[0].Files[0].Sha256 = "missing"
	_, err = n.graderOf(g, "cpp", get)
	require.ErrorContains(t, err, "fetch failed")
}
