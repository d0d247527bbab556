package sqljudge

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSplitStatements(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   string
		want []string
	}{
		{"single", "SELECT 1", []string{"SELECT 1"}},
		{"trailing semicolon and space", "  SELECT 1 ;\n\n", []string{"SELECT 1"}},
		{"two", "SELECT 1; SELECT 2;", []string{"SELECT 1", "SELECT 2"}},
		{"semicolon in single quotes", "SELECT 'a;b'; SELECT 2", []string{"SELECT 'a;b'", "SELECT 2"}},
		{"escaped quote", `SELECT 'it\'s;'; SELECT 2`, []string{`SELECT 'it\'s;'`, "SELECT 2"}},
		{"doubled quote", `SELECT 'it''s;'`, []string{`SELECT 'it''s;'`}},
		{"double quotes", `SELECT "x;y"`, []string{`SELECT "x;y"`}},
		{"backquoted identifier", "SELECT `a;b` FROM t", []string{"SELECT `a;b` FROM t"}},
		{"dash comment", "SELECT 1 -- one; two\n; SELECT 2", []string{"SELECT 1 -- one; two", "SELECT 2"}},
		{"dash without space is minus", "SELECT 1--1; SELECT 2", []string{"SELECT 1--1", "SELECT 2"}},
		{"hash comment", "SELECT 1 # x;y\n", []string{"SELECT 1 # x;y"}},
		{"block comment", "SELECT /* ; */ 1", []string{"SELECT /* ; */ 1"}},
		{"only comments", "-- nothing\n/* at all */ ;  ; # here", nil},
		{"executable comment counts", "/*!40101 SET @x = 1 */;", []string{"/*!40101 SET @x = 1 */"}},
		{"empty", "", nil},
		{"unterminated string stays one statement", "SELECT 'abc; SELECT 2", []string{"SELECT 'abc; SELECT 2"}},
		{"unterminated comment", "SELECT 1 /* ; ", []string{"SELECT 1 /* ;"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, splitStatements(c.in))
		})
	}
}
