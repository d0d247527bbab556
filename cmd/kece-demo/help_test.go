package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/cmd/internal/golden"
)

// runDemo builds kece-demo once per test (its main exits the process) and
// returns a runner: exit code, stdout and stderr of the binary, run as
// "kece-demo" (the flag package names os.Args[0] in its help) with no
// KECE_DEMO_ variables.
func runDemo(t *testing.T) func(args ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", dir+"/", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	bin := filepath.Join(dir, "kece-demo")
	return func(args ...string) (int, string, string) {
		cmd := exec.Command(bin, args...)
		cmd.Args[0] = "kece-demo"
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), out.String(), errb.String()
		}
		require.NoError(t, err, args)
		return 0, out.String(), errb.String()
	}
}

// --help (and -h) exits 0 and prints the flags with their defaults; the
// flag package prints it on stderr, and the golden file is what the
// terminal shows.
func TestHelpGolden(t *testing.T) {
	t.Parallel()
	run := runDemo(t)
	code, out, errOut := run("--help")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "Usage of kece-demo:")
	golden.Check(t, "./cmd/kece-demo", filepath.Join("help", "kece-demo.golden"), out+errOut)
	code, _, same := run("-h")
	require.Equal(t, 0, code)
	require.Equal(t, errOut, same)
	// A bad setting is a usage error (exit 2) naming the variable.
	code, _, errOut = run("--timeout", "soon")
	require.Equal(t, 2, code, errOut)
}

func TestVersion(t *testing.T) {
	t.Parallel()
	run := runDemo(t)
	for _, arg := range []string{"--version", "version", "-version"} {
		code, out, errOut := run(arg)
		require.Equal(t, 0, code, "%s: %s", arg, errOut)
		require.True(t, strings.HasPrefix(out, "kece-demo "), "%s: %q", arg, out)
	}
}
