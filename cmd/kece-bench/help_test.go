package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/cmd/internal/golden"
)

// buildBench builds kece-bench as shipped: its main exits the process, so
// the help and version tests run the binary.
func buildBench(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", dir+"/", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return filepath.Join(dir, "kece-bench")
}

// runBench runs bin with args and no KECE_ variables (some defaults come
// from the environment) and returns its exit code, stdout and stderr.
func runBench(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String(), errb.String()
	}
	require.NoError(t, err)
	return 0, out.String(), errb.String()
}

// --help exits 0 for the tool and for every benchmark, whose flags (and
// their KECE_BENCH_<BENCHMARK>_<FLAG> variables) are pinned in
// testdata/help. A benchmark's help comes from the flag package, which
// prints it on stderr; the golden file is what the terminal shows.
func TestHelpGolden(t *testing.T) {
	t.Parallel()
	bin := buildBench(t)
	code, out, errOut := runBench(t, bin, "--help")
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut)
	golden.Check(t, "./cmd/kece-bench", filepath.Join("help", "kece-bench.golden"), out)
	for _, alias := range []string{"-h", "help"} {
		code, same, _ := runBench(t, bin, alias)
		require.Equal(t, 0, code, alias)
		require.Equal(t, out, same, alias)
	}
	for _, c := range commands() {
		require.Regexp(t, `(?m)^  `+c.name+` `, out)
		code, out, errOut := runBench(t, bin, c.name, "--help")
		require.Equal(t, 0, code, "%s: %s", c.name, errOut)
		require.Contains(t, errOut, "Usage of "+c.name+":", c.name)
		golden.Check(t, "./cmd/kece-bench", filepath.Join("help", "kece-bench_"+c.name+".golden"), machineFree(out+errOut))
	}
	// With nothing to do it is a usage error, not help.
	code, _, errOut = runBench(t, bin)
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

func TestVersion(t *testing.T) {
	t.Parallel()
	bin := buildBench(t)
	for _, arg := range []string{"--version", "version", "-version"} {
		code, out, errOut := runBench(t, bin, arg)
		require.Equal(t, 0, code, "%s: %s", arg, errOut)
		require.True(t, strings.HasPrefix(out, "kece-bench "), "%s: %q", arg, out)
	}
}
