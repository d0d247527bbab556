package golden

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Binary is the command built from the package under test, for binaries
// whose main exits the process (kece-bench, kece-demo): their help is read
// from the built program.
type Binary struct {
	t    *testing.T
	path string
	name string
}

// Build builds the package in the working directory (the command under
// test) into a temporary directory.
func Build(t *testing.T) Binary {
	t.Helper()
	wd, err := os.Getwd()
	require.NoError(t, err)
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", dir+"/", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	name := filepath.Base(wd)
	return Binary{t: t, path: filepath.Join(dir, name), name: name}
}

// Run runs the binary as its own name (the flag package prints os.Args[0]
// in its help) with no variable but PATH, so no KECE_ setting of this
// machine shows as a default, and returns its exit code, stdout and stderr.
func (b Binary) Run(args ...string) (code int, stdout, stderr string) {
	b.t.Helper()
	cmd := exec.Command(b.path, args...)
	cmd.Args[0] = b.name
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String(), errb.String()
	}
	require.NoError(b.t, err, "%s %v", b.name, args)
	return 0, out.String(), errb.String()
}
