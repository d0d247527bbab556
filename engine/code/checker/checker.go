// Package checker compares a program's output with the expected output on the
// host (the expected output never enters the sandbox), and interprets what a
// special checker's run means (protocol.go). The special checker itself is a
// program run in its own sandbox by engine/code; this package only reads its
// exit code and output, so every rule here is a pure function with table tests.
// The rules are written out in docs/engine.md, "Checkers"; keep both in step.
package checker

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"strconv"
)

// maxMessage bounds the diff text of a result.
const maxMessage = 200

// Exact accepts byte-identical output: no whitespace, line-end or final
// newline is forgiven ("1\n" and "1" differ, so do "\r\n" and "\n").
func Exact(expected, got []byte) (bool, string) {
	if bytes.Equal(expected, got) {
		return true, ""
	}
	i := firstDiff(expected, got)
	return false, fmt.Sprintf("output differs at byte %d", i)
}

// Tolerant (the default) compares line by line. Both texts are split at
// '\n'; from the end of every line, spaces, tabs and '\r' are removed (so
// CRLF equals LF and trailing blanks are ignored); then empty lines at the end
// of the text are dropped (so a missing or extra final newline, or trailing
// blank lines, are ignored). Everything else is significant: leading blanks,
// blanks between tokens, empty lines before the last non-empty one, other
// control characters. Empty output matches an expected output that is empty
// or only blank lines.
func Tolerant(expected, got []byte) (bool, string) {
	el, gl := lines(expected), lines(got)
	for i := 0; i < max(len(el), len(gl)); i++ {
		var e, g []byte
		if i < len(el) {
			e = el[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if !bytes.Equal(e, g) {
			return false, fmt.Sprintf("line %d: expected %s, got %s", i+1, clip(e), clip(g))
		}
	}
	return true, ""
}

// lines splits into lines without trailing blanks and drops trailing empty lines.
func lines(b []byte) [][]byte {
	ls := bytes.Split(b, []byte{'\n'})
	for i, l := range ls {
		ls[i] = bytes.TrimRight(l, " \t\r")
	}
	for len(ls) > 0 && len(ls[len(ls)-1]) == 0 {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// numberRE is a decimal number as judges print them: optional sign, digits
// with an optional fraction (or a fraction alone), optional exponent. Hex
// floats, "inf", "nan" and digit separators are not numbers here (they are
// compared as text), so a contestant cannot pass "0x1p-2" for 0.25.
var numberRE = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// asciiSpace is a token separator of Float: space, \t, \n, \v, \f, \r.
// Other Unicode spaces (U+00A0, U+0085, …) are part of a token.
func asciiSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\v' || r == '\f' || r == '\r'
}

// Float compares tokens separated by runs of ASCII whitespace; line structure
// is ignored and the token counts must be equal. When both tokens are
// decimal numbers (numberRE) that fit a float64, they match if
// |e-g| <= abs or |e-g| <= rel*|e| (e the expected value); otherwise the
// tokens must be byte-equal.
func Float(expected, got []byte, abs, rel float64) (bool, string) {
	et, gt := bytes.FieldsFunc(expected, asciiSpace), bytes.FieldsFunc(got, asciiSpace)
	if len(et) != len(gt) {
		return false, fmt.Sprintf("expected %d tokens, got %d", len(et), len(gt))
	}
	for i := range et {
		e, okE := number(et[i])
		g, okG := number(gt[i])
		if !okE || !okG {
			if !bytes.Equal(et[i], gt[i]) {
				return false, fmt.Sprintf("token %d: expected %s, got %s", i+1, clip(et[i]), clip(gt[i]))
			}
			continue
		}
		if e == g {
			continue
		}
		d := math.Abs(e - g)
		if d <= abs || d <= rel*math.Abs(e) {
			continue
		}
		return false, fmt.Sprintf("token %d: expected %s, got %s (difference %g)", i+1, clip(et[i]), clip(gt[i]), d)
	}
	return true, ""
}

// number parses a decimal token that fits a float64 (a value that overflows
// to infinity is not a number here, so it compares as text).
func number(tok []byte) (float64, bool) {
	if !numberRE.Match(tok) {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(tok), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func clip(b []byte) string {
	if b == nil {
		return "end of output"
	}
	if len(b) > maxMessage/2 {
		return strconv.Quote(string(b[:maxMessage/2])) + "…"
	}
	return strconv.Quote(string(b))
}
