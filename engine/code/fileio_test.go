package code

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// sumIO reads "a b" from sum.in and writes a+b to sum.out, per language.
var sumIO = []struct{ name, pool, lang, src string }{
	{"cpp", "cpp", "", "#include <cstdio>\nint main() { long long a, b; freopen(\"sum.in\", \"r\", stdin); freopen(\"sum.out\", \"w\", stdout); scanf(\"%lld %lld\", &a, &b); printf(\"%lld\\n\", a + b); }\n"},
	{"c17", "cpp", "c17", "#include <stdio.h>\nint main(void) { long long a, b; FILE *i = fopen(\"sum.in\", \"r\"), *o = fopen(\"sum.out\", \"w\"); fscanf(i, \"%lld %lld\", &a, &b); fprintf(o, \"%lld\\n\", a + b); return 0; }\n"},
	{"java", "java", "", "import java.io.*;\nimport java.nio.file.*;\npublic class Sum { public static void main(String[] x) throws IOException {\n" +
		"  String[] w = Files.readString(Path.of(\"sum.in\")).trim().split(\"\\\\s+\");\n" +
		"  try (PrintWriter o = new PrintWriter(\"sum.out\")) { o.println(Long.parseLong(w[0]) + Long.parseLong(w[1])); } } }\n"},
	{"python", "python", "", "a, b = map(int, open('sum.in').read().split())\nwith open('sum.out', 'w') as f:\n    f.write(f'{a + b}\\n')\n"},
	{"javascript", "arkts", "javascript", "const fs = require('fs');\nconst [a, b] = fs.readFileSync('sum.in', 'utf8').trim().split(/\\s+/).map(BigInt);\nfs.writeFileSync('sum.out', String(a + b) + '\\n');\n"},
	{"arkts", "arkts", "", "const fs = require('fs');\nconst w: string[] = fs.readFileSync('sum.in', 'utf8').trim().split(/\\s+/);\nfs.writeFileSync('sum.out', String(BigInt(w[0]) + BigInt(w[1])) + '\\n');\n"},
}

// Every language reads its input from sum.in and writes sum.out in its
// working directory: the first case is AC, the second's expected output is
// wrong (1 2 -> 4), so it is WA: the file is really compared. (A program that
// writes only to stdout has not answered: TestFileOutputRules, "stdout".)
func TestFileIO(t *testing.T) {
	t.Parallel()
	for _, l := range sumIO {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, l.pool)
			task := b.langTask(t, l.pool, l.lang, l.src, tcase{in: "40 2\n", exp: "42\n"}, tcase{in: "1 2\n", exp: "4\n"})
			task.Limits = limitsFor(l.pool)
			task.IO = engine.FileIO{InputFile: "sum.in", OutputFile: "sum.out"}
			v := b.run(t, task)
			require.Equal(t, []engine.Status{engine.StatusAccepted, engine.StatusWrongAnswer}, statuses(v), "%+v %s", v.Cases, v.CompileLog)
			require.NoError(t, b.leftovers(t))
		})
	}
}

// The rules of file output, driven by testdata/fileio.cpp: a missing file
// is WA with a message, never RE; a symlink, FIFO or directory in its place
// is refused (WA); the file's mode does not hide it; it is bounded by the
// output limit; the input is the supervisor's and read-only; stdin is
// /dev/null unless the problem allows stdio.
func TestFileOutputRules(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	type want struct {
		status engine.Status
		msg    string
	}
	cases := []struct {
		c tcase
		w want
	}{
		{tcase{in: "sum 1 2", exp: "3\n"}, want{engine.StatusAccepted, ""}},
		{tcase{in: "stdout 1 2", exp: "3\n"}, want{engine.StatusWrongAnswer, "output file sum.out was not created"}},
		{tcase{in: "symlink", exp: "root\n"}, want{engine.StatusWrongAnswer, "sum.out is a symbolic link, not a regular file: refused"}},
		{tcase{in: "fifo", exp: "x\n"}, want{engine.StatusWrongAnswer, "a FIFO, not a regular file"}},
		{tcase{in: "dir", exp: "x\n"}, want{engine.StatusWrongAnswer, "a directory, not a regular file"}},
		{tcase{in: "chmod 20 22", exp: "42\n"}, want{engine.StatusAccepted, ""}},
		{tcase{in: "big", exp: "x\n"}, want{engine.StatusOutputLimitExceeded, ""}},
		{tcase{in: "replacein", exp: "readonly kept\n"}, want{engine.StatusAccepted, ""}},
		{tcase{in: "stdin", exp: "EOF\n"}, want{engine.StatusAccepted, ""}},
		{tcase{in: "crash 1 2", exp: "3\n"}, want{engine.StatusRuntimeError, "exit code 3"}},
		{tcase{in: "sum 40 2", exp: "42\n"}, want{engine.StatusAccepted, ""}}, // nothing left over from the cases before
	}
	var tcs []tcase
	for _, c := range cases {
		tcs = append(tcs, c.c)
	}
	task := b.task(t, "cpp", readTestdata(t, "fileio.cpp"), tcs...)
	task.Limits = limitsFor("cpp")
	task.IO = engine.FileIO{InputFile: "sum.in", OutputFile: "sum.out"}
	v := b.run(t, task)
	require.Len(t, v.Cases, len(cases), "%+v %s", v, v.CompileLog)
	for i, c := range cases {
		require.Equal(t, c.w.status, v.Cases[i].Status, "case %d (%s): %+v", i+1, c.c.in, v.Cases[i])
		require.Contains(t, v.Cases[i].Message, c.w.msg, "case %d", i+1)
	}
	require.NoError(t, b.leftovers(t))
}

// With stdio allowed the input is also stdin, and a program that writes no
// file is judged on its stdout; a file, when written, is what counts.
func TestFileIOWithStdio(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	task := b.task(t, "cpp", readTestdata(t, "fileio.cpp"),
		tcase{in: "stdout 1 2", exp: "3\n"}, tcase{in: "sum 1 2", exp: "3\n"}, tcase{in: "stdin 5", exp: "stdin\n"})
	task.IO = engine.FileIO{InputFile: "sum.in", OutputFile: "sum.out", Stdio: true}
	v := b.run(t, task)
	require.Equal(t, []engine.Status{engine.StatusAccepted, engine.StatusAccepted, engine.StatusAccepted}, statuses(v), "%+v", v.Cases)

	// Output to a file only, input on stdin (the problem names no input file).
	task = b.task(t, "cpp", "#include <cstdio>\nint main() { long a, b; scanf(\"%ld %ld\", &a, &b); FILE *o = fopen(\"ans.txt\", \"w\"); fprintf(o, \"%ld\\n\", a * b); }\n",
		tcase{in: "6 7", exp: "42\n"})
	task.IO = engine.FileIO{OutputFile: "ans.txt"}
	v = b.run(t, task)
	require.Equal(t, []engine.Status{engine.StatusAccepted}, statuses(v), "%+v", v.Cases)
	require.NoError(t, b.leftovers(t))
}

// A special checker judges the output file's content.
func TestFileIOSpecialChecker(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	cppRT, err := DefaultRuntime("cpp")
	require.NoError(t, err)
	task := b.task(t, "cpp", readTestdata(t, "fileio.cpp"), tcase{in: "sqrt 16", exp: ""}, tcase{in: "sum 25 0", exp: ""})
	task.IO = engine.FileIO{InputFile: "sum.in", OutputFile: "sum.out"}
	task.Checker = engine.Checker{Kind: engine.CheckerSpecial, SpecialSource: []byte(readTestdata(t, "checker.cpp")), SpecialRuntime: cppRT}
	v := b.run(t, task)
	require.Equal(t, []engine.Status{engine.StatusAccepted, engine.StatusWrongAnswer}, statuses(v), "%+v", v.Cases)
	require.NoError(t, b.leftovers(t))
}

// Unusable file names are the problem's fault, refused before anything runs.
func TestValidateIO(t *testing.T) {
	t.Parallel()
	for _, ok := range []engine.FileIO{{}, {InputFile: "a.in"}, {OutputFile: "a.out"}, {InputFile: "x.in", OutputFile: "x.out", Stdio: true}} {
		require.NoError(t, validateIO(ok), "%+v", ok)
	}
	for _, bad := range []engine.FileIO{{Stdio: true}, {InputFile: "a", OutputFile: "a"}, {InputFile: "../a"}, {OutputFile: "main"},
		{InputFile: "main.py"}, {OutputFile: "Main.class"}, {OutputFile: ".hidden"}, {InputFile: "a/b"}} {
		requireClass(t, validateIO(bad), engine.InfraConfig)
	}
}
