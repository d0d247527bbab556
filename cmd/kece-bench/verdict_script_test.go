package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// scripts/bench-verdict.sh's own logic, on a PATH of stubs: with every
// native tool missing it installs exactly their Debian packages through
// apt-get with a bounded wait for the dpkg lock, fetches the package lists
// and tries again when the first install fails, then runs the benchmark
// from KECE_BENCH_BIN_DIR (given relative to where it was started) with the
// arguments given; with the tools present it installs nothing. The real
// install is run by hand (docs/verdict-time.md).
func TestBenchVerdictScriptInstallsMissingToolsThenRuns(t *testing.T) {
	t.Parallel()
	script, err := filepath.Abs("../../scripts/bench-verdict.sh")
	require.NoError(t, err)
	if os.Geteuid() != 0 {
		t.Skip("the script installs packages only as root")
	}
	dir := t.TempDir()
	stubs := filepath.Join(dir, "path")
	require.NoError(t, os.Mkdir(stubs, 0o755))
	// The shell utilities the script uses, and nothing of the toolchain.
	for _, tool := range []string{"bash", "dirname", "id", "mktemp", "rm", "cat"} {
		p, err := exec.LookPath(tool)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(p, filepath.Join(stubs, tool)))
	}
	log := filepath.Join(dir, "calls.log")
	stub := func(path, body string) {
		require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755))
	}
	// apt-get fails its first install (no package lists yet).
	stub(filepath.Join(stubs, "apt-get"), `echo "apt-get $*" >>`+log+`
case "$*" in *" install "*) [ -e `+dir+`/updated ] || exit 100 ;; *" update "*) : >`+dir+`/updated ;; esac
`)
	binDir := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(binDir, 0o755))
	stub(filepath.Join(binDir, "kece-bench"), `echo "kece-bench $*" >>`+log+"\n")

	run := func() string {
		t.Helper()
		require.NoError(t, os.WriteFile(log, nil, 0o644))
		cmd := exec.Command(script, "-n", "3", "-languages", "c17")
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + stubs, "KECE_BENCH_BIN_DIR=bin", "KECE_BENCH_APT_WAIT=7"}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		calls, err := os.ReadFile(log)
		require.NoError(t, err)
		return string(calls)
	}
	calls := strings.Split(strings.TrimSpace(run()), "\n")
	install := "apt-get -o DPkg::Lock::Timeout=7 install -y -qq --no-install-recommends gcc g++ default-jdk-headless python3 nodejs node-typescript"
	require.Equal(t, []string{install, "apt-get -o DPkg::Lock::Timeout=7 update -qq", install,
		"kece-bench verdict -bin " + binDir + " -n 3 -languages c17"}, calls)

	// Every tool present: nothing is installed.
	for _, tool := range []string{"gcc", "g++", "javac", "java", "python3", "node", "tsc"} {
		stub(filepath.Join(stubs, tool), "exit 0\n")
	}
	require.Equal(t, "kece-bench verdict -bin "+binDir+" -n 3 -languages c17\n", run())
}
