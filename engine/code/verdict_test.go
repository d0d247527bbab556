package code

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// progs maps a pool to its multi-mode test program (testdata/prog.*).
var progs = map[string]string{"cpp": "prog.cpp", "java": "Main.java", "python": "prog.py", "arkts": "prog.ets"}

// verdictLanguages are the runs of the multi-mode program: each pool's
// default language, and the ids a pool serves with a program of their own
// (C in the cpp pool, JavaScript in the arkts pool).
var verdictLanguages = []struct{ name, pool, lang, prog string }{
	{"cpp", "cpp", "", "prog.cpp"}, {"java", "java", "", "Main.java"}, {"python", "python", "", "prog.py"},
	{"arkts", "arkts", "", "prog.ets"},
	{"c11", "cpp", "c11", "prog.c"}, {"c17", "cpp", "c17", "prog.c"}, {"javascript", "arkts", "javascript", "prog.js"},
}

// langTask is b.task with the runtime of lang when it is not the pool's default.
func (b *testBundle) langTask(t *testing.T, pool, lang, src string, cases ...tcase) engine.Task {
	t.Helper()
	task := b.task(t, pool, src, cases...)
	if lang != "" {
		rt, err := RuntimeForLanguage(lang)
		require.NoError(t, err)
		task.Runtime = rt
	}
	return task
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return string(b)
}

// limitsFor keeps tests quick but gives the VMs their start-up time.
func limitsFor(pool string) engine.Limits {
	l := engine.Limits{CPUTime: time.Second, WallTime: 2 * time.Second, MemoryBytes: 256 << 20, OutputBytes: 64 << 10}
	if pool == "java" || pool == "arkts" {
		l.CPUTime, l.WallTime = 3*time.Second, 4*time.Second
	}
	return l
}

// TestVerdicts judges one job per runtime whose cases cover AC, WA, TLE (busy
// loop and sleeper), MLE, RE (exception, segfault, non-zero exit), OLE and an
// empty expected output; each case must get its own verdict.
func TestVerdicts(t *testing.T) {
	t.Parallel()
	for _, l := range verdictLanguages {
		pool := l.pool
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, pool)
			type want struct {
				status engine.Status
				msg    string
			}
			cases := []struct {
				c tcase
				w want
			}{
				{tcase{in: "sum 1 2\n", exp: "3\n", weight: 10}, want{engine.StatusAccepted, ""}},
				{tcase{in: "sum 2 2\n", exp: "5\n", weight: 10}, want{engine.StatusWrongAnswer, "expected"}},
				{tcase{in: "", exp: ""}, want{engine.StatusAccepted, ""}},
				{tcase{in: "busy\n", exp: "x\n"}, want{engine.StatusTimeLimitExceeded, "time limit"}}, // CPU or wall: cores are shared in tests
				{tcase{in: "sleep\n", exp: "woke\n"}, want{engine.StatusTimeLimitExceeded, "wall"}},
				{tcase{in: "mem\n", exp: "1\n"}, want{engine.StatusMemoryLimitExceeded, ""}},
				{tcase{in: "throw\n", exp: "x\n"}, want{engine.StatusRuntimeError, ""}},
				{tcase{in: "segv\n", exp: "x\n"}, want{engine.StatusRuntimeError, "signal"}},
				{tcase{in: "exit\n", exp: "partial\n"}, want{engine.StatusRuntimeError, "exit code 3"}},
				{tcase{in: "ole\n", exp: "x\n"}, want{engine.StatusOutputLimitExceeded, ""}},
				{tcase{in: "sum 40 2\n", exp: "42\n", weight: 5}, want{engine.StatusAccepted, ""}}, // still healthy after all that
			}
			if l.name == "cpp" {
				cases = append(cases, struct {
					c tcase
					w want
				}{tcase{in: "hugealloc\n", exp: "0\n"}, want{engine.StatusMemoryLimitExceeded, "std::bad_alloc"}})
			}
			if pool == "java" {
				// The JVM turns SIGSEGV into its own crash report and abort.
				cases[7].w.msg = ""
			}
			var tcs []tcase
			for _, c := range cases {
				tcs = append(tcs, c.c)
			}
			task := b.langTask(t, pool, l.lang, readTestdata(t, l.prog), tcs...)
			task.Limits = limitsFor(pool)
			// The mem case must reach its limit well inside the CPU limit:
			// page faults cost CPU (up to ~4 ms/MiB on a loaded VM), and
			// filling 256 MiB could turn it into a CPU TLE first.
			task.Limits.MemoryBytes = 64 << 20
			var progress []engine.Progress
			v, err := b.x.Execute(context.Background(), task, engine.ProgressFunc(func(p engine.Progress) { progress = append(progress, p) }))
			require.NoError(t, err)
			require.Len(t, v.Cases, len(cases), "%+v", v)
			for i, c := range cases {
				cr := v.Cases[i]
				require.Equal(t, c.w.status, cr.Status, "case %d (%q): %+v", i+1, strings.TrimSpace(c.c.in), cr)
				require.Contains(t, cr.Message, c.w.msg, "case %d", i+1)
			}
			require.Equal(t, engine.StatusWrongAnswer, v.Status, "the first failing case decides")
			require.Equal(t, float64(10+1+5), v.Score)
			require.Equal(t, int64(10+10+5+int64(len(cases))-3), v.MaxScore)
			require.Equal(t, float64(10), v.Cases[0].Score)
			require.Positive(t, v.Cases[0].MemoryKB)
			require.Positive(t, v.Cases[0].WallTime)
			require.Equal(t, engine.PhaseJudging, progress[len(progress)-1].Phase)
			require.Equal(t, len(cases), progress[len(progress)-1].CasesDone)
			require.NoError(t, b.leftovers(t))
		})
	}
}

// compileErrors holds a source per pool that must not compile.
var compileErrors = map[string]string{
	"cpp":    "int main() { return undefined_name; }\n",
	"java":   "public class Main { public static void main(String[] a) { int x = \"s\" } }\n",
	"python": "def f(:\n    pass\n",
	"arkts":  "let x: number = \"not a number\";\nconsole.log(x);\n",
	// C++ is not C: a class and a reference do not compile as C.
	"c11":        "class A { int x; };\nint main(void) { int a = 1; int &r = a; return r; }\n",
	"c17":        "#include <stdio.h>\nint main(void) { bool ok = true; printf(\"%d\\n\", ok); }\n",
	"javascript": "function f( {\n  return 1;\n}\nconsole.log(f());\n",
}

func TestCompileError(t *testing.T) {
	t.Parallel()
	for _, l := range verdictLanguages {
		pool := l.pool
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, pool)
			v := b.run(t, b.langTask(t, pool, l.lang, compileErrors[l.name], tcase{in: "sum 1 2", exp: "3"}))
			require.Equal(t, engine.StatusCompileError, v.Status)
			require.NotEmpty(t, v.CompileLog)
			require.LessOrEqual(t, len(v.CompileLog), CompileLogBytesDefault+100)
			require.Empty(t, v.Cases, "no case runs after a CE")
		})
	}
}

func TestCompileLogIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	// Errors whose lines are long (g++ quotes the name and the source line):
	// even the few that -fmax-errors lets through overflow the kept log,
	// which is cut while the compiler writes it.
	src := strings.Repeat("int f() { return undefined_"+strings.Repeat("x", 4000)+"; }\n", 100)
	v := b.run(t, b.task(t, "cpp", src+"int main(){}\n"))
	require.Equal(t, engine.StatusCompileError, v.Status)
	require.Contains(t, v.CompileLog, "truncated")
	require.LessOrEqual(t, len(v.CompileLog), CompileLogBytesDefault+100)
}

// TestFloatAndSpecialChecker covers the float checker and a special judge
// (written in C++) for every runtime.
func TestFloatAndSpecialChecker(t *testing.T) {
	t.Parallel()
	for _, l := range verdictLanguages {
		pool := l.pool
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, pool, "cpp")
			src := readTestdata(t, l.prog)

			task := b.langTask(t, pool, l.lang, src, tcase{in: "float", exp: "3.1416\n"}, tcase{in: "float", exp: "3.15"}, tcase{in: "sum 1 1", exp: "2.0000001"})
			task.Limits = limitsFor(pool)
			task.Checker = engine.Checker{Kind: engine.CheckerFloat, AbsTol: 1e-4}
			v := b.run(t, task)
			require.Equal(t, []engine.Status{engine.StatusAccepted, engine.StatusWrongAnswer, engine.StatusAccepted}, statuses(v))

			cppRT, err := DefaultRuntime("cpp")
			require.NoError(t, err)
			task = b.langTask(t, pool, l.lang, src, tcase{in: "sqrt 16", exp: "any root"}, tcase{in: "sqrtbad 25", exp: "any root"}, tcase{in: "sqrt 1000000", exp: ""})
			task.Limits = limitsFor(pool)
			task.Checker = engine.Checker{Kind: engine.CheckerSpecial, SpecialSource: []byte(readTestdata(t, "checker.cpp")), SpecialRuntime: cppRT}
			v = b.run(t, task)
			require.Equal(t, []engine.Status{engine.StatusAccepted, engine.StatusWrongAnswer, engine.StatusAccepted}, statuses(v))
			require.Contains(t, v.Cases[1].Message, "25^2 != 25")
			require.NoError(t, b.leftovers(t))
		})
	}
}

func TestSpecialJudgeFaultsAreInfrastructure(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	cppRT, err := DefaultRuntime("cpp")
	require.NoError(t, err)
	src := readTestdata(t, "prog.cpp")

	// Crashes on n == 0: a problem fault, never the user's WA.
	task := b.task(t, "cpp", src, tcase{in: "sqrt 4", exp: ""}, tcase{in: "sqrt 0", exp: ""})
	task.Checker = engine.Checker{Kind: engine.CheckerSpecial, SpecialSource: []byte(readTestdata(t, "checker.cpp")), SpecialRuntime: cppRT}
	_, err = b.x.Execute(context.Background(), task, nil)
	requireClass(t, err, engine.InfraCheckerFailed)

	task.Checker.SpecialSource = []byte("this is not C++")
	_, err = b.x.Execute(context.Background(), task, nil)
	requireClass(t, err, engine.InfraCheckerFailed)
	require.NoError(t, b.leftovers(t))
}

func statuses(v engine.Verdict) []engine.Status {
	var s []engine.Status
	for _, c := range v.Cases {
		s = append(s, c.Status)
	}
	return s
}

func requireClass(t *testing.T, err error, class engine.InfraClass) {
	t.Helper()
	require.Error(t, err)
	require.True(t, errors.Is(err, engine.ErrInfrastructure) || class == engine.InfraCancelled, "%v", err)
	require.Equal(t, class, engine.ClassOf(err), "%v", err)
}
