package code

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// Every id has a valid spec that names its standard in the compile command,
// aliases judge like their target, and unknown ids are refused.
func TestLanguageTable(t *testing.T) {
	t.Parallel()
	specs, err := Languages()
	require.NoError(t, err)
	var ids []string
	for _, s := range specs {
		ids = append(ids, s.Language)
		require.NoError(t, s.Validate(), s.Language)
		require.Positive(t, s.MinMemoryBytes, s.Language)
		require.NotEmpty(t, s.Standard, s.Language)
		require.NotEmpty(t, s.VersionProbe, s.Language)
		require.Equal(t, 3*s.CompileTime+10*time.Second, s.CompileWall(), "%s: compile wall limit is a backstop to the CPU limit", s.Language)
		if std, isC := strings.CutPrefix(s.Language, "c1"); isC {
			require.Equal(t, []string{"gcc", "-std=gnu1" + std}, s.CompileCmd[:2], s.Language)
			require.Equal(t, "-lm", s.CompileCmd[len(s.CompileCmd)-1], "%s: libm after the source, as the linker needs", s.Language)
			require.Contains(t, s.CompileCmd, "-DONLINE_JUDGE", s.Language)
			require.Contains(t, s.CompileCmd, "-O2", s.Language)
			require.Equal(t, "main.c", s.SourceFile, s.Language)
			require.Equal(t, "cpp", s.Pool, "%s: C is served by the cpp pool's gcc", s.Language)
		} else if s.Pool == "cpp" {
			std := strings.TrimPrefix(s.Language, "cpp")
			if std == "" {
				std = "17" // bare cpp means C++17
			}
			require.Contains(t, s.CompileCmd, "-std=gnu++"+std, s.Language)
			require.Contains(t, s.Standard, "C++"+std, s.Language)
			require.Contains(t, s.CompileCmd, fmt.Sprintf("-fmax-errors=%d", cppMaxErrors), s.Language)
		}
	}
	require.Equal(t, languageOrder, ids)
	for pool, id := range defaultLanguage {
		s, err := DefaultRuntime(pool)
		require.NoError(t, err)
		require.Equal(t, id, s.Language)
		of, err := LanguagesOfPool(pool)
		require.NoError(t, err)
		require.Contains(t, of, s)
	}
	java, err := RuntimeForLanguage("java")
	require.NoError(t, err)
	require.Equal(t, engine.EntryJavaClass, java.Entry)
	require.Contains(t, java.Standard, "alias of java17")
	require.Contains(t, strings.Join(java.CompileCmd, " "), "--release 17")
	js, err := RuntimeForLanguage("javascript")
	require.NoError(t, err)
	require.Equal(t, "arkts", js.Pool, "the arkts pool's image carries Node.js")
	require.Equal(t, []string{"node", "--check", "main.js"}, js.CompileCmd)
	for _, bad := range []string{"cpp23", "c", "c99", "js", "mysql", "", "Cpp17"} {
		_, err := RuntimeForLanguage(bad)
		require.Error(t, err, bad)
	}
	_, err = LanguagesOfPool("mysql")
	require.Error(t, err)
}

// Each C++ id compiles with its own standard: __cplusplus says so, a program
// that needs C++20 is CE below it, and one that uses what C++17 removed is CE
// from C++17 on.
func TestCppStandards(t *testing.T) {
	t.Parallel()
	const version = "#include <cstdio>\nint main() { std::printf(\"%ld\\n\", (long)__cplusplus); }\n"
	// concepts, designated initializers and std::span are C++20.
	const needs20 = "#include <concepts>\n#include <cstdio>\n#include <span>\n" +
		"template <std::integral T> T twice(T x) { return 2 * x; }\nstruct P { int a, b; };\n" +
		"int main() { P p{.a = 20, .b = 1}; int v[] = {p.a, p.b}; std::span<int> s(v); std::printf(\"%d\\n\", twice(s[0]) + s[1]); }\n"
	// Dynamic exception specifications were removed in C++17.
	const removedIn17 = "#include <cstdio>\nvoid f() throw(int) {}\nint main() { f(); std::puts(\"41\"); }\n"
	for _, tc := range []struct {
		lang, src string
		want      engine.Status
		exp       string
	}{
		{"cpp11", version, engine.StatusAccepted, "201103"},
		{"cpp14", version, engine.StatusAccepted, "201402"},
		{"cpp17", version, engine.StatusAccepted, "201703"},
		{"cpp20", version, engine.StatusAccepted, "202002"},
		{"cpp", version, engine.StatusAccepted, "201703"},
		{"cpp20", needs20, engine.StatusAccepted, "41"},
		{"cpp17", needs20, engine.StatusCompileError, ""},
		{"cpp14", removedIn17, engine.StatusAccepted, "41"},
		{"cpp17", removedIn17, engine.StatusCompileError, ""},
	} {
		t.Run(tc.lang+"/"+tc.exp, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "cpp")
			task := b.task(t, "cpp", tc.src, tcase{in: "", exp: tc.exp + "\n"})
			var err error
			task.Runtime, err = RuntimeForLanguage(tc.lang)
			require.NoError(t, err)
			v := b.run(t, task)
			require.Equal(t, tc.want, v.Status, "%s: %s %s", tc.lang, v.Message, v.CompileLog)
			require.NoError(t, b.leftovers(t))
		})
	}
}

// Each C id compiles as C with its GNU dialect: __STDC_VERSION__ names the
// standard, GNU extensions stay, ONLINE_JUDGE is defined, libm links, and
// C++ is refused.
func TestCStandards(t *testing.T) {
	t.Parallel()
	const version = "#include <stdio.h>\nint main(void) {\n#ifdef ONLINE_JUDGE\n printf(\"%ld\\n\", (long)__STDC_VERSION__);\n#endif\n return 0; }\n"
	// typeof and statement expressions are GNU extensions, not ISO C11/C17.
	const gnu = "#include <stdio.h>\nint main(void) { int a = 40; typeof(a) b = ({ int t = 2; t; }); printf(\"%d\\n\", a + b); return 0; }\n"
	const cpp = "#include <cstdio>\nint main() { std::printf(\"42\\n\"); }\n"
	for _, tc := range []struct {
		lang, src, in string
		want          engine.Status
		exp           string
	}{
		{"c11", version, "", engine.StatusAccepted, "201112"},
		{"c17", version, "", engine.StatusAccepted, "201710"},
		{"c11", gnu, "", engine.StatusAccepted, "42"},
		{"c17", gnu, "", engine.StatusAccepted, "42"},
		{"c17", readTestdata(t, "prog.c"), "libm 2.5", engine.StatusAccepted, "1.641892"},
		{"c11", cpp, "", engine.StatusCompileError, ""},
	} {
		t.Run(tc.lang+"/"+string(tc.want)+"/"+tc.exp, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "cpp")
			v := b.run(t, b.langTask(t, "cpp", tc.lang, tc.src, tcase{in: tc.in, exp: tc.exp + "\n"}))
			require.Equal(t, tc.want, v.Status, "%s: %s %s %+v", tc.lang, v.Message, v.CompileLog, v.Cases)
			require.NoError(t, b.leftovers(t))
		})
	}
}

// Java runs the class the source declares, under that class's file name.
func TestJavaEntryPoints(t *testing.T) {
	t.Parallel()
	const body = "{ public static void main(String[] args) { java.util.Scanner s = new java.util.Scanner(System.in); " +
		"System.out.println(s.nextLong() + s.nextLong()); } }"
	for _, tc := range []struct {
		name, src string
		want      engine.Status
		msg       string
	}{
		{"public class Solution", "import java.util.*;\n// class Main in a comment\npublic class Solution " + body, engine.StatusAccepted, ""},
		{"main in a package-private class", "public class Helper { static int x = 1; }\nclass Runner " + body, engine.StatusAccepted, ""},
		{"package declaration", "package contest.round1;\n\npublic class Answer " + body, engine.StatusAccepted, ""},
		// Unicode names become UTF-8 file and directory names and launcher
		// arguments (LANG=C.UTF-8): javac and the JVM take them.
		{"Unicode class and package names", "package 竞赛.第一轮;\npublic class Lösung " + body, engine.StatusAccepted, ""},
		{"CJK class name without package", "class 解答 " + body, engine.StatusAccepted, ""},
		{"combining mark in the name", "public class Cafe\u0301 " + body, engine.StatusAccepted, ""},
		{"zero-width space dropped from the name as javac does", "public class A\u200bB " + body, engine.StatusAccepted, ""},
		{"no main", "public class Solution { public int main(int x) { return x; } }", engine.StatusCompileError, "no runnable class"},
		{"main only nested", "public class Outer { static class Inner " + body + " }", engine.StatusCompileError, "nested class is not run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "java")
			task := b.task(t, "java", tc.src, tcase{in: "40 2\n", exp: "42\n"})
			v := b.run(t, task)
			require.Equal(t, tc.want, v.Status, "%s %s", v.Message, v.CompileLog)
			require.Contains(t, v.Message, tc.msg)
			if tc.want == engine.StatusCompileError {
				require.Empty(t, v.Cases)
				require.Equal(t, v.Message, v.CompileLog, "decided from the source: javac never ran")
			}
			require.NoError(t, b.leftovers(t))
		})
	}
}

// A special checker written in Java is compiled and run under its own class.
func TestJavaSpecialChecker(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp", "java")
	javaRT, err := RuntimeForLanguage("java17")
	require.NoError(t, err)
	checker := "import java.nio.file.*;\npublic class Judge { public static void main(String[] a) throws Exception {\n" +
		"  long want = Long.parseLong(Files.readString(Path.of(a[0])).trim().split(\"\\\\s+\")[1]);\n" +
		// The expected answers are empty, so the non-empty file of the two is
		// the user's output whatever the argument order of the protocol.
		"  String out = Files.readString(Path.of(a[1])).trim(); if (out.isEmpty()) out = Files.readString(Path.of(a[2])).trim();\n" +
		"  long got = Long.parseLong(out);\n" +
		"  if (got * got == want) System.exit(0); System.err.println(got + \"^2 != \" + want); System.exit(1); } }\n"
	task := b.task(t, "cpp", readTestdata(t, "prog.cpp"), tcase{in: "sqrt 16", exp: ""}, tcase{in: "sqrtbad 25", exp: ""})
	task.Checker = engine.Checker{Kind: engine.CheckerSpecial, SpecialSource: []byte(checker), SpecialRuntime: javaRT}
	v := b.run(t, task)
	require.Equal(t, []engine.Status{engine.StatusAccepted, engine.StatusWrongAnswer}, statuses(v))
	require.Contains(t, v.Cases[1].Message, "25^2 != 25")

	task.Checker.SpecialSource = []byte("public class NoMain {}")
	_, err = b.x.Execute(context.Background(), task, nil)
	requireClass(t, err, engine.InfraCheckerFailed)
	require.NoError(t, b.leftovers(t))
}
