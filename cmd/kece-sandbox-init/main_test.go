package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every KECE binary answers --version; the supervisor answers only that
// (its other arguments are the sandbox's), built static as it is shipped.
func TestVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+"/", ".")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, arg := range []string{"--version", "-version"} {
		out, err := exec.Command(filepath.Join(dir, "kece-sandbox-init"), arg).Output()
		require.NoError(t, err, arg)
		require.True(t, strings.HasPrefix(string(out), "kece-sandbox-init "), "%s: %q", arg, out)
	}
}
