// Package golden compares a command's output with a file under testdata/,
// for the binaries' golden-help tests. `go test ./cmd/X -update` rewrites
// the files instead.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Check compares got with testdata/name of the package under test, or
// rewrites it with -update; pkg (./cmd/kecectl) goes in the message that
// says how to accept a change made on purpose.
func Check(t *testing.T, pkg, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run: go test %s -run %s -update", pkg, t.Name())
	require.Equal(t, string(want), got, "help changed; if on purpose: go test %s -run %s -update", pkg, t.Name())
}
