package checker

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

func TestInterpret(t *testing.T) {
	t.Parallel()
	type want struct {
		fraction float64
		message  string // substring
		fail     bool
	}
	for _, tc := range []struct {
		name      string
		p         engine.CheckerProtocol
		run       Run
		maxPoints float64
		want      want
	}{
		// legacy: 0 AC, 1 and 2 WA, anything else the checker's failure.
		{"legacy ok", engine.ProtocolLegacy, Run{ExitCode: 0, Stderr: "fine"}, 0, want{1, "fine", false}},
		{"legacy absent is legacy", "", Run{ExitCode: 1}, 0, want{0, "", false}},
		{"legacy 2 is WA", engine.ProtocolLegacy, Run{ExitCode: 2, Stdout: "bad"}, 0, want{0, "bad", false}},
		{"legacy 3 fails", engine.ProtocolLegacy, Run{ExitCode: 3}, 0, want{fail: true}},
		{"legacy 7 fails", engine.ProtocolLegacy, Run{ExitCode: 7, Stderr: "points 0.5"}, 0, want{fail: true}},

		// testlib.
		{"testlib ok", engine.ProtocolTestlib, Run{ExitCode: 0, Stderr: "ok 3 numbers"}, 0, want{1, "ok 3 numbers", false}},
		{"testlib wa", engine.ProtocolTestlib, Run{ExitCode: 1, Stderr: "wrong answer 1st numbers differ"}, 0, want{0, "1st numbers differ", false}},
		{"testlib pe is WA with a message", engine.ProtocolTestlib, Run{ExitCode: 2, Stderr: "wrong output format Extra information"}, 0, want{0, "presentation error", false}},
		{"testlib dirt is PE", engine.ProtocolTestlib, Run{ExitCode: 4}, 0, want{0, "presentation error", false}},
		{"testlib unexpected eof is PE", engine.ProtocolTestlib, Run{ExitCode: 8}, 0, want{0, "presentation error", false}},
		{"testlib fail", engine.ProtocolTestlib, Run{ExitCode: 3, Stderr: "FAIL answer file broken"}, 0, want{fail: true}},
		{"testlib points", engine.ProtocolTestlib, Run{ExitCode: 7, Stderr: "points 0.25 three of four"}, 0, want{0.25, "three of four", false}},
		{"testlib points, old %.10f form", engine.ProtocolTestlib, Run{ExitCode: 7, Stderr: "points 0.5000000000"}, 0, want{0.5, "", false}},
		{"testlib points on a scale", engine.ProtocolTestlib, Run{ExitCode: 7, Stderr: "points 30 partial"}, 40, want{0.75, "partial", false}},
		{"testlib points full", engine.ProtocolTestlib, Run{ExitCode: 7, Stderr: "points 1"}, 0, want{1, "", false}},
		{"testlib points zero", engine.ProtocolTestlib, Run{ExitCode: 7, Stderr: "points 0"}, 0, want{0, "", false}},
		{"testlib points without the word", engine.ProtocolTestlib, Run{ExitCode: 7, Stderr: "0.5"}, 0, want{0.5, "", false}},
		{"testlib points from stdout (old testlib)", engine.ProtocolTestlib, Run{ExitCode: 7, Stdout: "points 0.5 x"}, 0, want{0.5, "x", false}},
		{"testlib points coloured", engine.ProtocolTestlib, Run{ExitCode: 7, Stderr: "\x1b[0;33mpoints \x1b[0m0.5 ok"}, 0, want{0.5, "ok", false}},
		{"testlib points above max", engine.ProtocolTestlib, Run{ExitCode: 7, Stderr: "points 1.5"}, 0, want{fail: true}},
		{"testlib points negative", engine.ProtocolTestlib, Run{ExitCode: 7, Stderr: "points -0.1"}, 0, want{fail: true}},
		{"testlib points nan", engine.ProtocolTestlib, Run{ExitCode: 7, Stderr: "points nan"}, 0, want{fail: true}},
		{"testlib points missing", engine.ProtocolTestlib, Run{ExitCode: 7, Stderr: "points"}, 0, want{fail: true}},
		{"testlib points garbage", engine.ProtocolTestlib, Run{ExitCode: 7, Stderr: "points many"}, 0, want{fail: true}},
		{"testlib unknown exit code", engine.ProtocolTestlib, Run{ExitCode: 5}, 0, want{fail: true}},
		{"testlib _pc code is not guessed", engine.ProtocolTestlib, Run{ExitCode: 66}, 0, want{fail: true}},

		// score.
		{"score fraction", engine.ProtocolScore, Run{ExitCode: 0, Stdout: "0.5\n", Stderr: "half"}, 0, want{0.5, "half", false}},
		{"score on a scale", engine.ProtocolScore, Run{ExitCode: 0, Stdout: "  7 "}, 10, want{0.7, "", false}},
		{"score one", engine.ProtocolScore, Run{ExitCode: 0, Stdout: "1"}, 0, want{1, "", false}},
		{"score zero", engine.ProtocolScore, Run{ExitCode: 0, Stdout: "0"}, 0, want{0, "", false}},
		{"score garbage", engine.ProtocolScore, Run{ExitCode: 0, Stdout: "ok"}, 0, want{fail: true}},
		{"score empty", engine.ProtocolScore, Run{ExitCode: 0}, 0, want{fail: true}},
		{"score two numbers", engine.ProtocolScore, Run{ExitCode: 0, Stdout: "1 2"}, 0, want{fail: true}},
		{"score fraction form is refused", engine.ProtocolScore, Run{ExitCode: 0, Stdout: "3/4"}, 0, want{fail: true}},
		{"score above max", engine.ProtocolScore, Run{ExitCode: 0, Stdout: "11"}, 10, want{fail: true}},
		{"score inf", engine.ProtocolScore, Run{ExitCode: 0, Stdout: "inf"}, 0, want{fail: true}},
		{"score nonzero exit", engine.ProtocolScore, Run{ExitCode: 1, Stdout: "0"}, 0, want{fail: true}},

		// configuration.
		{"unknown protocol", "icpc", Run{}, 0, want{fail: true}},
		{"negative maxPoints", engine.ProtocolScore, Run{Stdout: "0"}, -1, want{fail: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, err := Interpret(tc.p, tc.run, tc.maxPoints)
			if tc.want.fail {
				require.ErrorIs(t, err, ErrCheckerFailed)
				return
			}
			require.NoError(t, err)
			require.InDelta(t, tc.want.fraction, o.Fraction, 1e-12)
			require.Contains(t, o.Message, tc.want.message)
			require.NotContains(t, o.Message, "\x1b")
		})
	}
}

func TestInterpretBoundsTheMessage(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", MaxMessageBytes)
	o, err := Interpret(engine.ProtocolTestlib, Run{ExitCode: 1, Stderr: long + "\xff"}, 0)
	require.NoError(t, err)
	require.LessOrEqual(t, len(o.Message), MaxMessageBytes)
	require.True(t, strings.HasSuffix(o.Message, "…"))
	require.True(t, strings.ToValidUTF8(o.Message, "?") == o.Message, "valid UTF-8")
}
