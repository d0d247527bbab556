package code

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// withoutPhases is a verdict with its measurements cleared, for comparing
// two judgings of one task.
func withoutPhases(v engine.Verdict) engine.Verdict {
	v.Phases = engine.Phases{}
	for i := range v.Cases {
		c := &v.Cases[i]
		c.CPUTime, c.WallTime, c.MemoryKB = 0, 0, 0
	}
	return v
}

// A rejudge compiles nothing: the second judging of the same source in every
// language takes its build from the node's compile cache and judges alike.
func TestCompileCacheRejudgeCompilesNothing(t *testing.T) {
	t.Parallel()
	for _, l := range verdictLanguages {
		pool := l.pool
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, pool)
			src := readTestdata(t, l.prog)
			cases := []tcase{{in: "sum 1 2", exp: "3"}, {in: "sum 40 2", exp: "41"}}
			first := b.run(t, b.langTask(t, pool, l.lang, src, cases...))
			require.Equal(t, []engine.Status{engine.StatusAccepted, engine.StatusWrongAnswer}, statuses(first))
			require.False(t, first.Phases.CompileCached)
			second := b.run(t, b.langTask(t, pool, l.lang, src, cases...))
			require.True(t, second.Phases.CompileCached, "the rejudge's build comes from the cache")
			require.Equal(t, withoutPhases(first), withoutPhases(second))
			require.Positive(t, second.Phases.Sandbox)
			require.Positive(t, second.Phases.Run)
			require.Less(t, second.Phases.Compile, first.Phases.Compile, "a cache hit costs less than the compile")
			require.EqualValues(t, 1, b.x.cache.Stats().Hits)
			require.NoError(t, b.leftovers(t))
		})
	}
}

// A cache entry is never used for another source: sources that differ in
// one byte, or only in a further file, or only in the language standard,
// each compile on their own and judge by their own bytes.
func TestCompileCacheNeverServesAnotherSource(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	const tmpl = `#include <cstdio>
#include "n.h"
int main() { printf("%d\n", N + X); }
`
	run := func(lang, x, header string) engine.Verdict {
		task := b.langTask(t, "cpp", lang, strings.Replace(tmpl, "X", x, 1), tcase{exp: "7"})
		task.Files = []engine.SourceFile{{Name: "n.h", Data: []byte(header)}}
		return b.run(t, task)
	}
	v := run("", "1", "#define N 6\n")
	require.Equal(t, engine.StatusAccepted, v.Status)
	require.False(t, v.Phases.CompileCached)
	// One byte of the source differs: its own compile, its own answer.
	v = run("", "2", "#define N 6\n")
	require.Equal(t, engine.StatusWrongAnswer, v.Status)
	require.False(t, v.Phases.CompileCached)
	// Only the further file differs.
	v = run("", "1", "#define N 5\n")
	require.Equal(t, engine.StatusWrongAnswer, v.Status)
	require.False(t, v.Phases.CompileCached)
	// Only the standard differs.
	v = run("cpp20", "1", "#define N 6\n")
	require.Equal(t, engine.StatusAccepted, v.Status)
	require.False(t, v.Phases.CompileCached)
	// The first again: a hit, still right.
	v = run("", "1", "#define N 6\n")
	require.Equal(t, engine.StatusAccepted, v.Status)
	require.True(t, v.Phases.CompileCached)
	require.Equal(t, 4, b.x.cache.Stats().Entries)
}

// An entry whose bytes were changed on disk is dropped, the compile runs
// again, and the verdict is the source's own.
func TestCompileCacheCorruptEntryIsRecompiled(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	src := readTestdata(t, "prog.cpp")
	v := b.run(t, b.task(t, "cpp", src, tcase{in: "sum 1 2", exp: "3"}))
	require.Equal(t, engine.StatusAccepted, v.Status)
	// Overwrite every cached file with a program that prints the answer of
	// another problem.
	cacheDir := filepath.Join(b.dir, "ws", CompileCacheDirName)
	n := 0
	require.NoError(t, filepath.WalkDir(cacheDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(filepath.Dir(p)) == "files" {
			n++
			return os.WriteFile(p, []byte("#!/bin/sh\necho 3\n"), 0o755)
		}
		return err
	}))
	require.Positive(t, n)
	v = b.run(t, b.task(t, "cpp", src, tcase{in: "sum 1 2", exp: "3"}, tcase{in: "sum 2 2", exp: "4"}))
	require.Equal(t, engine.StatusAccepted, v.Status, "the corrupt entry was not trusted")
	require.False(t, v.Phases.CompileCached)
	require.EqualValues(t, 1, b.x.cache.Stats().Dropped)
}

// A compile error is cached too, and a cached one needs no sandbox.
func TestCompileCacheKeepsCompileErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, "python")
	src := compileErrors["python"]
	first := b.run(t, b.task(t, "python", src, tcase{exp: "1"}))
	require.Equal(t, engine.StatusCompileError, first.Status)
	second := b.run(t, b.task(t, "python", src, tcase{exp: "1"}))
	require.Equal(t, engine.StatusCompileError, second.Status)
	require.True(t, second.Phases.CompileCached)
	require.Zero(t, second.Phases.Sandbox, "no sandbox starts for a cached compile error")
	require.Equal(t, first.CompileLog, second.CompileLog)
	require.Equal(t, first.Message, second.Message)
}

// A special judge is compiled once per node: the second submission to the
// problem takes the checker's build from the cache.
func TestCheckerCompiledOncePerNode(t *testing.T) {
	t.Parallel()
	b := setup(t, "python", "cpp")
	cppRT, err := DefaultRuntime("cpp")
	require.NoError(t, err)
	judge := func(src string) engine.Verdict {
		task := b.task(t, "python", src, tcase{in: "sqrt 16", exp: "any root"}, tcase{in: "sqrtbad 25", exp: "any root"})
		task.Checker = engine.Checker{Kind: engine.CheckerSpecial, SpecialSource: []byte(readTestdata(t, "checker.cpp")), SpecialRuntime: cppRT}
		return b.run(t, task)
	}
	prog := readTestdata(t, "prog.py")
	v := judge(prog)
	require.Equal(t, []engine.Status{engine.StatusAccepted, engine.StatusWrongAnswer}, statuses(v))
	require.False(t, v.Phases.CheckerCached)
	require.Positive(t, v.Phases.Checker)
	require.Positive(t, v.Phases.Check)
	// Another submission (one more line) to the same problem.
	v = judge(prog + "\n# another submission\n")
	require.Equal(t, []engine.Status{engine.StatusAccepted, engine.StatusWrongAnswer}, statuses(v))
	require.True(t, v.Phases.CheckerCached, "the checker is not compiled again")
	require.False(t, v.Phases.CompileCached)
	require.NoError(t, b.leftovers(t))
}
