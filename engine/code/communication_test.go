package code

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// TestCommunication judges one communication job per contestant language:
// testdata/manager.cpp in C++ with two processes, each case one behaviour
// of the processes; each process has its own limits and accounting.
func TestCommunication(t *testing.T) {
	t.Parallel()
	for _, l := range []struct{ pool, src string }{{"cpp", "square.cpp"}, {"python", "square.py"}} {
		t.Run(l.pool, func(t *testing.T) {
			t.Parallel()
			b := setup(t, l.pool, "cpp")
			want := []struct {
				in      string
				status  engine.Status
				message string
			}{
				{"3 4 ok ok", engine.StatusAccepted, "ok sum of squares 25"},
				{"3 4 ok wrong", engine.StatusWrongAnswer, "process 2 answered 17 for 4"},
				{"3 4 ok tle", engine.StatusTimeLimitExceeded, "process 2: "},
				// A process that forks: its child's CPU is its own.
				{"3 4 fork ok", engine.StatusTimeLimitExceeded, "process 1: "},
				{"3 4 ok idle", engine.StatusTimeLimitExceeded, "process 2: idleness limit exceeded"},
				{"3 4 re ok", engine.StatusRuntimeError, "process 1: exit code 3"},
			}
			var cases []tcase
			for _, w := range want {
				cases = append(cases, tcase{in: w.in})
			}
			task := b.task(t, l.pool, readTestdata(t, l.src), cases...)
			task.Limits.CPUTime, task.Limits.WallTime = time.Second, 4*time.Second
			cppRT, err := DefaultRuntime("cpp")
			require.NoError(t, err)
			task.Checker = engine.Checker{Kind: engine.CheckerCommunication, SpecialSource: []byte(readTestdata(t, "manager.cpp")),
				SpecialRuntime: cppRT, SpecialProtocol: engine.ProtocolTestlib, InteractorTime: 3 * time.Second, Processes: 2}
			v := b.run(t, task)
			require.Len(t, v.Cases, len(want))
			for i, w := range want {
				c := v.Cases[i]
				t.Logf("%s %-16q %-4s %s (cpu %s wall %s)", l.pool, w.in, c.Status, c.Message, c.CPUTime, c.WallTime)
				require.Equal(t, w.status, c.Status, "case %q: %s", w.in, c.Message)
				require.Contains(t, c.Message, w.message, "case %q", w.in)
			}

			// 0.6 s of CPU each against a 1 s limit: each process is held
			// to its own limit, not to their sum (1.2 s). Its own job with a
			// wall limit that a loaded machine cannot turn into idleness.
			burn := b.task(t, l.pool, readTestdata(t, l.src), tcase{in: "3 4 burn burn"})
			burn.Limits, burn.Checker = task.Limits, task.Checker
			burn.Limits.WallTime = 30 * time.Second
			v = b.run(t, burn)
			t.Logf("%s %-16q %-4s %s (cpu %s wall %s)", l.pool, "3 4 burn burn", v.Cases[0].Status, v.Cases[0].Message, v.Cases[0].CPUTime, v.Cases[0].WallTime)
			require.Equal(t, engine.StatusAccepted, v.Cases[0].Status, v.Cases[0].Message)
			require.GreaterOrEqual(t, v.Cases[0].CPUTime, 600*time.Millisecond, "the burn case did not burn")
			require.NoError(t, b.leftovers(t))
		})
	}
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
