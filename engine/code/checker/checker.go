// Package checker compares a program's output with the expected output on the
// host (the expected output never enters the sandbox). The special judge is
// not here: it is a program run in its own sandbox by engine/code.
package checker

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
)

// maxMessage bounds the diff text of a result.
const maxMessage = 200

// Exact accepts byte-identical output.
func Exact(expected, got []byte) (bool, string) {
	if bytes.Equal(expected, got) {
		return true, ""
	}
	i := firstDiff(expected, got)
	return false, fmt.Sprintf("output differs at byte %d", i)
}

// Tolerant accepts output equal to the expected one up to trailing spaces,
// tabs and carriage returns at line ends and trailing empty lines (the default).
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

// Float compares whitespace-separated tokens; tokens that both parse as
// numbers match when |e-g| <= abs or |e-g| <= rel*|e|, others must be equal.
func Float(expected, got []byte, abs, rel float64) (bool, string) {
	et, gt := bytes.Fields(expected), bytes.Fields(got)
	if len(et) != len(gt) {
		return false, fmt.Sprintf("expected %d tokens, got %d", len(et), len(gt))
	}
	for i := range et {
		e, errE := strconv.ParseFloat(string(et[i]), 64)
		g, errG := strconv.ParseFloat(string(gt[i]), 64)
		if errE != nil || errG != nil {
			if !bytes.Equal(et[i], gt[i]) {
				return false, fmt.Sprintf("token %d: expected %s, got %s", i+1, clip(et[i]), clip(gt[i]))
			}
			continue
		}
		if math.IsNaN(e) || math.IsNaN(g) {
			if math.IsNaN(e) && math.IsNaN(g) {
				continue
			}
			return false, fmt.Sprintf("token %d: expected %s, got %s", i+1, clip(et[i]), clip(gt[i]))
		}
		if e == g { // also equal infinities
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
