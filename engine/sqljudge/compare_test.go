package sqljudge

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

func TestNormalise(t *testing.T) {
	t.Parallel()
	cases := []struct {
		v    string
		cat  category
		want string
	}{
		{"1.50", catExact, "1.5"},
		{"-0.00", catExact, "0"},
		{"007", catExact, "7"},
		{"+3", catExact, "3"},
		{"12.", catExact, "12"},
		{"abc", catExact, "abc"},
		{"0.30000000000000004", catDouble, "0.3"},
		{"1e+20", catDouble, "100000000000000000000"},
		{"3.14159274", catFloat, "3.14159"},
		{"2020-01-02 03:04:05.500000", catTemporal, "2020-01-02 03:04:05.5"},
		{"2020-01-02 03:04:05.000", catTemporal, "2020-01-02 03:04:05"},
		{"10:00:00", catTemporal, "10:00:00"},
		{" Ada ", catText, " Ada "},
	}
	for _, c := range cases {
		require.Equal(t, c.want, normalise(c.v, c.cat), "normalise(%q, %d)", c.v, c.cat)
	}
}

func TestCategoryOf(t *testing.T) {
	t.Parallel()
	require.Equal(t, catExact, categoryOf("UNSIGNED BIGINT"))
	require.Equal(t, catExact, categoryOf("decimal(10,2)"))
	require.Equal(t, catExact, categoryOf("bigint unsigned"))
	require.Equal(t, catDouble, categoryOf("DOUBLE"))
	require.Equal(t, catFloat, categoryOf("float"))
	require.Equal(t, catTemporal, categoryOf("DATETIME"))
	require.Equal(t, catText, categoryOf("VARCHAR"))
	require.Equal(t, catText, categoryOf(""))
	require.Equal(t, catDouble, columnCategory(catExact, catDouble))
	require.Equal(t, catExact, columnCategory(catExact, catExact))
	require.Equal(t, catText, columnCategory(catExact, catText))
}

func rs(cols, types []string, rows ...[]string) engine.ResultSet {
	return engine.ResultSet{Columns: cols, Types: types, Rows: rowsOf(rows...)}
}

func TestCompareResults(t *testing.T) {
	t.Parallel()
	cols := []string{"id", "name"}
	types := []string{"INT", "VARCHAR"}
	exp := rs(cols, types, []string{"1", "a"}, []string{"2", "b"}, []string{"2", "b"})

	t.Run("equal", func(t *testing.T) {
		t.Parallel()
		require.Empty(t, compareResults(exp, rs(cols, types, []string{"1", "a"}, []string{"2", "b"}, []string{"2", "b"}), true, true, 1024))
	})
	t.Run("order matters when ordered", func(t *testing.T) {
		t.Parallel()
		act := rs(cols, types, []string{"2", "b"}, []string{"1", "a"}, []string{"2", "b"})
		require.Contains(t, compareResults(exp, act, true, true, 1024), "row 1: expected ('1', 'a'), got ('2', 'b')")
		require.Empty(t, compareResults(exp, act, false, true, 1024))
	})
	t.Run("multiset counts duplicates", func(t *testing.T) {
		t.Parallel()
		act := rs(cols, types, []string{"1", "a"}, []string{"1", "a"}, []string{"2", "b"})
		msg := compareResults(exp, act, false, true, 1024)
		require.Contains(t, msg, "missing row: ('2', 'b')")
		require.Contains(t, msg, "unexpected row: ('1', 'a')")
	})
	t.Run("row count", func(t *testing.T) {
		t.Parallel()
		msg := compareResults(exp, rs(cols, types, []string{"1", "a"}), true, true, 1024)
		require.Contains(t, msg, "expected 3 rows, got 1")
		require.Contains(t, msg, "row 2: expected ('2', 'b'), got no row")
	})
	t.Run("column count and names", func(t *testing.T) {
		t.Parallel()
		require.Contains(t, compareResults(exp, rs([]string{"id"}, []string{"INT"}, []string{"1"}), true, false, 1024), "expected 2 columns")
		renamed := rs([]string{"ID", "who"}, types, []string{"1", "a"}, []string{"2", "b"}, []string{"2", "b"})
		require.Contains(t, compareResults(exp, renamed, true, true, 1024), `column 2: expected name "name", got "who"`)
		require.Empty(t, compareResults(exp, renamed, true, false, 1024))
	})
	t.Run("NULL is not the string NULL nor empty", func(t *testing.T) {
		t.Parallel()
		e := rs([]string{"x"}, []string{"VARCHAR"}, []string{null})
		require.NotEmpty(t, compareResults(e, rs([]string{"x"}, []string{"VARCHAR"}, []string{"NULL"}), true, true, 1024))
		require.NotEmpty(t, compareResults(e, rs([]string{"x"}, []string{"VARCHAR"}, []string{""}), true, true, 1024))
		require.Empty(t, compareResults(e, rs([]string{"x"}, []string{"VARCHAR"}, []string{null}), true, true, 1024))
	})
	t.Run("numbers across types", func(t *testing.T) {
		t.Parallel()
		e := rs([]string{"v"}, []string{"DECIMAL(10,2)"}, []string{"3.00"}, []string{"0.30"})
		act := rs([]string{"v"}, []string{"DOUBLE"}, []string{"3"}, []string{"0.30000000000000004"})
		require.Empty(t, compareResults(e, act, true, true, 1024))
		act = rs([]string{"v"}, []string{"DOUBLE"}, []string{"3"}, []string{"0.31"})
		require.NotEmpty(t, compareResults(e, act, true, true, 1024))
	})
	t.Run("frozen result without types takes the actual types", func(t *testing.T) {
		t.Parallel()
		e := rs([]string{"v"}, nil, []string{"1.5"})
		require.Empty(t, compareResults(e, rs([]string{"v"}, []string{"DECIMAL"}, []string{"1.50"}), true, true, 1024))
	})
	t.Run("text is exact", func(t *testing.T) {
		t.Parallel()
		e := rs([]string{"v"}, []string{"VARCHAR"}, []string{"Ada"})
		require.NotEmpty(t, compareResults(e, rs([]string{"v"}, []string{"VARCHAR"}, []string{"ada"}), true, true, 1024))
	})
	t.Run("diff is bounded", func(t *testing.T) {
		t.Parallel()
		long := strings.Repeat("x\n", 500)
		var er, ar [][]string
		for i := 0; i < 50; i++ {
			er = append(er, []string{long})
			ar = append(ar, []string{long + "y"})
		}
		msg := compareResults(rs([]string{"v"}, []string{"TEXT"}, er...), rs([]string{"v"}, []string{"TEXT"}, ar...), true, true, 300)
		require.LessOrEqual(t, len(msg), 300)
		require.NotContains(t, msg, "\n\n")
		msg = compareResults(rs([]string{"v"}, []string{"TEXT"}, er...), rs([]string{"v"}, []string{"TEXT"}, ar...), true, true, 4000)
		require.Equal(t, 1+maxDiffRows, len(strings.Split(msg, "\n")), "a header and the first differing rows only")
	})
}
