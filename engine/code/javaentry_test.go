package code

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

func TestFindJavaEntry(t *testing.T) {
	t.Parallel()
	const mainM = "public static void main(String[] args) { }"
	for _, tc := range []struct {
		name       string
		src        string
		file, run  string
		errPattern string // non-empty: a CE whose message matches
	}{
		{name: "public class Solution", src: "import java.util.*;\npublic class Solution { " + mainM + " }", file: "Solution", run: "Solution"},
		{name: "plain Main", src: "public class Main { " + mainM + " }", file: "Main", run: "Main"},
		{name: "main class not public", src: "class Foo { " + mainM + " }", file: "Foo", run: "Foo"},
		{name: "public helper, main in a package-private class", src: "public class Util { static int f() { return 1; } }\nclass Runner { " + mainM + " }", file: "Util", run: "Runner"},
		{name: "public class wins over others with main", src: "class A { " + mainM + " }\npublic class B { " + mainM + " }\nclass C { " + mainM + " }", file: "B", run: "B"},
		{name: "several non-public with main, one named Main", src: "class A { " + mainM + " }\nclass Main { " + mainM + " }", file: "Main", run: "Main"},
		{name: "several non-public with main, ambiguous", src: "class A { " + mainM + " }\nclass B { " + mainM + " }", errPattern: `several top-level classes declare main \(A, B\)`},
		{
			name: "comments and strings mentioning classes",
			src: `// public class Fake { public static void main(String[] a) {} }
/* class Other { public static void main(String[] a) {} } */
public class Real {
    static String s = "public class Str { public static void main(String[] a) {} }";
    static char q = '"'; static char b = '\'';
    static String tb = """
        class InBlock { public static void main(String[] a) {} } \""" still inside
        """;
    ` + mainM + `
}`,
			file: "Real", run: "Real",
		},
		{name: "generics and bounds", src: "public class G<T extends Comparable<? super T>> implements java.io.Serializable { " + mainM + " static <U> void main(U u) {} }", file: "G", run: "G"},
		{name: "record", src: "public record Point(int x, @Deprecated int y) { " + mainM + " }", file: "Point", run: "Point"},
		{name: "interface main is implicitly public", src: "interface Entry { static void main(String[] a) { } }", file: "Entry", run: "Entry"},
		{name: "enum with constant bodies", src: "public enum E { A { int f() { return 1; } }, B { int f() { return 2; } }; abstract int f(); " + mainM + " }", file: "E", run: "E"},
		{name: "varargs, C-style array, final, annotations, qualified String", src: "public class V { @SuppressWarnings(\"x\") static public void main(final java.lang.String... a) {} }", file: "V", run: "V"},
		{name: "C-style array", src: "public class W { public static void main(String a[]) throws Exception {} }", file: "W", run: "W"},
		{name: "package declaration", src: "package com.example.app;\n\nimport java.util.*;\n\npublic class App { " + mainM + " }", file: "App", run: "com.example.app.App"},
		{name: "no main at all", src: "public class NoMain { void run() {} }", errPattern: "no runnable class"},
		{name: "main not static", src: "public class I { public void main(String[] a) {} }", errPattern: "no runnable class"},
		{name: "main not public", src: "public class P { static void main(String[] a) {} }", errPattern: "no runnable class"},
		{name: "main with wrong parameters", src: "public class Q { public static void main(int[] a) {} public static void main() {} }", errPattern: "no runnable class"},
		{name: "main only in a nested class", src: "public class Outer { static class Inner { " + mainM + " } }", errPattern: "nested class is not run"},
		{name: "main only in an anonymous class", src: "public class Anon { Object o = new Object() { " + mainM + " }; }", errPattern: "nested class is not run"},
		{name: "empty source", src: "", errPattern: "no runnable class"},
		{name: "class literal and lambdas", src: "public class L { static Runnable r = () -> { Class<?> c = L.class; }; static int[] a = {1, 2}; " + mainM + " }", file: "L", run: "L"},
		{name: "non-ASCII class name", src: "public class Ünï { " + mainM + " }", file: "Ünï", run: "Ünï"},
		{name: "CJK class and package names", src: "package 竞赛.第一轮;\npublic class 解答 { " + mainM + " }", file: "解答", run: "竞赛.第一轮.解答"},
		{name: "combining mark and currency sign", src: "class Cafe\u0301€ { " + mainM + " }", file: "Cafe\u0301€", run: "Cafe\u0301€"},
		{name: "ignorable character dropped as javac does", src: "public class A\u200bB { " + mainM + " }", file: "AB", run: "AB"},
		{name: "class name too long for a file name", src: "public class " + strings.Repeat("é", 125) + " { " + mainM + " }", errPattern: "250 bytes in UTF-8"},
		{name: "package name too long for a directory", src: "package " + strings.Repeat("p", 250) + ";\npublic class A { " + mainM + " }", errPattern: "package name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, err := findJavaEntry([]byte(tc.src))
			if tc.errPattern != "" {
				require.Error(t, err)
				require.True(t, isEntryError(err))
				require.Regexp(t, tc.errPattern, err.Error())
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.file, e.File)
			require.Equal(t, tc.run, e.Run())
		})
	}
}

// Only Java identifiers that fit a file name pass.
func TestCheckJavaName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"Main", "_x", "$y", "Ünï", "解答", "Cafe\u0301", "x1", strings.Repeat("a", maxJavaNameBytes)} {
		require.NoError(t, checkJavaName("class name", ok), ok)
	}
	for _, bad := range []string{"", "1abc", "a/b", "a b", "a.b", "a\x00b", "\u0301x", "a\u200bb", "\xff", strings.Repeat("a", maxJavaNameBytes+1)} {
		require.True(t, isEntryError(checkJavaName("class name", bad)), "%q", bad)
	}
}

// resolveEntry fills the file name and class into the Java spec and leaves
// fixed-file specs as they are.
func TestResolveEntry(t *testing.T) {
	t.Parallel()
	java, err := RuntimeForLanguage("java17")
	require.NoError(t, err)
	rt, err := resolveEntry(java, []byte("package p.q;\npublic class Solution { public static void main(String[] a) {} }"))
	require.NoError(t, err)
	require.Equal(t, "Solution.java", rt.SourceFile)
	require.Equal(t, "Solution.java", rt.CompileCmd[len(rt.CompileCmd)-1])
	require.Equal(t, "p.q.Solution", rt.RunCmd[len(rt.RunCmd)-1])
	require.NoError(t, rt.Validate())

	_, err = resolveEntry(java, []byte("class X {}"))
	require.True(t, isEntryError(err), "%v", err)

	cpp, err := RuntimeForLanguage("cpp20")
	require.NoError(t, err)
	rt, err = resolveEntry(cpp, []byte("public class Solution {}"))
	require.NoError(t, err)
	require.Equal(t, cpp.SourceFile, rt.SourceFile)
	require.Equal(t, cpp.CompileCmd, rt.CompileCmd)

	bad := cpp
	bad.RunCmd = []string{"java", engine.ClassPlaceholder}
	require.ErrorContains(t, bad.Validate(), "only known under")
}
