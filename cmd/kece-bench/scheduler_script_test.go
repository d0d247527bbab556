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
)

// scripts/bench-scheduler.sh as docs/scheduling.md tells a user to run it,
// with a short window: a private durable MariaDB in a temporary directory,
// its redo log written through, the scheduler benchmark against it with the
// server's CPU reported, and the server gone afterwards. It needs the
// MariaDB server binaries (not a running server); KECE_REQUIRE_MYSQL=1
// makes their absence a failure.
func TestBenchSchedulerScript(t *testing.T) {
	if _, err := exec.LookPath("mariadb-install-db"); err != nil {
		if os.Getenv("KECE_REQUIRE_MYSQL") == "1" {
			t.Fatalf("mariadb-install-db not found (KECE_REQUIRE_MYSQL=1): %v", err)
		}
		t.Skip("mariadb-install-db not found: install mariadb-server")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	require.NoError(t, l.Close())

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
