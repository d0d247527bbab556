package code

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// Grader fixtures: the problem reads two numbers, the contestant implements
// add, the grader calls it and prints the sum.
const (
	graderAddH   = "#ifndef ADD_H\n#define ADD_H\nlong add(long a, long b);\n#endif\n"
	graderCpp    = "#include <cstdio>\n#include \"add.h\"\nint main() { long a, b; if (scanf(\"%ld %ld\", &a, &b) != 2) return 1; long r = add(a, b); printf(\"%ld\\n\", r); return 0; }\n"
	graderC      = "#include <stdio.h>\n#include \"add.h\"\nint main(void) { long a, b; if (scanf(\"%ld %ld\", &a, &b) != 2) return 1; long r = add(a, b); printf(\"%ld\\n\", r); return 0; }\n"
	graderJava   = "import java.util.Scanner;\npublic class Grader { public static void main(String[] x) { Scanner s = new Scanner(System.in); long a = s.nextLong(), b = s.nextLong(); long r = Solution.add(a, b); System.out.println(r); } }\n"
	graderPython = "import solution\na, b = map(int, input().split())\nr = solution.add(a, b)\nprint(r)\n"
)

// graderFixtures are the grader of each language and the contestant's
// sources by outcome: ac, wa, ce, exit (returns control to nobody: exit(0)
// before the grader prints), print (writes to stdout itself) and, for Java,
// ownmain (the contestant's class declares a main of its own).
var graderFixtures = []struct {
	pool, lang string
	grader     engine.Grader
	sources    map[string]string
}{
	{"cpp", "cpp17", engine.Grader{Files: files("grader.cpp", graderCpp, "add.h", graderAddH)}, map[string]string{
		"ac":    "#include \"add.h\"\nlong add(long a, long b) { return a + b; }\n",
		"wa":    "#include \"add.h\"\nlong add(long a, long b) { return a - b; }\n",
		"ce":    "#include \"add.h\"\nlong add(long a, long b) { return a + ; }\n",
		"exit":  "#include <cstdlib>\n#include \"add.h\"\nlong add(long a, long b) { std::exit(0); }\n",
		"print": "#include <cstdio>\n#include \"add.h\"\nlong add(long a, long b) { std::printf(\"%ld\\n\", a + b); return a + b; }\n",
	}},
	{"cpp", "c17", engine.Grader{Files: files("grader.c", graderC, "add.h", graderAddH)}, map[string]string{
		"ac":    "#include \"add.h\"\nlong add(long a, long b) { return a + b; }\n",
		"wa":    "#include \"add.h\"\nlong add(long a, long b) { return a * b; }\n",
		"ce":    "#include \"add.h\"\nlong add(long a, long b) { return a + b }\n",
		"exit":  "#include <stdlib.h>\n#include \"add.h\"\nlong add(long a, long b) { exit(0); }\n",
		"print": "#include <stdio.h>\n#include \"add.h\"\nlong add(long a, long b) { puts(\"hello\"); return a + b; }\n",
	}},
	{"java", "java17", engine.Grader{Files: files("Grader.java", graderJava)}, map[string]string{
		"ac":    "public class Solution { public static long add(long a, long b) { return a + b; } }\n",
		"wa":    "public class Solution { public static long add(long a, long b) { return a + b + 1; } }\n",
		"ce":    "public class Solution { public static long add(long a, long b) { return a + c; } }\n",
		"exit":  "public class Solution { public static long add(long a, long b) { System.exit(0); return 0; } }\n",
		"print": "public class Solution { public static long add(long a, long b) { System.out.println(a + b); return a + b; } }\n",
		// A main left in the contestant's class is not run: the grader's is.
		"ownmain": "public class Solution { public static long add(long a, long b) { return a + b; }\n public static void main(String[] x) { System.out.println(\"wrong\"); } }\n",
	}},
	{"python", "python3", engine.Grader{Files: files("main.py", graderPython), SourceName: "solution.py"}, map[string]string{
		"ac":    "def add(a, b):\n    return a + b\n",
		"wa":    "def add(a, b):\n    return a + b + 1\n",
		"ce":    "def add(a, b)\n    return a + b\n",
		"exit":  "import sys\ndef add(a, b):\n    sys.exit(0)\n",
		"print": "def add(a, b):\n    print('debug', a, b)\n    return a + b\n",
	}},
}

// Function-signature tasks build the contestant's source with the grader
// and judge the grader's output, in real sandboxes. An error in the
// contestant's part is a CE naming the contestant's file; a contestant that
// exits before the grader prints is WA (the grader's output is incomplete),
// and one that prints to stdout itself corrupts the grader's output: WA.
func TestGraders(t *testing.T) {
	t.Parallel()
	want := map[string]engine.Status{"ac": engine.StatusAccepted, "wa": engine.StatusWrongAnswer,
		"ce": engine.StatusCompileError, "exit": engine.StatusWrongAnswer, "print": engine.StatusWrongAnswer, "ownmain": engine.StatusAccepted}
	ceFile := map[string]string{"cpp17": "main.cpp", "c17": "main.c", "java17": "Solution.java", "python3": "solution.py"}
	for _, fx := range graderFixtures {
		for _, outcome := range []string{"ac", "wa", "ce", "exit", "print", "ownmain"} {
			if _, ok := fx.sources[outcome]; !ok {
				continue
			}
			t.Run(fx.lang+"/"+outcome, func(t *testing.T) {
				t.Parallel()
				b := setup(t, fx.pool)
				task := b.langTask(t, fx.pool, fx.lang, fx.sources[outcome], tcase{in: "40 2\n", exp: "42\n"}, tcase{in: "-5 5\n", exp: "0\n"})
				task.Limits = limitsFor(fx.pool)
				g := fx.grader
				task.Grader = &g
				v := b.run(t, task)
				t.Logf("GRADER %s %s want %s got %s", fx.lang, outcome, want[outcome], v.Status)
				require.Equal(t, want[outcome], v.Status, "%s %s %+v", v.Message, v.CompileLog, v.Cases)
				if outcome == "ce" {
					require.Contains(t, v.CompileLog, ceFile[fx.lang])
				}
				if outcome == "exit" || outcome == "print" {
					for _, c := range v.Cases {
						require.Equal(t, engine.StatusWrongAnswer, c.Status, "%+v", c)
						require.Zero(t, c.ExitCode, "the contestant ended the process normally: %+v", c)
					}
				}
				require.NoError(t, b.leftovers(t))
			})
		}
	}
}

// A contestant's file may not take a grader file's name (its CE); a grader
// whose source name does not fit the runtime is the problem's fault.
func TestGraderFolding(t *testing.T) {
	t.Parallel()
	py, err := RuntimeForLanguage("python3")
	require.NoError(t, err)
	task := engine.Task{Runtime: py, Source: []byte("def add(a, b): return a + b\n"),
		Files: files("util.py", "x = 1\n"), Grader: &engine.Grader{Files: files("main.py", "import solution\n", "data.py", ""), SourceName: "solution.py"}}
	got, err := withGrader(task)
	require.NoError(t, err)
	require.Equal(t, "import solution\n", string(got.Source))
	require.Equal(t, []string{"util.py", "solution.py", "data.py"}, names(got.Files))
	require.Equal(t, "def add(a, b): return a + b\n", string(got.Files[1].Data))
	require.Equal(t, []string{"util.py"}, names(task.Files), "the task's own slice is not changed")

	task.Files = files("data.py", "")
	_, err = withGrader(task)
	require.True(t, isEntryError(err), "%v", err)
	task.Files = files("solution.py", "")
	_, err = withGrader(task)
	require.True(t, isEntryError(err), "%v", err)

	task.Files = nil
	task.Grader = &engine.Grader{Files: files("grader.py", ""), SourceName: "solution.py"}
	_, err = withGrader(task)
	requireClass(t, err, engine.InfraConfig)
	java, err := RuntimeForLanguage("java17")
	require.NoError(t, err)
	_, err = withGrader(engine.Task{Runtime: java, Grader: &engine.Grader{Files: files("Main.java", ""), SourceName: "Solution.java"}})
	requireClass(t, err, engine.InfraConfig)
	_, err = withGrader(engine.Task{Runtime: java, Grader: &engine.Grader{}})
	requireClass(t, err, engine.InfraConfig)
}

func names(fs []engine.SourceFile) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Name)
	}
	return out
}

// A communication task whose processes are built with a grader (the IOI
// stub): the stub talks to the manager and calls the contestant's function
// in each process; a contestant that exits early leaves its process's
// answer missing, which the manager judges.
func TestGraderInCommunication(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	stub := "#include <cstdio>\nlong square(long x, const char *w);\nint main(int argc, char **argv) { if (argc < 2) return 9; long x; char w[32];\n" +
		"if (scanf(\"%ld %31s\", &x, w) != 2) return 9; long r = square(x, w); printf(\"%ld\\n\", r); return 0; }\n"
	contestant := "#include <cstdlib>\n#include <cstring>\nlong square(long x, const char *w) { if (!strcmp(w, \"exit\")) std::exit(0); return x * x + (strcmp(w, \"wrong\") == 0); }\n"
	task := b.langTask(t, "cpp", "cpp17", contestant, tcase{in: "3 4 ok ok"}, tcase{in: "3 4 ok wrong"}, tcase{in: "3 4 exit ok"})
	task.Limits.CPUTime, task.Limits.WallTime = time.Second, 4*time.Second
	task.Grader = &engine.Grader{Files: files("stub.cpp", stub)}
	cppRT, err := DefaultRuntime("cpp")
	require.NoError(t, err)
	task.Checker = engine.Checker{Kind: engine.CheckerCommunication, SpecialSource: []byte(readTestdata(t, "manager.cpp")),
		SpecialRuntime: cppRT, SpecialProtocol: engine.ProtocolTestlib, InteractorTime: 3 * time.Second, Processes: 2}
	v := b.run(t, task)
	require.Len(t, v.Cases, 3, "%s %s", v.Message, v.CompileLog)
	for i, w := range []struct {
		status  engine.Status
		message string
	}{{engine.StatusAccepted, "ok sum of squares 25"}, {engine.StatusWrongAnswer, "process 2 answered 17 for 4"}, {engine.StatusWrongAnswer, "process 1 gave no answer"}} {
		t.Logf("GRADER communication case %d want %s got %s: %s", i, w.status, v.Cases[i].Status, v.Cases[i].Message)
		require.Equal(t, w.status, v.Cases[i].Status, v.Cases[i].Message)
		require.Contains(t, v.Cases[i].Message, w.message)
	}
	require.NoError(t, b.leftovers(t))
}
