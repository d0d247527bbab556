package code

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// communicationTask is a task of testdata/manager.cpp in C++ with two
// processes of src, one case per input (expected outputs empty).
func (b *testBundle) communicationTask(t *testing.T, pool, src string, inputs ...string) engine.Task {
	t.Helper()
	var cases []tcase
	for _, in := range inputs {
		cases = append(cases, tcase{in: in})
	}
	task := b.task(t, pool, src, cases...)
	task.Limits.CPUTime, task.Limits.WallTime = time.Second, 4*time.Second
	cppRT, err := DefaultRuntime("cpp")
	require.NoError(t, err)
	task.Checker = engine.Checker{Kind: engine.CheckerCommunication, SpecialSource: []byte(readTestdata(t, "manager.cpp")),
		SpecialRuntime: cppRT, SpecialProtocol: engine.ProtocolTestlib, InteractorTime: 3 * time.Second, Processes: 2}
	return task
}

// TestCommunication judges one communication job per contestant language:
// testdata/manager.cpp in C++ with two processes, each case one behaviour
// of the processes; each process has its own limits and accounting.
func TestCommunication(t *testing.T) {
	t.Parallel()
	for _, l := range []struct{ name, pool, lang, src string }{
		{"cpp", "cpp", "", "square.cpp"}, {"python", "python", "", "square.py"},
		{"c17", "cpp", "c17", "square.c"}, {"java", "java", "", "Square.java"},
		{"javascript", "arkts", "javascript", "square.js"},
	} {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, l.pool, "cpp")
			type row struct {
				in      string
				status  engine.Status
				message string
			}
			want := []row{
				{"3 4 ok ok", engine.StatusAccepted, "ok sum of squares 25"},
				{"3 4 ok wrong", engine.StatusWrongAnswer, "process 2 answered 17 for 4"},
				{"3 4 ok tle", engine.StatusTimeLimitExceeded, "process 2: "},
				// A process that forks: its child's CPU is its own.
				{"3 4 fork ok", engine.StatusTimeLimitExceeded, "process 1: "},
				{"3 4 ok idle", engine.StatusTimeLimitExceeded, "process 2: idleness limit exceeded"},
				{"3 4 re ok", engine.StatusRuntimeError, "process 1: exit code 3"},
				// Writes "1" lines without reading: the pipe fills, the
				// manager reads the first line as the answer and rejects it;
				// the process then dies writing (SIGPIPE or EPIPE), after the
				// rejection, which stands.
				{"3 4 ok flood", engine.StatusWrongAnswer, "process 2 answered 1 for 4"},
			}
			// The manager looks for the processes' source, build and
			// working directories (probe.h): it must find none.
			probe := newFileProbe(b.x)
			want = append(want, row{"3 4 ok ok probe " + probe.input(), engine.StatusAccepted, "none of them the contestant's"})
			var inputs []string
			for _, w := range want {
				inputs = append(inputs, w.in)
			}
			task := b.communicationTask(t, l.pool, probe.mark(t, l.src, readTestdata(t, l.src)), inputs...)
			probe.expect(t, task, len(want)-1, false)
			task.Checker = probe.checker(t, task.Checker)
			if l.lang != "" {
				rt, err := RuntimeForLanguage(l.lang)
				require.NoError(t, err)
				task.Runtime = rt
			}
			v := b.run(t, task)
			require.Len(t, v.Cases, len(want))
			for i, w := range want {
				c := v.Cases[i]
				t.Logf("%s %-16q %-4s %s (cpu %s wall %s)", l.name, clip(w.in, 16), c.Status, c.Message, c.CPUTime, c.WallTime)
				require.Equal(t, w.status, c.Status, "case %q: %s", w.in, c.Message)
				require.Contains(t, c.Message, w.message, "case %q", w.in)
			}

			// Its own job with a wall limit that a loaded machine cannot
			// turn into idleness: (1) 0.6 s of CPU in each process against a
			// 1 s limit: each process is held to its own limit, not to their
			// sum (1.2 s); (2) the manager burns 1.5 s of its own CPU before
			// it sends anything: not the processes' time (1 s limit).
			burn := b.communicationTask(t, l.pool, string(task.Source), "3 4 burn burn", "3 4 ok ok burn")
			burn.Runtime, burn.Checker = task.Runtime, task.Checker
			burn.Limits.WallTime = 30 * time.Second
			v = b.run(t, burn)
			for i, in := range []string{"3 4 burn burn", "3 4 ok ok burn"} {
				c := v.Cases[i]
				t.Logf("%s %-16q %-4s %s (cpu %s wall %s)", l.name, in, c.Status, c.Message, c.CPUTime, c.WallTime)
				require.Equal(t, engine.StatusAccepted, c.Status, "case %q: %s", in, c.Message)
			}
			require.GreaterOrEqual(t, v.Cases[0].CPUTime, 600*time.Millisecond, "the burn case did not burn")
			require.Less(t, v.Cases[1].CPUTime, time.Second, "the manager's CPU was counted against the processes")
			require.GreaterOrEqual(t, v.Cases[1].WallTime, 1500*time.Millisecond, "the processes did not wait for the burning manager")
			require.NoError(t, b.leftovers(t))
		})
	}
}

// TestManagerFaultsAreInfrastructure: a manager that never ends, crashes or
// reports FAIL is the problem's fault (docs/engine.md "Sandbox rules": a
// silent or failing interactor or manager is CHECKER_FAILED), never the
// processes' verdict, and a silent one cannot hold the job past its wall
// limit (the idleness limit plus its CPU limit).
func TestManagerFaultsAreInfrastructure(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	src := readTestdata(t, "square.cpp")
	for _, c := range []struct{ in, message string }{
		{"3 4 ok ok silent", "did not end within its wall limit"},
		{"3 4 ok ok crash", "killed by signal 6"},
		{"3 4 ok ok fail", "the checker reported FAIL: manager FAIL on purpose"},
	} {
		task := b.communicationTask(t, "cpp", src, c.in)
		task.Checker.InteractorTime = time.Second
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		_, err := b.x.Execute(ctx, task, nil)
		cancel()
		took := time.Since(start)
		t.Logf("%q: %v (%s)", c.in, err, took.Round(time.Millisecond))
		requireClass(t, err, engine.InfraCheckerFailed)
		require.ErrorContains(t, err, c.message)
		require.Less(t, took, time.Minute, "a silent manager held the job")
	}
	require.NoError(t, b.leftovers(t))
}

// TestCommunicationTaskChecks: the process count is bounded and belongs to
// communication tasks only.
func TestCommunicationTaskChecks(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	cppRT, err := DefaultRuntime("cpp")
	require.NoError(t, err)
	for _, ck := range []engine.Checker{
		{Kind: engine.CheckerCommunication, SpecialSource: []byte("x"), SpecialRuntime: cppRT, Processes: 0},
		{Kind: engine.CheckerCommunication, SpecialSource: []byte("x"), SpecialRuntime: cppRT, Processes: engine.MaxProcesses + 1},
		{Kind: engine.CheckerInteractive, SpecialSource: []byte("x"), SpecialRuntime: cppRT, Processes: 2},
	} {
		task := b.task(t, "cpp", "int main(){}")
		task.Checker = ck
		_, err := b.x.Execute(context.Background(), task, nil)
		requireClass(t, err, engine.InfraConfig)
	}
}
