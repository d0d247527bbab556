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
	} {
		ok, msg := Float([]byte(tc.exp), []byte(tc.got), tc.abs, tc.rel)
		require.Equal(t, tc.ok, ok, "expected %q got %q: %s", tc.exp, tc.got, msg)
	}
}
