package sqljudge

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kece-oj/kece/engine"
)

// category is how a column's values are normalised before comparison.
type category int

const (
	catText     category = iota // compared byte for byte
	catExact                    // integers and decimals: canonical decimal text
	catDouble                   // DOUBLE/REAL: 12 significant digits
	catFloat                    // FLOAT (single precision): 6 significant digits
	catTemporal                 // DATE/TIME/DATETIME/TIMESTAMP: trailing fractional zeros dropped
)

// Significant digits kept for approximate types: enough to tell real
// differences apart, few enough that 0.1+0.2 equals 0.3.
const (
	doubleDigits = 12
	floatDigits  = 6
)

// categoryOf maps a type name as the driver reports it ("DECIMAL",
// "UNSIGNED BIGINT") or as a manifest freezes it ("decimal(10,2)",
// "bigint unsigned") to a category.
func categoryOf(typ string) category {
	t := strings.ToUpper(strings.TrimSpace(typ))
	t = strings.TrimPrefix(t, "UNSIGNED ")
	if i := strings.IndexAny(t, "( "); i >= 0 {
		t = t[:i]
	}
	switch t {
	case "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "INTEGER", "BIGINT", "YEAR",
		"DECIMAL", "NUMERIC", "DEC", "FIXED", "BOOL", "BOOLEAN":
		return catExact
	case "DOUBLE", "REAL":
		return catDouble
	case "FLOAT":
		return catFloat
	case "DATE", "TIME", "DATETIME", "TIMESTAMP", "NEWDATE":
		return catTemporal
	}
	return catText
}

func isNumeric(c category) bool { return c == catExact || c == catDouble || c == catFloat }

// columnCategory decides one category for both sides of a column, so an
// INT answer matches a DECIMAL expectation and a DOUBLE is rounded on both
// sides when either side is approximate.
func columnCategory(exp, act category) category {
	if isNumeric(exp) && isNumeric(act) {
		switch {
		case exp == catFloat || act == catFloat:
			return catFloat
		case exp == catDouble || act == catDouble:
			return catDouble
		}
		return catExact
	}
	if exp == act {
		return exp
	}
	return catText
}

// normalise returns the comparison form of one non-NULL value. A value that
// does not parse in its category is compared as text.
func normalise(v string, c category) string {
	switch c {
	case catExact:
		if d, ok := canonDecimal(v); ok {
			return d
		}
	case catDouble, catFloat:
		digits := doubleDigits
		if c == catFloat {
			digits = floatDigits
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			break
		}
		f, _ = strconv.ParseFloat(strconv.FormatFloat(f, 'g', digits, 64), 64)
		if d, ok := canonDecimal(strconv.FormatFloat(f, 'f', -1, 64)); ok {
			return d
		}
	case catTemporal:
		if i := strings.IndexByte(v, '.'); i >= 0 {
			v = strings.TrimRight(v, "0")
			v = strings.TrimSuffix(v, ".")
		}
		return v
	}
	return v
}

// canonDecimal turns a plain decimal literal ("-001.500") into its canonical
// text ("-1.5"); "-0" becomes "0".
func canonDecimal(s string) (string, bool) {
	s = strings.TrimSpace(s)
	neg := false
	switch {
	case strings.HasPrefix(s, "-"):
		neg, s = true, s[1:]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" && frac == "" {
		return "", false
	}
	for _, p := range []string{intPart, frac} {
		for i := 0; i < len(p); i++ {
			if p[i] < '0' || p[i] > '9' {
				return "", false
			}
		}
	}
	intPart = strings.TrimLeft(intPart, "0")
	frac = strings.TrimRight(frac, "0")
	if intPart == "" {
		intPart = "0"
	}
	out := intPart
	if frac != "" {
		out += "." + frac
	}
	if neg && out != "0" {
		out = "-" + out
	}
	return out, true
}

// cell is a normalised value; null is distinct from every string.
type cell struct {
	null bool
	s    string
}

func normaliseRows(rows [][]*string, cats []category) [][]cell {
	out := make([][]cell, len(rows))
	for i, r := range rows {
		nr := make([]cell, len(r))
		for j, v := range r {
			if v == nil {
				nr[j] = cell{null: true}
			} else {
				nr[j] = cell{s: normalise(*v, cats[j])}
			}
		}
		out[i] = nr
	}
	return out
}

func rowKey(r []cell) string {
	var b strings.Builder
	for _, c := range r {
		if c.null {
			b.WriteString("\x01N")
		} else {
			b.WriteString("\x02")
			b.WriteString(c.s)
		}
		b.WriteByte(0)
	}
	return b.String()
}

// maxDiffRows is how many differing rows a WA message shows.
const maxDiffRows = 3

// compareResults compares an actual result set with the expected one. It
// returns "" when they match, otherwise a bounded human-readable diff.
func compareResults(exp, act engine.ResultSet, ordered, names bool, maxMsg int) string {
	if len(exp.Columns) != len(act.Columns) {
		return bound(fmt.Sprintf("expected %d columns (%s), got %d (%s)",
			len(exp.Columns), strings.Join(exp.Columns, ", "), len(act.Columns), strings.Join(act.Columns, ", ")), maxMsg)
	}
	if names {
		for i := range exp.Columns {
			if !strings.EqualFold(exp.Columns[i], act.Columns[i]) {
				return bound(fmt.Sprintf("column %d: expected name %q, got %q", i+1, exp.Columns[i], act.Columns[i]), maxMsg)
			}
		}
	}
	cats := make([]category, len(exp.Columns))
	for i := range cats {
		at := ""
		if i < len(act.Types) {
			at = act.Types[i]
		}
		et := at // a frozen result without types takes the actual column's
		if i < len(exp.Types) && exp.Types[i] != "" {
			et = exp.Types[i]
		}
		cats[i] = columnCategory(categoryOf(et), categoryOf(at))
	}
	en, an := normaliseRows(exp.Rows, cats), normaliseRows(act.Rows, cats)
	var lines []string
	if ordered {
		for i := 0; i < len(en) || i < len(an); i++ {
			if len(lines) == maxDiffRows {
				break
			}
			switch {
			case i >= len(an):
				lines = append(lines, fmt.Sprintf("row %d: expected %s, got no row", i+1, showRow(exp.Rows[i])))
			case i >= len(en):
				lines = append(lines, fmt.Sprintf("row %d: expected no row, got %s", i+1, showRow(act.Rows[i])))
			case rowKey(en[i]) != rowKey(an[i]):
				lines = append(lines, fmt.Sprintf("row %d: expected %s, got %s", i+1, showRow(exp.Rows[i]), showRow(act.Rows[i])))
			}
		}
	} else {
		lines = multisetDiff(exp.Rows, en, act.Rows, an)
	}
	if len(lines) == 0 {
		return ""
	}
	head := "result differs"
	if len(en) != len(an) {
		head = fmt.Sprintf("expected %d rows, got %d", len(en), len(an))
	}
	if !ordered {
		head += " (row order ignored)"
	}
	return bound(head+"\n"+strings.Join(lines, "\n"), maxMsg)
}

// multisetDiff lists up to maxDiffRows rows missing from the answer and rows
// the answer has in excess, comparing the two result sets as multisets.
func multisetDiff(expRaw [][]*string, en [][]cell, actRaw [][]*string, an [][]cell) []string {
	type kr struct {
		key string
		i   int
	}
	keys := func(rows [][]cell) []kr {
		out := make([]kr, len(rows))
		for i, r := range rows {
			out[i] = kr{rowKey(r), i}
		}
		sort.SliceStable(out, func(a, b int) bool { return out[a].key < out[b].key })
		return out
	}
	ek, ak := keys(en), keys(an)
	var missing, extra []string
	i, j := 0, 0
	for i < len(ek) || j < len(ak) {
		switch {
		case j >= len(ak) || (i < len(ek) && ek[i].key < ak[j].key):
			if len(missing) < maxDiffRows {
				missing = append(missing, "missing row: "+showRow(expRaw[ek[i].i]))
			}
			i++
		case i >= len(ek) || ak[j].key < ek[i].key:
			if len(extra) < maxDiffRows {
				extra = append(extra, "unexpected row: "+showRow(actRaw[ak[j].i]))
			}
			j++
		default:
			i++
			j++
		}
	}
	return append(missing, extra...)
}

// maxShownValue bounds one value in a diff.
const maxShownValue = 40

func showRow(r []*string) string {
	parts := make([]string, len(r))
	for i, v := range r {
		if v == nil {
			parts[i] = "NULL"
			continue
		}
		s := *v
		if len(s) > maxShownValue {
			s = truncateUTF8(s, maxShownValue) + "…"
		}
		parts[i] = "'" + printable(s) + "'"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// printable replaces control characters and invalid UTF-8 so a diff stays on
// one line and is valid text.
func printable(s string) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if r < ' ' || r == 0x7f {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// bound cuts a message to max bytes on a rune boundary.
func bound(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return truncateUTF8(s, max-len("…")) + "…"
}
