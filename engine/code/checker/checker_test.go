package checker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExact(t *testing.T) {
	t.Parallel()
	ok, _ := Exact([]byte("1 2\n"), []byte("1 2\n"))
	require.True(t, ok)
	ok, msg := Exact([]byte("1 2\n"), []byte("1 2"))
	require.False(t, ok)
	require.Contains(t, msg, "byte 3")
	ok, _ = Exact(nil, []byte{})
	require.True(t, ok, "empty expected output is a valid case")
}

func TestTolerant(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		exp, got string
		ok       bool
	}{
		{"1 2\n3\n", "1 2  \r\n3", true},
		{"1 2\n3\n", "1 2\n3\n\n\n", true},
		{"", "", true},
		{"", "\n \n", true},
		{"", "x", false},
		{"1 2\n3\n", "1  2\n3\n", false},
		{"a\n\nb\n", "a\nb\n", false},
		{"1\n", "", false},
		// Line ends: CRLF equals LF, a lone CR at a line end is a blank.
		{"a\nb\n", "a\r\nb\r\n", true},
		{"a\nb", "a\rb", false},
		// Trailing blanks are spaces, tabs and CR only; others are significant.
		{"a\n", "a\t \t\n", true},
		{"a\n", "a\f\n", false},
		{"a\n", "a\u00a0\n", false},
		// Leading blanks and blank lines before content are significant.
		{"a\n", " a\n", false},
		{"a\n", "\na\n", false},
		// Trailing blank lines on either side are ignored.
		{"a\n\n\n", "a", true},
		{"a\n \n\t\n", "a\n", true},
		// Empty expected output matches only blank output.
		{"", "\r\n\t", true},
		{"\n", "0", false},
	} {
		ok, msg := Tolerant([]byte(tc.exp), []byte(tc.got))
		require.Equal(t, tc.ok, ok, "expected %q got %q: %s", tc.exp, tc.got, msg)
	}
}

func TestFloat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		exp, got string
		abs, rel float64
		ok       bool
	}{
		{"3.14159", "3.1416", 1e-4, 0, true},
		{"3.14159", "3.15", 1e-4, 0, false},
		{"1000000", "1000001", 0, 1e-5, true},
		{"1000000", "1000100", 1e-6, 1e-6, false},
		{"yes 1.0", "yes 1.0000001", 1e-6, 0, true},
		{"yes 1.0", "no 1.0", 1e-6, 0, false},
		{"1 2", "1", 1, 1, false},
		{"nan", "1", 1, 1, false},
		{"inf", "inf", 0, 0, true},
		{"", "  \n", 0, 0, true},
		// Line structure is ignored: any run of ASCII whitespace separates.
		{"1 2\n3", "1\n2 \t 3\r\n", 0, 0, true},
		{"1 2", "1\v2\f", 0, 0, true},
		// Non-ASCII spaces are part of a token.
		{"1 2", "1\u00a02", 1, 1, false},
		// Hex floats, inf and nan are text, not numbers.
		{"0.25", "0x1p-2", 1e-9, 0, false},
		{"inf", "1e999", 1, 1, false},
		{"nan", "nan", 0, 0, true},
		{"nan", "NaN", 1, 1, false},
		// Signs, exponents and bare fractions are numbers.
		{"0.5", ".5", 0, 0, true},
		{"1", "1.", 0, 0, true},
		{"1", "1.0e0", 0, 0, true},
		{"1", "1e", 1, 1, false},
		{"-0", "0", 0, 0, true},
		{"+1e3", "1000.0000001", 1e-6, 0, true},
		// Relative tolerance is relative to the expected value.
		{"100", "101", 0, 0.01, true},
		{"100", "102", 0, 0.01, false},
		{"0", "1e-10", 0, 0.5, false},
		{"0", "1e-10", 1e-9, 0, true},
		// Equal text always matches, numeric or not.
		{"abc", "abc", 0, 0, true},
	} {
		ok, msg := Float([]byte(tc.exp), []byte(tc.got), tc.abs, tc.rel)
		require.Equal(t, tc.ok, ok, "expected %q got %q: %s", tc.exp, tc.got, msg)
	}
}

func TestExactTokenRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		exp, got string
		ok       bool
	}{
		{"1\n", "1\n", true},
		{"1\n", "1", false},
		{"1\n", "1\r\n", false},
		{"1 \n", "1\n", false},
		{"", "", true},
		{"", "\n", false},
	} {
		ok, msg := Exact([]byte(tc.exp), []byte(tc.got))
		require.Equal(t, tc.ok, ok, "expected %q got %q: %s", tc.exp, tc.got, msg)
	}
}
