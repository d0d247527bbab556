package code

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code/sandboxinit"
)

// memoryMarker finds the runtime's report in either stream, keeps the JVM's
// headline, and ignores what is not a memory failure.
func TestMemoryMarker(t *testing.T) {
	t.Parallel()
	java, err := RuntimeForLanguage("java17")
	require.NoError(t, err)
	py, err := RuntimeForLanguage("python3")
	require.NoError(t, err)
	for _, tc := range []struct {
		rt   engine.RuntimeSpec
		text string
		want string
	}{
		{java, "Error occurred during initialization of VM\nToo small maximum heap\n", "Error occurred during initialization of VM: Too small maximum heap"},
		{java, "Error occurred during initialization of VM\nCould not reserve enough space for 2097152KB object heap\n", "Error occurred during initialization of VM: Could not reserve enough space for 2097152KB object heap"},
		{java, "Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space\n\tat Main.main(Main.java:5)\n", `Exception in thread "main" java.lang.OutOfMemoryError: Java heap space`},
		{java, "[0.010s][warning][os,thread] Failed to start thread\nException in thread \"main\" java.lang.OutOfMemoryError: unable to create native thread: possibly out of memory\n", ""},
		{java, "Exception in thread \"main\" java.lang.RuntimeException: boom\n", ""},
		{py, "Traceback (most recent call last):\n  File \"main.py\", line 3, in <module>\nMemoryError\n", "MemoryError"},
		{py, "", ""},
	} {
		require.Equal(t, tc.want, memoryMarker(tc.text, tc.rt), tc.text)
	}
}

// compileFailure names the limit that stopped a compiler, with its figure.
func TestCompileFailureMessages(t *testing.T) {
	t.Parallel()
	rt, err := RuntimeForLanguage("cpp17")
	require.NoError(t, err)
	for _, tc := range []struct {
		res  sandboxinit.Result
		want string
	}{
		{sandboxinit.Result{}, ""},
		{sandboxinit.Result{ExitCode: 1}, "compilation failed"},
		{sandboxinit.Result{CPUExceeded: true, Signal: 9}, "compilation exceeded 10 s CPU"},
		{sandboxinit.Result{Signal: 24}, "compilation exceeded 10 s CPU"},
		{sandboxinit.Result{WallExceeded: true, Signal: 9}, "compilation exceeded 40 s wall time"},
		{sandboxinit.Result{OOMKilled: true, ExitCode: 1}, "compiler exceeded 768 MiB"},
		{sandboxinit.Result{Signal: 25}, "compiler output exceeded 256 MiB"},
		{sandboxinit.Result{Signal: 11}, "compiler killed by signal 11 (segmentation fault)"},
	} {
		require.Equal(t, tc.want, compileFailure(tc.res, rt, rt.CompileMemoryBytes), "%+v", tc.res)
	}
}

// Runtime memory failures are MLE with the runtime's words, wherever printed;
// the same words in the output of a run that succeeds are only output.
func TestMemoryVerdicts(t *testing.T) {
	t.Parallel()
	hugeMsg := map[string]string{
		"cpp": "std::bad_alloc", "java": "java.lang.OutOfMemoryError", "python": "MemoryError", "arkts": "JavaScript heap out of memory",
	}
	printed := map[string]string{
		"cpp": "std::bad_alloc\n", "java": "java.lang.OutOfMemoryError\n", "python": "MemoryError\n", "arkts": "JavaScript heap out of memory\n",
	}
	for _, pool := range []string{"cpp", "java", "python", "arkts"} {
		t.Run(pool, func(t *testing.T) {
			t.Parallel()
			b := setup(t, pool)
			task := b.task(t, pool, readTestdata(t, progs[pool]), tcase{in: "hugealloc\n", exp: "0\n"}, tcase{in: "printoom\n", exp: printed[pool]})
			task.Limits = limitsFor(pool)
			if pool == "arkts" {
				// A small heap so V8 gives up on its own before peak RSS decides.
				task.Limits.MemoryBytes = 64 << 20
			}
			v := b.run(t, task)
			require.Equal(t, []engine.Status{engine.StatusMemoryLimitExceeded, engine.StatusAccepted}, statuses(v), "%+v", v.Cases)
			require.Contains(t, v.Cases[0].Message, hugeMsg[pool])
			require.NoError(t, b.leftovers(t))
		})
	}
}

// Every language runs a+b at exactly its minimum memory limit; the JVM below
// it cannot start, says so on stdout, and that is an MLE with its words.
func TestMinimumMemory(t *testing.T) {
	t.Parallel()
	srcs := map[string]string{
		"cpp17":      "#include <bits/stdc++.h>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b << std::endl; }\n",
		"java17":     "import java.util.*;\npublic class Main { public static void main(String[] x) { Scanner s = new Scanner(System.in); System.out.println(s.nextLong() + s.nextLong()); } }\n",
		"python3":    "a, b = map(int, input().split())\nprint(a + b)\n",
		"c17":        "#include <stdio.h>\nint main(void) { long a, b; scanf(\"%ld %ld\", &a, &b); printf(\"%ld\\n\", a + b); return 0; }\n",
		"javascript": "const w = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/);\nconsole.log(Number(w[0]) + Number(w[1]));\n",
		"arkts":      "const fs = require('fs');\nconst w: string[] = fs.readFileSync(0, 'utf8').trim().split(/\\s+/);\nconsole.log(Number(w[0]) + Number(w[1]));\n",
	}
	for lang, src := range srcs {
		rt, err := RuntimeForLanguage(lang)
		require.NoError(t, err)
		limits := []int64{rt.MinMemoryBytes}
		if lang == "java17" {
			limits = append(limits, 1<<20)
		}
		for _, mem := range limits {
			t.Run(fmt.Sprintf("%s/%dMiB", lang, mem>>20), func(t *testing.T) {
				t.Parallel()
				b := setup(t, rt.Pool)
				task := b.task(t, rt.Pool, src, tcase{in: "40 2\n", exp: "42\n"})
				task.Runtime = rt
				task.Limits.MemoryBytes = mem
				v, err := b.x.Execute(context.Background(), task, nil)
				require.NoError(t, err)
				if mem >= rt.MinMemoryBytes {
					require.Equal(t, engine.StatusAccepted, v.Status, "%+v %s", v.Cases, v.CompileLog)
					return
				}
				require.Equal(t, engine.StatusMemoryLimitExceeded, v.Status, "%+v", v.Cases)
				require.Contains(t, v.Cases[0].Message, "Too small maximum heap")
			})
		}
	}
}
