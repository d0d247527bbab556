package main

import (
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/cmd/internal/golden"
)

// --help exits 0 for the tool and for every benchmark, whose flags (and
// their KECE_BENCH_<BENCHMARK>_<FLAG> variables) are pinned in
// testdata/help. A benchmark's help comes from the flag package, which
// prints it on stderr; the golden file is what the terminal shows.
func TestHelpGolden(t *testing.T) {
	t.Parallel()
	bin := golden.Build(t)
	code, out, errOut := bin.Run("--help")
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut)
	golden.Check(t, "./cmd/kece-bench", filepath.Join("help", "kece-bench.golden"), out)
	for _, alias := range []string{"-h", "help"} {
		code, same, _ := bin.Run(alias)
		require.Equal(t, 0, code, alias)
		require.Equal(t, out, same, alias)
	}
	for _, c := range commands() {
		require.Regexp(t, `(?m)^  `+c.name+` `, out)
		code, out, errOut := bin.Run(c.name, "--help")
		require.Equal(t, 0, code, "%s: %s", c.name, errOut)
		require.Contains(t, errOut, "Usage of "+c.name+":", c.name)
		golden.Check(t, "./cmd/kece-bench", filepath.Join("help", "kece-bench_"+c.name+".golden"), machineFree(out+errOut))
	}
	// With nothing to do it is a usage error, not help.
	code, _, errOut = bin.Run()
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "usage: kece-bench")
}

// machineFree replaces the defaults taken from this machine (timing's
// -hogs is its CPU count) by a name, so the golden text is the same on
// every machine.
func machineFree(help string) string {
	return strings.ReplaceAll(help, "CPU hog processes while loaded (default "+strconv.Itoa(runtime.NumCPU())+")",
		"CPU hog processes while loaded (default NumCPU)")
}
