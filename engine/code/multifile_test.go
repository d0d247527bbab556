package code

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

func files(kv ...string) []engine.SourceFile {
	var out []engine.SourceFile
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, engine.SourceFile{Name: kv[i], Data: []byte(kv[i+1])})
	}
	return out
}

// Multi-file submissions build and run in every language that takes them:
// C++ and C with a header and a second translation unit, Java with the
// class to run in another file than the source, Python importing a module;
// an error in a further file is a CE with the compiler's message.
func TestMultiFileSubmissions(t *testing.T) {
	t.Parallel()
	const addH = "#ifndef ADD_H\n#define ADD_H\nlong add(long a, long b);\n#endif\n"
	for _, tc := range []struct {
		name, pool, lang, src string
		files                 []engine.SourceFile
		want                  engine.Status
		log                   string
	}{
		{"cpp header and unit", "cpp", "cpp17", "#include <cstdio>\n#include \"add.h\"\nint main() { long a, b; scanf(\"%ld %ld\", &a, &b); printf(\"%ld\\n\", add(a, b)); }\n",
			files("add.h", addH, "add.cpp", "#include \"add.h\"\nlong add(long a, long b) { return a + b; }\n"), engine.StatusAccepted, ""},
		{"c header and unit", "cpp", "c17", "#include <stdio.h>\n#include \"add.h\"\nint main(void) { long a, b; scanf(\"%ld %ld\", &a, &b); printf(\"%ld\\n\", add(a, b)); return 0; }\n",
			files("add.h", addH, "add.c", "#include \"add.h\"\nlong add(long a, long b) { return a + b; }\n"), engine.StatusAccepted, ""},
		{"cpp error in the second unit", "cpp", "cpp17", "#include \"add.h\"\nint main() { return (int)add(1, 2) - 3; }\n",
			files("add.h", addH, "add.cpp", "long add(long a, long b) { return a + undefined_name; }\n"), engine.StatusCompileError, "add.cpp"},
		{"cpp unit not linked in", "cpp", "cpp17", "#include \"add.h\"\nint main() { return (int)add(1, 2) - 3; }\n",
			files("add.h", addH), engine.StatusCompileError, "undefined reference"},
		{"java main in another file", "java", "java17", "public class Adder { static long add(long a, long b) { return a + b; } }\n",
			files("Main.java", "import java.util.*;\npublic class Main { public static void main(String[] x) { Scanner s = new Scanner(System.in); System.out.println(Adder.add(s.nextLong(), s.nextLong())); } }\n"),
			engine.StatusAccepted, ""},
		{"java package across files", "java", "java17", "package p;\npublic class Solution { public static void main(String[] x) { java.util.Scanner s = new java.util.Scanner(System.in); System.out.println(Util.add(s.nextLong(), s.nextLong())); } }\n",
			files("Util.java", "package p;\nclass Util { static long add(long a, long b) { return a + b; } }\n"), engine.StatusAccepted, ""},
		{"java no main anywhere", "java", "java17", "public class A {}\n", files("B.java", "class B {}\n"), engine.StatusCompileError, "no runnable class"},
		{"java two public mains", "java", "java17", "public class A { public static void main(String[] x) {} }\n",
			files("B.java", "public class B { public static void main(String[] x) {} }\n"), engine.StatusCompileError, "several top-level classes"},
		{"python imports a module", "python", "python3", "from helpers import add\na, b = map(int, input().split())\nprint(add(a, b))\n",
			files("helpers.py", "def add(a, b):\n    return a + b\n"), engine.StatusAccepted, ""},
		{"python syntax error in a module", "python", "python3", "import helpers\nprint(42)\n",
			files("helpers.py", "def add(a, b:\n    return a + b\n"), engine.StatusCompileError, "helpers.py"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.pool)
			task := b.langTask(t, tc.pool, tc.lang, tc.src, tcase{in: "40 2\n", exp: "42\n"})
			task.Limits = limitsFor(tc.pool)
			task.Files = tc.files
			v := b.run(t, task)
			require.Equal(t, tc.want, v.Status, "%s %s %+v", v.Message, v.CompileLog, v.Cases)
			require.Contains(t, v.CompileLog, tc.log)
			require.NoError(t, b.leftovers(t))
		})
	}
}

// The compile command gets the further units after the entry; headers and
// other files are only laid beside it; the spec's own commands are not
// changed (they are shared between jobs).
func TestMultiFileSpec(t *testing.T) {
	t.Parallel()
	cpp, err := RuntimeForLanguage("cpp17")
	require.NoError(t, err)
	before := append([]string(nil), cpp.CompileCmd...)
	rt, err := multiFileSpec(cpp, []byte("int main(){}"), files("a.h", "", "a.cpp", "", "b.cc", "", "notes.txt", ""), -1)
	require.NoError(t, err)
	require.Equal(t, append(append([]string(nil), before[:len(before)-1]...), "main.cpp", "a.cpp", "b.cc"), rt.CompileCmd)
	require.Equal(t, before, cpp.CompileCmd)

	java, err := RuntimeForLanguage("java17")
	require.NoError(t, err)
	rt, err = multiFileSpec(java, []byte("class Helper {}"), files("Main.java", "public class Main { public static void main(String[] a) {} }"), -1)
	require.NoError(t, err)
	require.Equal(t, "Helper.java", rt.SourceFile)
	require.Equal(t, []string{"Helper.java", "Main.java"}, rt.CompileCmd[len(rt.CompileCmd)-2:])
	require.Equal(t, "Main", rt.RunCmd[len(rt.RunCmd)-1])
	_, err = multiFileSpec(java, []byte("public class Main { public static void main(String[] a) {} }"), files("Main.java", "class X {}"), -1)
	require.True(t, isEntryError(err), "%v", err)

	js, err := RuntimeForLanguage("javascript")
	require.NoError(t, err)
	_, err = multiFileSpec(js, []byte("1"), files("a.js", "2"), -1)
	requireClass(t, err, engine.InfraConfig)
	requireClass(t, validateFiles(files("../x", "")), engine.InfraCorruptInput)
	requireClass(t, validateFiles(files("a", "", "a", "")), engine.InfraCorruptInput)
}
