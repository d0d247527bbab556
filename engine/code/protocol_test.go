package code

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// echoSource is the contestant's program of these tests: it prints its
// input line, so each case's input chooses what the checker will answer.
const echoSource = `#include <iostream>
#include <string>
int main() { std::string s; std::getline(std::cin, s); std::cout << s << "\n"; }
`

// testlibChecker is testdata/testlib_checker.cpp with the test's own
// testlib-protocol header uploaded as the checker file "testlib.h", the way
// a setter uploads the real one.
func testlibChecker(t *testing.T) engine.Checker {
	t.Helper()
	cppRT, err := DefaultRuntime("cpp")
	require.NoError(t, err)
	return engine.Checker{
		Kind: engine.CheckerSpecial, SpecialProtocol: engine.ProtocolTestlib, SpecialRuntime: cppRT,
		SpecialSource: []byte(readTestdata(t, "testlib_checker.cpp")),
		SpecialFiles:  []engine.CheckerFile{{Name: "testlib.h", Data: []byte(readTestdata(t, "testlib_mini.h"))}},
	}
}

// TestTestlibProtocol runs a real C++ testlib-protocol checker returning each
// verdict exit code; the expected files hold "ANSWER" so the checker can
// tell that the judge passed input, output and answer in testlib's order.
func TestTestlibProtocol(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	task := b.task(t, "cpp", echoSource,
		tcase{in: "ok\n", exp: "ANSWER\n", weight: 10},
		tcase{in: "wa\n", exp: "ANSWER\n", weight: 10},
		tcase{in: "pe\n", exp: "ANSWER\n", weight: 10},
		tcase{in: "pts 0.25\n", exp: "ANSWER\n", weight: 10},
		tcase{in: "pts 1\n", exp: "ANSWER\n", weight: 3},
		tcase{in: "pts 0\n", exp: "ANSWER\n", weight: 3},
		tcase{in: "pts 0.333333\n", exp: "ANSWER\n", weight: 1},
	)
	task.Checker = testlibChecker(t)
	v := b.run(t, task)
	require.Equal(t, []engine.Status{engine.StatusAccepted, engine.StatusWrongAnswer, engine.StatusWrongAnswer,
		engine.StatusPartial, engine.StatusAccepted, engine.StatusWrongAnswer, engine.StatusPartial}, statuses(v))
	require.Equal(t, []float64{10, 0, 0, 2.5, 3, 0, 0.3333}, scores(v))
	require.Equal(t, 15.8333, v.Score)
	require.Equal(t, int64(47), v.MaxScore)
	require.Equal(t, engine.StatusWrongAnswer, v.Status, "the first case neither AC nor PARTIAL decides")
	require.Contains(t, v.Cases[0].Message, "all good")
	require.Contains(t, v.Cases[1].Message, "expected ok, found wa")
	require.Contains(t, v.Cases[2].Message, "presentation error")
	require.Contains(t, v.Cases[3].Message, "partial answer of pts")

	// Only AC and PARTIAL cases: the job is PARTIAL.
	task = b.task(t, "cpp", echoSource, tcase{in: "ok\n", exp: "ANSWER\n", weight: 2}, tcase{in: "pts 0.5\n", exp: "ANSWER\n", weight: 2})
	task.Checker = testlibChecker(t)
	v = b.run(t, task)
	require.Equal(t, engine.StatusPartial, v.Status)
	require.Equal(t, 3.0, v.Score)
	require.Contains(t, v.Message, "case 2: PARTIAL")

	// maxPoints scales the points: 30 of 40 is three quarters of the weight.
	task = b.task(t, "cpp", echoSource, tcase{in: "pts 30\n", exp: "ANSWER\n", weight: 8})
	task.Checker = testlibChecker(t)
	task.Checker.MaxPoints = 40
	v = b.run(t, task)
	require.Equal(t, []float64{6}, scores(v))
	require.NoError(t, b.leftovers(t))
}

// TestTestlibFailuresAreInfrastructure: FAIL (exit 3), points out of range,
// an exit code outside the protocol, a crash, a checker that does not compile
// and one whose header is missing are the problem's fault, never a WA.
func TestTestlibFailuresAreInfrastructure(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	for _, in := range []string{"fail", "pts 1.5", "pts -1", "exit5", "crash"} {
		task := b.task(t, "cpp", echoSource, tcase{in: "ok\n", exp: "ANSWER\n"}, tcase{in: in + "\n", exp: "ANSWER\n"})
		task.Checker = testlibChecker(t)
		_, err := b.x.Execute(context.Background(), task, nil)
		requireClass(t, err, engine.InfraCheckerFailed)
	}
	task := b.task(t, "cpp", echoSource, tcase{in: "ok\n", exp: "ANSWER\n"})
	task.Checker = testlibChecker(t)
	task.Checker.SpecialFiles = nil // the setter forgot testlib.h: the checker does not compile
	_, err := b.x.Execute(context.Background(), task, nil)
	requireClass(t, err, engine.InfraCheckerFailed)
	require.NoError(t, b.leftovers(t))
}

// TestCheckerTimeoutIsInfrastructure: a checker that runs past its own limit
// is CHECKER_FAILED, for every protocol.
func TestCheckerTimeoutIsInfrastructure(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	x, err := New(Config{NodeID: b.nodeID, Workspace: b.dir + "/ws-short", SupervisorPath: supervisorBinary(t), CheckerTime: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { x.Close() })
	for _, p := range []engine.CheckerProtocol{engine.ProtocolTestlib, engine.ProtocolScore, engine.ProtocolLegacy} {
		task := b.task(t, "cpp", echoSource, tcase{in: "spin\n", exp: "ANSWER\n"})
		task.Checker = testlibChecker(t)
		task.Checker.SpecialProtocol = p
		_, err := x.Execute(context.Background(), task, nil)
		requireClass(t, err, engine.InfraCheckerFailed)
		require.Contains(t, err.Error(), "time limit")
	}
	require.NoError(t, b.leftovers(t))
}

// TestScoreProtocol runs a Python score checker: one number on stdout.
func TestScoreProtocol(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp", "python")
	pyRT, err := DefaultRuntime("python")
	require.NoError(t, err)
	ck := engine.Checker{Kind: engine.CheckerSpecial, SpecialProtocol: engine.ProtocolScore, SpecialRuntime: pyRT,
		SpecialSource: []byte(readTestdata(t, "score_checker.py")), MaxPoints: 100}
	task := b.task(t, "cpp", echoSource,
		tcase{in: "score 100\n", exp: "ANSWER\n", weight: 5},
		tcase{in: "score 40\n", exp: "ANSWER\n", weight: 5},
		tcase{in: "score 0\n", exp: "ANSWER\n", weight: 5},
	)
	task.Checker = ck
	v := b.run(t, task)
	require.Equal(t, []engine.Status{engine.StatusAccepted, engine.StatusPartial, engine.StatusWrongAnswer}, statuses(v))
	require.Equal(t, []float64{5, 2, 0}, scores(v))
	require.Equal(t, 7.0, v.Score)
	require.Contains(t, v.Cases[1].Message, "scored 40")

	// Garbage, a number above maxPoints or a crash is the checker's fault.
	for _, in := range []string{"garbage", "score 101", "score -3", "crash"} {
		task = b.task(t, "cpp", echoSource, tcase{in: in + "\n", exp: "ANSWER\n"})
		task.Checker = ck
		_, err := b.x.Execute(context.Background(), task, nil)
		requireClass(t, err, engine.InfraCheckerFailed)
	}

	// A checker whose program is missing (its run command names no binary).
	task = b.task(t, "cpp", echoSource, tcase{in: "score 1\n", exp: "ANSWER\n"})
	task.Checker = ck
	task.Checker.SpecialRuntime.RunCmd = []string{"/box/no-such-checker"}
	_, err = b.x.Execute(context.Background(), task, nil)
	requireClass(t, err, engine.InfraCheckerFailed)
	require.NoError(t, b.leftovers(t))
}

func scores(v engine.Verdict) []float64 {
	var s []float64
	for _, c := range v.Cases {
		s = append(s, c.Score)
	}
	return s
}
