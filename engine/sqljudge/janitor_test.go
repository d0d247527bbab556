package sqljudge

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// Environment of the crash helper process (see TestMain).
const (
	crashHelperEnv  = "KECE_SQLJUDGE_CRASH_NODE" // node id
	crashHelperJob  = "KECE_SQLJUDGE_CRASH_JOB"
	crashHelperDSN  = "KECE_SQLJUDGE_CRASH_DSN"
	crashReadyLine  = "STUDENT_STATEMENT_SENT"
	crashLeaseEpoch = 7
)

func sleepProblem() *engine.SQLProblem {
	return &engine.SQLProblem{
		Kind: engine.SQLKindSelect, Schema: "CREATE TABLE t (x INT)", Seed: "INSERT INTO t VALUES (1)",
		Expected:         &engine.ResultSet{Columns: []string{"x"}, Rows: rowsOf([]string{"1"})},
		StatementTimeout: 50 * time.Second, MaxRows: 10, MaxBytes: 1000,
	}
}

// runCrashHelper is a judge node that starts a job whose student statement
// sleeps, says so on stdout, and waits to be SIGKILLed.
func runCrashHelper() int {
	e, err := New(Config{
		AdminDSN: os.Getenv(crashHelperDSN),
		NodeID:   os.Getenv(crashHelperEnv),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	e.hooks.studentStarted = func() { fmt.Println(crashReadyLine) }
	_, err = e.Execute(context.Background(), engine.Task{
		JobID: os.Getenv(crashHelperJob), LeaseEpoch: crashLeaseEpoch,
		Source: []byte("SELECT SLEEP(40) AS x"), SQL: sleepProblem(),
	}, engine.NoProgress)
	fmt.Fprintln(os.Stderr, "crash helper finished without being killed:", err)
	return 3
}

// T15: a node SIGKILLed mid-job leaves its temporary database and account;
// the janitor of the restarted node removes them (and kills the orphaned
// statement) while leaving a live lease's resources and another node's alone.
func TestJanitorAfterSIGKILL(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	other := setup(t, nil) // another node on the same judge server

	// A live lease of this node and a lease of the other node, both left in
	// place as a crash would leave them.
	b.exec.hooks.skipCleanup = true
	v, err := b.run(t, "live-job", sleepProblem(), "SELECT x FROM t")
	require.NoError(t, err)
	require.Equal(t, engine.StatusAccepted, v.Status)
	b.exec.hooks.skipCleanup = false
	other.exec.hooks.skipCleanup = true
	_, err = other.run(t, "dead-job", sleepProblem(), "SELECT x FROM t")
	require.NoError(t, err)
	liveNames := namesFor(b.node, "live-job", 1)
	otherNames := namesFor(other.node, "dead-job", 1)
	require.True(t, b.dbExists(t, liveNames.DB))
	require.True(t, b.userExists(t, liveNames.User))

	// The node process that gets killed mid-statement.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashHelperEnv+"="+b.node, crashHelperJob+"=crashed-job", crashHelperDSN+"="+judgeDSN())
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, crashReadyLine, strings.TrimSpace(line))
	crashed := namesFor(b.node, "crashed-job", crashLeaseEpoch)
	// Wait until the server really runs the student's statement.
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, b.root.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ? AND INFO LIKE 'SELECT SLEEP%'", crashed.User).Scan(&n))
		return n == 1
	}, 20*time.Second, 20*time.Millisecond)
	require.NoError(t, cmd.Process.Kill()) // SIGKILL
	_ = cmd.Wait()
	require.True(t, b.dbExists(t, crashed.DB), "the crash must leave the database behind")
	require.True(t, b.userExists(t, crashed.User), "the crash must leave the account behind")
	require.Equal(t, 2, b.registryRows(t, "crashed-job", crashLeaseEpoch))

	// The restarted node: a fresh Executor with the same node id.
	restarted := setup(t, func(c *Config) { c.NodeID = b.node })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	removed, err := restarted.exec.Janitor(ctx, func(job string, epoch int64) bool {
		return job == "live-job" && epoch == 1
	})
	require.NoError(t, err)
	require.Equal(t, 2, removed)
	require.False(t, b.dbExists(t, crashed.DB))
	require.False(t, b.userExists(t, crashed.User))
	require.Zero(t, b.registryRows(t, "crashed-job", crashLeaseEpoch))
	var sessions int
	require.NoError(t, b.root.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ?", crashed.User).Scan(&sessions))
	require.Zero(t, sessions, "the orphaned statement must be killed")

	// The live lease and the other node are untouched.
	require.True(t, b.dbExists(t, liveNames.DB))
	require.True(t, b.userExists(t, liveNames.User))
	require.Equal(t, 2, b.registryRows(t, "live-job", 1))
	require.True(t, b.dbExists(t, otherNames.DB))
	require.True(t, b.userExists(t, otherNames.User))

	// Once the lease is over, the janitor takes it too; the other node's
	// janitor takes its own.
	removed, err = restarted.exec.Janitor(ctx, func(string, int64) bool { return false })
	require.NoError(t, err)
	require.Equal(t, 2, removed)
	require.False(t, b.dbExists(t, liveNames.DB))
	b.requireNoLeftovers(t)
	removed, err = other.exec.Janitor(ctx, func(string, int64) bool { return false })
	require.NoError(t, err)
	require.Equal(t, 2, removed)
	require.False(t, b.dbExists(t, otherNames.DB))
	require.False(t, b.userExists(t, otherNames.User))
	other.requireNoLeftovers(t)
}

// A lease running in this process is never removed, whatever isLive says.
func TestJanitorSkipsRunningLease(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	started := make(chan struct{})
	b.exec.hooks.studentStarted = func() { close(started) }
	done := make(chan error, 1)
	var v engine.Verdict
	go func() {
		var err error
		v, err = b.run(t, "running-job", &engine.SQLProblem{
			Kind: engine.SQLKindSelect, Schema: "CREATE TABLE t (x INT)", Seed: "INSERT INTO t VALUES (1)",
			Expected:         &engine.ResultSet{Columns: []string{"x"}, Rows: rowsOf([]string{"1"})},
			StatementTimeout: 3 * time.Second, MaxRows: 10, MaxBytes: 1000,
		}, "SELECT x FROM t WHERE SLEEP(1) = 0")
		done <- err
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	removed, err := b.exec.Janitor(ctx, func(string, int64) bool { return false })
	require.NoError(t, err)
	require.Zero(t, removed)
	require.NoError(t, <-done)
	require.Equal(t, engine.StatusAccepted, v.Status, v.Message)
	b.requireNoLeftovers(t)
}

func TestRunJanitorRemovesLeftoversPeriodically(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.exec.RunJanitor(ctx, 20*time.Millisecond, func(string, int64) bool { return false }) }()
	// A leftover appears while the janitor is already running.
	b.exec.hooks.skipCleanup = true
	_, err := b.run(t, "left-behind", sleepProblem(), "SELECT x FROM t")
	require.NoError(t, err)
	names := namesFor(b.node, "left-behind", 1)
	require.Eventually(t, func() bool { return b.registryRows(t, "left-behind", 1) == 0 }, 20*time.Second, 10*time.Millisecond)
	require.False(t, b.dbExists(t, names.DB))
	require.False(t, b.userExists(t, names.User))
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	_, err = b.exec.Janitor(context.Background(), nil)
	require.Error(t, err)
}
