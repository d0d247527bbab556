package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/internal/loopback"
)

// scripts/bench-scheduler.sh as docs/scheduling.md tells a user to run it,
// with a short window: a private durable MariaDB in a temporary directory,
// its redo log written through, the scheduler benchmark against it with the
// server's CPU reported, and the server gone afterwards. It needs the
// MariaDB server binaries (not a running server); KECE_REQUIRE_MYSQL=1
// makes their absence a failure.
func TestBenchSchedulerScript(t *testing.T) {
	requireMariaDBBinaries(t)
	port := freePort(t)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	script, err := filepath.Abs("../../scripts/bench-scheduler.sh")
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, script, "-duration", "1s")
	cmd.Env = append(os.Environ(), "KECE_BENCH_PORT="+port, "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	figures := map[string]string{}
	for line := range strings.Lines(string(out)) {
		for field := range strings.FieldsSeq(line) {
			if k, v, ok := strings.Cut(field, "="); ok {
				figures[k] = v
			}
		}
	}
	require.Equal(t, "1", figures["innodb_flush_log_at_trx_commit"], "durable, as the script says:\n%s", out)
	for _, k := range []string{"commit_rate_per_s", "lifecycles_per_s", "server_cpu_ms_per_lifecycle", "bench_cpu_ms_per_lifecycle"} {
		v, err := strconv.ParseFloat(figures[k], 64)
		require.NoError(t, err, "%s in:\n%s", k, out)
		require.Positive(t, v, "%s in:\n%s", k, out)
	}
	if n := figures["redo_unwritten_extents"]; n != "-1" {
		require.Equal(t, "0", n, "the redo log is written through before the bench:\n%s", out)
	}
	_, err = net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
	require.Error(t, err, "the private server is stopped when the script ends")
}

// requireMariaDBBinaries skips a test that runs the bench scripts (which
// start a private server) where the MariaDB server binaries are absent,
// and fails it when KECE_REQUIRE_MYSQL=1.
func requireMariaDBBinaries(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("mariadb-install-db"); err != nil {
		if os.Getenv("KECE_REQUIRE_MYSQL") == "1" {
			t.Fatalf("mariadb-install-db not found (KECE_REQUIRE_MYSQL=1): %v", err)
		}
		t.Skip("mariadb-install-db not found: install mariadb-server")
	}
}

// freePort is a loopback port free a moment ago, for a private server.
func freePort(t *testing.T) string {
	t.Helper()
	addr, err := loopback.FreeAddr()
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	return port
}

// scripts/bench-river-pairs.sh's own logic, with both benchmarks replaced
// by stubs (RIVER_RUN, KECE_RUN) that print fixed figures and log the order
// they ran in and the TMPDIR they saw (started from another directory,
// with the stubs named relative to it): the pairs alternate River first, the
// tmpfs regime puts both data directories on /dev/shm, the totals are the
// sums' ratio, and bad input is refused with a message that says what to
// fix. This is no measurement: the real pairs are run by hand
// (docs/scheduling.md).
func TestBenchRiverPairsScript(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "order.log")
	stub := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755))
		return p
	}
	n := filepath.Join(dir, "n")
	river := stub("river.sh", `echo "river $1 $2 $TMPDIR" >>`+log+`
echo river_commit_rate_per_s=20000
echo river_jobs_per_s=4000
`)
	// KECE's stub alternates 3000 and 5000 lifecycles/s: together 8000 of 8000.
	kece := stub("kece.sh", `echo "kece $1 $2 $TMPDIR" >>`+log+`
c=$(cat `+n+` 2>/dev/null || echo 0); echo $((c+1)) >`+n+`
echo commit_rate_per_s=30000
if [ $((c % 2)) = 0 ]; then echo lifecycles_per_s=3000; else echo lifecycles_per_s=5000; fi
echo server_cpu_ms_per_lifecycle=0.40
`)
	script, err := filepath.Abs("../../scripts/bench-river-pairs.sh")
	require.NoError(t, err)
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(script, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	// Started elsewhere, with the benchmarks named relative to there.
	out, err := run([]string{"RIVER_RUN=river.sh", "KECE_RUN=./kece.sh"}, "-regime", "tmpfs", "-pairs", "2", "-duration", "3s")
	require.NoError(t, err, out)
	require.Contains(t, out, "pair=1 regime=tmpfs river_jobs_per_s=4000 river_commit_rate_per_s=20000 lifecycles_per_s=3000 commit_rate_per_s=30000 server_cpu_ms_per_lifecycle=0.40 ratio=0.75\n")
	require.Contains(t, out, "pair=2 regime=tmpfs river_jobs_per_s=4000 river_commit_rate_per_s=20000 lifecycles_per_s=5000 commit_rate_per_s=30000 server_cpu_ms_per_lifecycle=0.40 ratio=1.25\n")
	require.Contains(t, out, "pairs=2 regime=tmpfs river_jobs_per_s_mean=4000 kece_lifecycles_per_s_mean=4000 ratio_together=1.00\n")
	order, err := os.ReadFile(log)
	require.NoError(t, err)
	require.Equal(t, "river -duration 3s /dev/shm\nkece -duration 3s /dev/shm\nriver -duration 3s /dev/shm\nkece -duration 3s /dev/shm\n", string(order))

	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"RIVER_RUN="}, nil, "set RIVER_RUN to River's benchmark script"},
		{[]string{"RIVER_RUN=" + filepath.Join(dir, "absent.sh")}, nil, "is not an executable file"},
		{[]string{"RIVER_RUN=" + river, "KECE_RUN=" + kece}, []string{"-regime", "ssd"}, "-regime must be disk or tmpfs, not ssd"},
		{[]string{"RIVER_RUN=" + river, "KECE_RUN=" + kece}, []string{"-pairs", "0"}, "-pairs must be a whole number of at least 1, not 0"},
		{[]string{"RIVER_RUN=" + river, "KECE_RUN=" + kece}, []string{"-window", "2s"}, "unknown argument -window"},
		{[]string{"RIVER_RUN=" + stub("silent.sh", "echo started\n"), "KECE_RUN=" + kece}, []string{"-pairs", "1"}, "no river_jobs_per_s= in the output of that run"},
	} {
		out, err := run(c.env, c.args...)
		require.Error(t, err, "%v %v:\n%s", c.env, c.args, out)
		require.Contains(t, out, c.want, "%v %v", c.env, c.args)
	}
}

// The command docs/scheduling.md gives for the commit-bound regime, with
// only River replaced by a stub (the repository does not carry it) and a
// short window: the KECE side is this tree's kece-bench, built once by the
// script, on scripts/bench-scheduler.sh's private server, and its
// figures reach the pair's line.
func TestBenchRiverPairsScriptRunsKECE(t *testing.T) {
	requireMariaDBBinaries(t)
	dir := t.TempDir()
	river := filepath.Join(dir, "river.sh")
	require.NoError(t, os.WriteFile(river, []byte("#!/bin/sh\necho river_commit_rate_per_s=1000\necho river_jobs_per_s=100\n"), 0o755))
	script, err := filepath.Abs("../../scripts/bench-river-pairs.sh")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "-regime", "disk", "-pairs", "1", "-duration", "1s")
	cmd.Env = append(os.Environ(), "RIVER_RUN="+river, "KECE_BENCH_PORT="+freePort(t), "TMPDIR="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var pair string
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, "pair=1 ") {
			pair = line
		}
	}
	require.NotEmpty(t, pair, "no pair line in:\n%s", out)
	for _, k := range []string{"lifecycles_per_s", "commit_rate_per_s", "server_cpu_ms_per_lifecycle", "ratio"} {
		_, v, ok := strings.Cut(pair, " "+k+"=")
		require.True(t, ok, "%s in %q", k, pair)
		f, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
		require.NoError(t, err, "%s in %q", k, pair)
		require.Positive(t, f, "%s in %q", k, pair)
	}
	require.Contains(t, string(out), "pairs=1 regime=disk river_jobs_per_s_mean=100 ")
}
