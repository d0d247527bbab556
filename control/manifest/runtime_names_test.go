package manifest_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/manifest"
)

// withProgram is a manifest whose checker of type typ is written in lang
// and carries one extra file named name.
func withProgram(typ, lang, name string) manifest.Manifest {
	sp := manifest.SpecialChecker{Files: []manifest.CheckerFile{{Name: name, Sha256: d1, Size: 10}}}
	m := specialManifest(sp)
	m.Checker.Type = typ
	m.Checker.Special.Language = lang
	if typ == manifest.CheckerCommunication {
		m.Checker.Special.Processes = 2
	}
	return m
}

// A checker, an interactor or a manager whose extra file takes a name of
// the runtime it runs in (its source, its compile's outputs) is refused at
// publish, in every language; a name the runtime does not use is not. The
// refusal is ValidateNew's only: a stored manifest with such a file still
// reads back (Validate), as it was published.
func TestPublishRefusesProgramFilesNamedLikeTheRuntime(t *testing.T) {
	t.Parallel()
	taken := map[string][]string{
		"cpp17":      {"main.cpp", "main"},
		"cpp":        {"main.cpp", "main"},
		"c11":        {"main.c", "main"},
		"java17":     {"Main.java", "Checker.java", "Main.class", "Checker_1.class"},
		"python3":    {"main.py", "__pycache__"},
		"python":     {"main.py"},
		"arkts":      {"main.ets", "main.ts", "main.js", "kece-env.d.ts"},
		"javascript": {"main.js"},
	}
	free := map[string][]string{
		"cpp17":      {"testlib.h", "main.c", "main.py"},
		"c11":        {"testlib.h", "main.cpp"},
		"java17":     {"words.txt", "main"},
		"python3":    {"words.txt", "testlib.py", "main"},
		"arkts":      {"words.txt"},
		"javascript": {"helper.js", "main.ts"},
	}
	for _, typ := range []string{"special", manifest.CheckerInteractive, manifest.CheckerCommunication} {
		for lang, names := range taken {
			for _, name := range names {
				t.Run(fmt.Sprintf("%s/%s/%s", typ, lang, name), func(t *testing.T) {
					m := withProgram(typ, lang, name)
					require.NoError(t, m.Validate(), "a stored manifest still reads back")
					err := m.ValidateNew()
					require.ErrorIs(t, err, manifest.ErrInvalid)
					var me *manifest.Error
					require.ErrorAs(t, err, &me)
					require.Equal(t, "checker.special.files[0].name", me.Field)
					require.Contains(t, me.Problem, name)
				})
			}
		}
		for lang, names := range free {
			for _, name := range names {
				m := withProgram(typ, lang, name)
				require.NoError(t, m.ValidateNew(), "%s %s %s", typ, lang, name)
			}
		}
	}
	m := withProgram(manifest.CheckerCommunication, "python3", "main.py")
	require.ErrorContains(t, m.ValidateNew(), "manager", "the message names the program's role")
	m = withProgram(manifest.CheckerInteractive, "python3", "main.py")
	require.ErrorContains(t, m.ValidateNew(), "interactor")
}

// A grader's files are compiled with the contestant's source: the
// compile's outputs (main, .class files, __pycache__) and names the
// engine's file rule refuses ('+') are refused at publish; its entry
// source and Java sources are the grader's own (grader.go's rules).
func TestPublishRefusesGraderFilesNamedLikeTheRuntime(t *testing.T) {
	t.Parallel()
	bad := map[string]manifest.GraderLanguage{
		"cpp binary":     {Language: "cpp17", Files: []manifest.CheckerFile{gfile("grader.cpp"), gfile("main")}},
		"c binary":       {Language: "c17", Files: []manifest.CheckerFile{gfile("main")}},
		"java class":     {Language: "java17", Files: []manifest.CheckerFile{gfile("Grader.java"), gfile("Grader.class")}},
		"python cache":   {Language: "python3", SourceName: "solution.py", Files: []manifest.CheckerFile{gfile("main.py"), gfile("__pycache__")}},
		"plus in a name": {Language: "cpp17", Files: []manifest.CheckerFile{gfile("a+b.h")}},
	}
	for name, gl := range bad {
		m := graderManifest(gl)
		require.NoError(t, m.Validate(), name)
		err := m.ValidateNew()
		require.ErrorIs(t, err, manifest.ErrInvalid, name)
		var me *manifest.Error
		require.ErrorAs(t, err, &me)
		require.Regexp(t, `^grader\.languages\[0\]\.files\[\d\]\.name$`, me.Field, name)
	}
	good := graderManifest(
		manifest.GraderLanguage{Language: "cpp20", SourceName: "solution.cpp", Files: []manifest.CheckerFile{gfile("main.cpp"), gfile("add.h")}},
		manifest.GraderLanguage{Language: "java17", Files: []manifest.CheckerFile{gfile("Grader.java"), gfile("Helper.java")}},
		manifest.GraderLanguage{Language: "python3", SourceName: "solution.py", Files: []manifest.CheckerFile{gfile("main.py")}},
	)
	require.NoError(t, good.ValidateNew())
}
