package checker

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/kece-oj/kece/engine"
)

// MaxMessageBytes bounds the checker message kept in a case result.
const MaxMessageBytes = 1024

// testlib exit codes (testlib.h's defaults, without EJUDGE/CONTESTER/TESTSYS).
const (
	testlibOK     = 0
	testlibWA     = 1
	testlibPE     = 2
	testlibFail   = 3
	testlibDirt   = 4 // testlib turns "dirt" into PE before exiting; kept for older copies
	testlibPoints = 7
	testlibEOF    = 8 // unexpected EOF of the output, only with ENABLE_UNEXPECTED_EOF
)

// ErrCheckerFailed is matched by every error of Interpret: the checker (the
// problem's program, not the contestant's) failed or answered outside its
// protocol. The executor reports it as an infrastructure fault
// (CHECKER_FAILED), never as a user's WA.
var ErrCheckerFailed = errors.New("special checker failed")

// Run is what a special checker's run left: its exit code (the caller has
// already turned signals, time-outs and start failures into errors), its
// standard output and its standard error, both already bounded.
type Run struct {
	ExitCode int
	Stdout   string
	Stderr   string
}

// Outcome is what the run means for the case.
type Outcome struct {
	// Fraction of the case weight earned, in [0, 1].
	Fraction float64
	// Message is the checker's comment, valid UTF-8, at most MaxMessageBytes.
	Message string
}

func failed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCheckerFailed, fmt.Sprintf(format, args...))
}

// Interpret applies protocol p to a run. maxPoints (0 means 1) is what the
// points of a testlib or score checker are divided by.
func Interpret(p engine.CheckerProtocol, r Run, maxPoints float64) (Outcome, error) {
	if maxPoints == 0 {
		maxPoints = 1
	}
	if !(maxPoints > 0) || math.IsInf(maxPoints, 0) {
		return Outcome{}, failed("maxPoints %v is not a positive number", maxPoints)
	}
	switch p {
	case engine.ProtocolLegacy, "":
		return legacy(r)
	case engine.ProtocolTestlib:
		return testlib(r, maxPoints)
	case engine.ProtocolScore:
		return score(r, maxPoints)
	}
	return Outcome{}, failed("unknown protocol %q", p)
}

// legacy: exit 0 accepts, 1 or 2 reject; the message is what the checker
// printed (stderr, then stdout).
func legacy(r Run) (Outcome, error) {
	msg := joinMessage(r.Stderr, r.Stdout)
	switch r.ExitCode {
	case 0:
		return Outcome{Fraction: 1, Message: msg}, nil
	case 1, 2:
		return Outcome{Fraction: 0, Message: msg}, nil
	}
	return Outcome{}, failed("exit code %d (legacy checkers exit 0, 1 or 2): %s", r.ExitCode, msg)
}

// testlib reads testlib's verdict. Its message goes to stderr (to stdout in
// very old copies, so stdout is the fallback); for points it starts with the
// word "points" and the value, as testlib's quitp writes them.
func testlib(r Run, maxPoints float64) (Outcome, error) {
	msg := joinMessage(r.Stderr, r.Stdout)
	switch r.ExitCode {
	case testlibOK:
		return Outcome{Fraction: 1, Message: msg}, nil
	case testlibWA:
		return Outcome{Fraction: 0, Message: msg}, nil
	case testlibPE, testlibDirt, testlibEOF:
		// Presentation errors are WA here (docs/engine.md): the message says so.
		return Outcome{Fraction: 0, Message: bound("presentation error: " + msg)}, nil
	case testlibFail:
		return Outcome{}, failed("the checker reported FAIL: %s", msg)
	case testlibPoints:
		pts, rest, err := testlibPointsOf(msg)
		if err != nil {
			return Outcome{}, err
		}
		f, err := fraction(pts, maxPoints)
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{Fraction: f, Message: bound(rest)}, nil
	}
	return Outcome{}, failed("exit code %d is not a testlib verdict (0 OK, 1 WA, 2 PE, 3 FAIL, 7 points): %s", r.ExitCode, msg)
}

// testlibPointsOf reads "points <value> [comment]" (the word is optional, so
// a checker that prints only the value also works).
func testlibPointsOf(msg string) (float64, string, error) {
	fields := strings.Fields(msg)
	if len(fields) > 0 && fields[0] == "points" {
		fields = fields[1:]
	}
	if len(fields) == 0 {
		return 0, "", failed("exit code 7 (points) without a value on stderr; expected \"points <value>\"")
	}
	v, err := decimal(fields[0])
	if err != nil {
		return 0, "", failed("exit code 7 (points): %v", err)
	}
	return v, strings.Join(fields[1:], " "), nil
}

// score: exit 0 and stdout holding exactly one decimal number (surrounding
// whitespace ignored); stderr is the message. Any other exit code is the
// checker's failure.
func score(r Run, maxPoints float64) (Outcome, error) {
	msg := bound(strings.TrimSpace(r.Stderr))
	if r.ExitCode != 0 {
		return Outcome{}, failed("score checker exit code %d: %s", r.ExitCode, msg)
	}
	out := strings.TrimSpace(r.Stdout)
	if strings.ContainsAny(out, " \t\r\n\v\f") {
		return Outcome{}, failed("score checker printed %s on stdout; expected one number", clip([]byte(out)))
	}
	v, err := decimal(out)
	if err != nil {
		return Outcome{}, failed("score checker stdout: %v", err)
	}
	f, err := fraction(v, maxPoints)
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Fraction: f, Message: msg}, nil
}

// decimal parses one finite decimal number (numberRE: no hex, inf or nan).
func decimal(tok string) (float64, error) {
	if tok == "" {
		return 0, errors.New("no number")
	}
	v, ok := number([]byte(tok))
	if !ok {
		return 0, fmt.Errorf("%s is not a decimal number", clip([]byte(tok)))
	}
	return v, nil
}

// fraction is points / maxPoints; points outside [0, maxPoints] are the
// checker's defect, not the contestant's.
func fraction(points, maxPoints float64) (float64, error) {
	if points < 0 || points > maxPoints {
		return 0, failed("points %v outside [0, %v]", points, maxPoints)
	}
	return min(points/maxPoints, 1), nil
}

// ansiRE matches terminal colour sequences (testlib colours its verdict
// word when stderr is a terminal; harmless to strip when it is not).
var ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

// joinMessage is stderr then stdout, trimmed, colourless and bounded.
func joinMessage(stderr, stdout string) string {
	a, b := strings.TrimSpace(stderr), strings.TrimSpace(stdout)
	msg := a
	if a != "" && b != "" {
		msg = a + "\n" + b
	} else if a == "" {
		msg = b
	}
	return bound(ansiRE.ReplaceAllString(msg, ""))
}

// bound cuts s to MaxMessageBytes of valid UTF-8.
func bound(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxMessageBytes {
		return s
	}
	cut := MaxMessageBytes - len("…")
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
