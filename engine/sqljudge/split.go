package sqljudge

import "strings"

// splitStatements splits student SQL at top-level semicolons, honouring
// quoted strings ('…', "…" with backslash escapes and doubled quotes),
// backquoted identifiers and comments (-- , #, /* */). Statements that hold
// only whitespace or plain comments are dropped; MySQL executable comments
// (/*! … */, /*M! … */) count as code. Compound statements (BEGIN … END) are
// not understood: the student cannot create routines anyway, and a split one
// fails as a syntax error, which is the student's RE.
//
// Splitting on the judge side lets every statement get its own time limit and
// watchdog and lets a problem refuse multi-statement submissions.
func splitStatements(sql string) []string {
	var (
		out     []string
		start   int
		hasCode bool
	)
	flush := func(end int) {
		if hasCode {
			out = append(out, strings.TrimSpace(sql[start:end]))
		}
		start, hasCode = end+1, false
	}
	n := len(sql)
	for i := 0; i < n; i++ {
		c := sql[i]
		switch {
		case c == ';':
			flush(i)
		case c == '\'' || c == '"' || c == '`':
			hasCode = true
			i = skipQuoted(sql, i, c)
		case c == '#':
			i = skipLine(sql, i)
		case c == '-' && i+1 < n && sql[i+1] == '-' && (i+2 == n || isSpaceOrCtl(sql[i+2])):
			i = skipLine(sql, i)
		case c == '/' && i+1 < n && sql[i+1] == '*':
			if i+2 < n && (sql[i+2] == '!' || (sql[i+2] == 'M' && i+3 < n && sql[i+3] == '!')) {
				hasCode = true
			}
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				// Unterminated comment: leave it to the server to refuse.
				hasCode = true
				i = n - 1
			} else {
				i = i + 2 + end + 1
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
		default:
			hasCode = true
		}
	}
	flush(n)
	return out
}

// skipQuoted returns the index of the closing quote of the quoted run that
// starts at i, or len(s)-1 when it is unterminated.
func skipQuoted(s string, i int, q byte) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			if q != '`' {
				j++
			}
		case q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j
		}
	}
	return len(s) - 1
}

// skipLine returns the index of the newline ending the comment at i.
func skipLine(s string, i int) int {
	if k := strings.IndexByte(s[i:], '\n'); k >= 0 {
		return i + k
	}
	return len(s) - 1
}

func isSpaceOrCtl(c byte) bool { return c <= ' ' }
