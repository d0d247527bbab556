package code

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code/sandboxinit"
)

// interactiveTask is a guess-the-number task: testdata/interactor.cpp in
// C++ against the contestant src in lang; each case input is the
// interactor's "n secret mode word".
func (b *testBundle) interactiveTask(t *testing.T, pool, src string, inputs ...string) engine.Task {
	t.Helper()
	var cases []tcase
	for _, in := range inputs {
		cases = append(cases, tcase{in: in, exp: ""})
	}
	task := b.task(t, pool, src, cases...)
	task.Limits.CPUTime, task.Limits.WallTime = time.Second, 3*time.Second
	cppRT, err := DefaultRuntime("cpp")
	require.NoError(t, err)
	task.Checker = engine.Checker{Kind: engine.CheckerInteractive, SpecialSource: []byte(readTestdata(t, "interactor.cpp")),
		SpecialRuntime: cppRT, SpecialProtocol: engine.ProtocolTestlib, InteractorTime: 3 * time.Second}
	return task
}

// TestInteractive judges one interactive job per contestant language: each
// case is one behaviour of the contestant against the same interactor, and
// must get its own verdict.
func TestInteractive(t *testing.T) {
	t.Parallel()
	for _, l := range []struct{ name, pool, lang, src string }{
		{"cpp", "cpp", "", "guess.cpp"}, {"python", "python", "", "guess.py"}, {"java", "java", "", "Guess.java"},
		{"c17", "cpp", "c17", "guess.c"}, {"javascript", "arkts", "javascript", "guess.js"},
		{"arkts", "arkts", "", "guess.ets"},
	} {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, l.pool, "cpp")
			want := []struct {
				in      string
				status  engine.Status
				message string
			}{
				{"100 37 normal ok", engine.StatusAccepted, "ok found 37"},
				{"100 25 normal linear", engine.StatusPartial, "found 25 in 25 guesses"},
				{"100 90 normal linear", engine.StatusWrongAnswer, "more than 30 guesses"},
				// CPU time, or idleness on a loaded machine (the busy loop also never reads).
				{"100 50 normal tle", engine.StatusTimeLimitExceeded, "limit exceeded"},
				// Deadlock: both sides wait to read; the idleness limit ends it.
				{"100 50 normal idle", engine.StatusTimeLimitExceeded, "idleness limit exceeded"},
				// Writes without reading: the pipe fills, the interactor
				// stops it after 30 guesses; the program then dies writing.
				{"100 50 normal flood", engine.StatusWrongAnswer, "more than 30 guesses"},
				// Failed first: its RE stands, not the interactor's PE after it.
				{"100 50 normal re", engine.StatusRuntimeError, "exit code 3"},
				// The FIFOs' directory, the inputs and answers are not its own.
				{"100 50 normal peek", engine.StatusAccepted, "ok found 50"},
				// The interactor's 1.5 s of CPU is not the program's (1 s limit).
				{"100 64 burn ok", engine.StatusAccepted, "ok found 64"},
			}
			// The other direction of peek: the interactor looks for the
			// program's source, build and working directory (probe.h).
			probe := newFileProbe(b.x)
			want = append(want, struct {
				in      string
				status  engine.Status
				message string
			}{"100 50 probe ok " + probe.input(), engine.StatusAccepted, "none of them the contestant's"})
			var inputs []string
			for _, w := range want {
				inputs = append(inputs, w.in)
			}
			task := b.interactiveTask(t, l.pool, probe.mark(t, l.src, readTestdata(t, l.src)), inputs...)
			probe.expect(t, task, len(want)-1, false)
			task.Checker = probe.checker(t, task.Checker)
			if l.lang != "" {
				rt, err := RuntimeForLanguage(l.lang)
				require.NoError(t, err)
				task.Runtime = rt
			}
			switch l.pool {
			case "python", "arkts":
				task.Limits.CPUTime = 2 * time.Second // the interpreter's start
				task.Limits.WallTime = 4 * time.Second
			case "java":
				task.Limits.CPUTime = 3 * time.Second // the JVM's start
				task.Limits.WallTime = 5 * time.Second
			}
			v := b.run(t, task)
			require.Len(t, v.Cases, len(want))
			for i, w := range want {
				c := v.Cases[i]
				t.Logf("%s %-22q %-4s %s (cpu %s wall %s)", l.name, clip(w.in, 22), c.Status, c.Message, c.CPUTime, c.WallTime)
				require.Equal(t, w.status, c.Status, "case %q: %s", w.in, c.Message)
				require.Contains(t, c.Message, w.message, "case %q", w.in)
			}
			require.InDelta(t, 0.5, v.Cases[1].Fraction, 1e-9)
			require.Less(t, v.Cases[8].CPUTime, task.Limits.CPUTime, "the interactor's CPU was counted against the program")
			require.NoError(t, b.leftovers(t))
		})
	}
}

// TestInteractorFaultsAreInfrastructure: an interactor that never answers
// or reports FAIL is the problem's fault, never the contestant's verdict,
// and a silent one cannot hold the job past its wall limit.
func TestInteractorFaultsAreInfrastructure(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	src := readTestdata(t, "guess.cpp")
	for _, in := range []string{"100 50 silent ok", "100 50 fail ok"} {
		task := b.interactiveTask(t, "cpp", src, in)
		task.Checker.InteractorTime = time.Second
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		_, err := b.x.Execute(ctx, task, nil)
		cancel()
		requireClass(t, err, engine.InfraCheckerFailed)
		t.Logf("%q: %v (%s)", in, err, time.Since(start).Round(time.Millisecond))
	}
	task := b.interactiveTask(t, "cpp", src, "100 50 normal ok")
	task.Checker.SpecialSource = []byte("this is not C++")
	_, err := b.x.Execute(context.Background(), task, nil)
	requireClass(t, err, engine.InfraCheckerFailed)

	task = b.interactiveTask(t, "cpp", src, "100 50 normal ok")
	task.IO = engine.FileIO{InputFile: "a.in"}
	_, err = b.x.Execute(context.Background(), task, nil)
	requireClass(t, err, engine.InfraConfig)
	require.NoError(t, b.leftovers(t))
}

// TestFileProbeCanary: the probe of TestInteractive and TestCommunication
// finds the contestant's marker wherever the problem's side can read it:
// here the case's expected output carries it, and the probe reports it.
func TestFileProbeCanary(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	probe := newFileProbe(b.x)
	task := b.interactiveTask(t, "cpp", readTestdata(t, "guess.cpp"), "100 50 probe ok "+probe.input())
	probe.expect(t, task, 0, true)
	task.Checker = probe.checker(t, task.Checker)
	v := b.run(t, task)
	t.Logf("%s %s", v.Cases[0].Status, v.Cases[0].Message)
	require.Equal(t, engine.StatusWrongAnswer, v.Cases[0].Status, v.Cases[0].Message)
	require.Contains(t, v.Cases[0].Message, "probe read the contestant's file /exp/0")
	require.NoError(t, b.leftovers(t))
}

// TestDecideInteraction pins the rule of docs/engine.md "Interactive
// problems" on every combination of outcomes, without Docker.
func TestDecideInteraction(t *testing.T) {
	re := failure{engine.StatusRuntimeError, "exit code 3"}
	ok := sandboxinit.Result{}
	wa := sandboxinit.Result{ExitCode: 1, Log: "too many guesses"}
	for _, c := range []struct {
		name         string
		user         sandboxinit.Result
		userFail     failure
		inter        sandboxinit.Result
		status       engine.Status
		fraction     float64
		infraMessage string
	}{
		{"both fine", ok, failure{}, ok, "", 1, ""},
		{"program failed while the interactor was there", ok, re, wa, engine.StatusRuntimeError, 0, ""},
		{"program failed after the interactor rejected", sandboxinit.Result{PeerClosed: true}, re, wa, "", 0, ""},
		// Killed writing to the interactor's closed stdin: the interactor
		// ended first, whatever PeerClosed saw of the other direction.
		{"program killed by SIGPIPE after the interactor rejected", sandboxinit.Result{Signal: 13}, failure{engine.StatusRuntimeError, "killed by signal 13 (broken pipe)"}, wa, "", 0, ""},
		{"program failed after the interactor accepted", sandboxinit.Result{PeerClosed: true}, re, ok, engine.StatusRuntimeError, 0, ""},
		{"interactor wrote to a program that had ended", ok, failure{}, sandboxinit.Result{Signal: 13}, engine.StatusWrongAnswer, 0, ""},
		{"interactor points", ok, failure{}, sandboxinit.Result{ExitCode: 7, Log: "points 0.25"}, "", 0.25, ""},
		{"interactor FAIL", ok, failure{}, sandboxinit.Result{ExitCode: 3}, "", 0, "FAIL"},
		{"interactor FAIL after the program failed", ok, re, sandboxinit.Result{ExitCode: 3}, engine.StatusRuntimeError, 0, ""},
		{"interactor overran its time, program failed first", ok, re, sandboxinit.Result{WallExceeded: true}, "", 0, "wall limit"},
		{"interactor crashed", ok, failure{}, sandboxinit.Result{Signal: 11}, "", 0, "signal 11"},
		{"interactor did not start", ok, failure{}, sandboxinit.Result{SetupError: "exec"}, "", 0, "did not start"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := decideInteraction(c.user, c.userFail, c.inter, "", 1, time.Second)
			if c.infraMessage != "" {
				require.ErrorContains(t, err, c.infraMessage)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.status, d.status)
			if c.status == "" {
				require.InDelta(t, c.fraction, d.fraction, 1e-9)
			}
		})
	}
}
