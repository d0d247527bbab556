package manifest_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/manifest"
)

const d2g = "1111111111111111111111111111111111111111111111111111111111111111"

func graderManifest(gls ...manifest.GraderLanguage) manifest.Manifest {
	m := codeManifest()
	m.Grader = &manifest.Grader{Languages: gls}
	return m
}

func gfile(name string) manifest.CheckerFile {
	return manifest.CheckerFile{Name: name, Sha256: d2g, Size: 10}
}

// A grader names, per C, C++, Java or Python id, bounded plain files; Python
// names the contestant's module and carries the entry main.py; Java takes no
// source name; an old manifest keeps its bytes and digest (pinned), and the
// grader's files are artifacts the manifest references.
func TestGraderManifest(t *testing.T) {
	t.Parallel()
	old := `{"kind":"CODE","limits":{"timeMs":1000,"memoryMb":256,"outputKb":64},"checker":{"type":"tolerant"},` +
		`"cases":[{"caseId":"1","inputSha256":"` + d1 + `","inputSize":4,"outputSha256":"` + d1 + `","outputSize":4,"weight":100}]}`
	m, err := manifest.Parse([]byte(old))
	require.NoError(t, err)
	b, digest, err := m.Canonical()
	require.NoError(t, err)
	require.Equal(t, old, string(b), "an old manifest's canonical JSON is unchanged")
	require.Equal(t, "ef37c920a3b575de6c8ef44d49d573af1b92180c5e6bf8ab96b1fabe96201acf", digest)

	withGrader := strings.TrimSuffix(old, "}") + `,"grader":{"languages":[` +
		`{"language":"cpp17","files":[{"name":"grader.cpp","sha256":"` + d2g + `","size":10},{"name":"add.h","sha256":"` + d2g + `","size":10}]},` +
		`{"language":"python3","sourceName":"solution.py","files":[{"name":"main.py","sha256":"` + d2g + `","size":10}]}]}}`
	m, err = manifest.Parse([]byte(withGrader))
	require.NoError(t, err)
	b, digestG, err := m.Canonical()
	require.NoError(t, err)
	require.JSONEq(t, withGrader, string(b))
	require.NotEqual(t, digest, digestG)
	require.Equal(t, int64(10), m.Digests()[d2g])
	require.Equal(t, "cpp17", m.Grader.For("cpp").Language, "an alias matches the id it stands for")
	require.Nil(t, m.Grader.For("java17"))
	require.NoError(t, manifest.CheckGraderLanguage("python", m))
	require.ErrorIs(t, manifest.CheckGraderLanguage("java17", m), manifest.ErrInvalid)
	require.NoError(t, manifest.CheckGraderLanguage("java17", codeManifest()))

	ok := []manifest.GraderLanguage{
		{Language: "c17", Files: []manifest.CheckerFile{gfile("grader.c"), gfile("add.h")}},
		{Language: "java17", Files: []manifest.CheckerFile{gfile("Grader.java")}},
		{Language: "cpp20", SourceName: "solution.cpp", Files: []manifest.CheckerFile{gfile("main.cpp")}},
	}
	m = graderManifest(ok...)
	require.NoError(t, m.Validate())

	big := make([]manifest.CheckerFile, 5)
	for i := range big {
		big[i] = manifest.CheckerFile{Name: string(rune('a'+i)) + ".h", Sha256: d2g, Size: manifest.MaxCheckerFileBytes}
	}
	many := make([]manifest.CheckerFile, manifest.MaxGraderFiles+1)
	for i := range many {
		many[i] = gfile(strings.Repeat("x", i+1) + ".h")
	}
	for name, tc := range map[string]struct {
		m     manifest.Manifest
		field string
	}{
		"no languages":        {graderManifest(), "grader.languages"},
		"unknown language":    {graderManifest(manifest.GraderLanguage{Language: "cobol", Files: []manifest.CheckerFile{gfile("g.c")}}), "grader.languages[0].language"},
		"javascript":          {graderManifest(manifest.GraderLanguage{Language: "javascript", Files: []manifest.CheckerFile{gfile("g.js")}}), "grader.languages[0].language"},
		"sql language":        {graderManifest(manifest.GraderLanguage{Language: "mysql", Files: []manifest.CheckerFile{gfile("g.sql")}}), "grader.languages[0].language"},
		"alias twice":         {graderManifest(ok[1], manifest.GraderLanguage{Language: "java", Files: []manifest.CheckerFile{gfile("G.java")}}), "grader.languages[1].language"},
		"no files":            {graderManifest(manifest.GraderLanguage{Language: "cpp17"}), "grader.languages[0].files"},
		"too many files":      {graderManifest(manifest.GraderLanguage{Language: "cpp17", Files: many}), "grader.languages[0].files"},
		"too large together":  {graderManifest(manifest.GraderLanguage{Language: "cpp17", Files: big}), "grader.languages[0].files"},
		"file too large":      {graderManifest(manifest.GraderLanguage{Language: "cpp17", Files: []manifest.CheckerFile{{Name: "g.cpp", Sha256: d2g, Size: manifest.MaxCheckerFileBytes + 1}}}), "grader.languages[0].files[0].size"},
		"path name":           {graderManifest(manifest.GraderLanguage{Language: "cpp17", Files: []manifest.CheckerFile{gfile("../g.cpp")}}), "grader.languages[0].files[0].name"},
		"duplicate name":      {graderManifest(manifest.GraderLanguage{Language: "cpp17", Files: []manifest.CheckerFile{gfile("g.cpp"), gfile("g.cpp")}}), "grader.languages[0].files[1].name"},
		"bad digest":          {graderManifest(manifest.GraderLanguage{Language: "cpp17", Files: []manifest.CheckerFile{{Name: "g.cpp", Sha256: "x", Size: 1}}}), "grader.languages[0].files[0].sha256"},
		"entry name taken":    {graderManifest(manifest.GraderLanguage{Language: "cpp17", Files: []manifest.CheckerFile{gfile("main.cpp")}}), "grader.languages[0].files"},
		"python without name": {graderManifest(manifest.GraderLanguage{Language: "python3", Files: []manifest.CheckerFile{gfile("main.py")}}), "grader.languages[0].sourceName"},
		"python no main.py":   {graderManifest(manifest.GraderLanguage{Language: "python3", SourceName: "solution.py", Files: []manifest.CheckerFile{gfile("grader.py")}}), "grader.languages[0].files"},
		"python wrong ext":    {graderManifest(manifest.GraderLanguage{Language: "python3", SourceName: "solution.txt", Files: []manifest.CheckerFile{gfile("main.py")}}), "grader.languages[0].sourceName"},
		"source is entry":     {graderManifest(manifest.GraderLanguage{Language: "python3", SourceName: "main.py", Files: []manifest.CheckerFile{gfile("main.py")}}), "grader.languages[0].sourceName"},
		"source is grader's":  {graderManifest(manifest.GraderLanguage{Language: "python3", SourceName: "lib.py", Files: []manifest.CheckerFile{gfile("main.py"), gfile("lib.py")}}), "grader.languages[0].sourceName"},
		"java source name":    {graderManifest(manifest.GraderLanguage{Language: "java17", SourceName: "Solution.java", Files: []manifest.CheckerFile{gfile("Grader.java")}}), "grader.languages[0].sourceName"},
		"sql manifest":        {func() manifest.Manifest { m := sqlManifest(); m.Grader = &manifest.Grader{Languages: ok}; return m }(), "grader"},
	} {
		err := tc.m.Validate()
		var ve *manifest.Error
		require.ErrorAs(t, err, &ve, name)
		require.Equal(t, tc.field, ve.Field, "%s: %v", name, err)
	}
}
