package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/cmd/internal/golden"
)

// --help (and -h) exits 0 and prints the flags with their defaults; the
// flag package prints it on stderr, and the golden file is what the
// terminal shows.
func TestHelpGolden(t *testing.T) {
	t.Parallel()
	bin := golden.Build(t)
	code, out, errOut := bin.Run("--help")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "Usage of kece-demo:")
	golden.Check(t, "./cmd/kece-demo", filepath.Join("help", "kece-demo.golden"), out+errOut)
	code, _, same := bin.Run("-h")
	require.Equal(t, 0, code)
	require.Equal(t, errOut, same)
	// A bad setting is a usage error (exit 2) naming the variable.
	code, _, errOut = bin.Run("--timeout", "soon")
	require.Equal(t, 2, code, errOut)
}
