package sandboxinit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The supervisor kills every process it can see after each run, so it must
// refuse to serve anywhere but as PID 1 of a sandbox (this test process is not).
func TestServeRefusesOutsideSandbox(t *testing.T) {
	t.Parallel()
	require.Equal(t, 2, Main([]string{"kece-sandbox-init", "serve"}))
	require.Equal(t, 2, Main([]string{"kece-sandbox-init"}))
	require.Equal(t, 2, Main([]string{"kece-sandbox-init", "launch"}))
}

func TestReadBounded(t *testing.T) {
	t.Parallel()
	s, trunc := readBounded(strings.NewReader(strings.Repeat("x", 100000)), 10)
	require.Equal(t, "xxxxxxxxxx", s)
	require.True(t, trunc)
	s, trunc = readBounded(strings.NewReader("short"), 10)
	require.Equal(t, "short", s)
	require.False(t, trunc)
}

func TestCPUOfOwnProcess(t *testing.T) {
	t.Parallel()
	x := 0
	for i := 0; i < 50_000_000; i++ {
		x += i
	}
	require.NotZero(t, x)
	require.Positive(t, cpuOf(os.Getpid()))
	require.Zero(t, cpuOf(-1))
}

func TestLookPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "prog")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data"), nil, 0o644))
	p, err := lookPath("prog", []string{"PATH=/nonexistent:" + dir})
	require.NoError(t, err)
	require.Equal(t, bin, p)
	_, err = lookPath("data", []string{"PATH=" + dir})
	require.Error(t, err, "not executable")
	p, err = lookPath("./main", nil)
	require.NoError(t, err)
	require.Equal(t, "./main", p)
}

func TestCleanEmptiesDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a", "b", "f"), []byte("x"), 0o644))
	require.NoError(t, os.Chmod(filepath.Join(dir, "a"), 0o000))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "g"), []byte("x"), 0o000))
	require.Equal(t, 0, clean(dir))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}
