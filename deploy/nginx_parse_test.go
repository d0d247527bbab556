package deploy

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ---- nginx ------------------------------------------------------------------

type ngxDirective struct {
	name  string
	args  []string
	block []*ngxDirective
}

func (d *ngxDirective) find(name string) []*ngxDirective {
	var out []*ngxDirective
	for _, c := range d.block {
		if c.name == name {
			out = append(out, c)
		}
	}
	return out
}

func (d *ngxDirective) value(name string) string {
	v := d.find(name)
	if len(v) == 0 {
		return ""
	}
	return strings.Join(v[0].args, " ")
}

func ngxTokens(src string) ([]string, error) {
	var toks []string
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '{' || c == '}' || c == ';':
			toks = append(toks, string(c))
			i++
		case c == '"' || c == '\'':
			j := strings.IndexByte(src[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated quote at byte %d", i)
			}
			toks = append(toks, src[i+1:i+1+j])
			i += j + 2
		default:
			j := i
			for j < len(src) && !strings.ContainsRune(" \t\r\n{};", rune(src[j])) {
				j++
			}
			toks = append(toks, src[i:j])
			i = j
		}
	}
	return toks, nil
}

func ngxParse(toks []string, pos int, top bool) ([]*ngxDirective, int, error) {
	var out []*ngxDirective
	var cur []string
	for pos < len(toks) {
		tok := toks[pos]
		pos++
		switch tok {
		case ";":
			if len(cur) == 0 {
				return nil, pos, fmt.Errorf("empty directive")
			}
			out = append(out, &ngxDirective{name: cur[0], args: cur[1:]})
			cur = nil
		case "{":
			if len(cur) == 0 {
				return nil, pos, fmt.Errorf("block without a name")
			}
			d := &ngxDirective{name: cur[0], args: cur[1:]}
			var err error
			d.block, pos, err = ngxParse(toks, pos, false)
			if err != nil {
				return nil, pos, err
			}
			out = append(out, d)
			cur = nil
		case "}":
			if top || len(cur) != 0 {
				return nil, pos, fmt.Errorf("unexpected }")
			}
			return out, pos, nil
		default:
			cur = append(cur, tok)
		}
	}
	if !top || len(cur) != 0 {
		return nil, pos, fmt.Errorf("unexpected end of file")
	}
	return out, pos, nil
}

func loadNginx(t *testing.T) *ngxDirective {
	t.Helper()
	data, err := os.ReadFile(repo(nginxConf))
	require.NoError(t, err)
	toks, err := ngxTokens(string(data))
	require.NoError(t, err)
	block, _, err := ngxParse(toks, 0, true)
	require.NoError(t, err)
	return &ngxDirective{name: "http", block: block}
}

func ngxSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
		mult = 1 << 10
	case strings.HasSuffix(s, "m"), strings.HasSuffix(s, "M"):
		mult = 1 << 20
	case strings.HasSuffix(s, "g"), strings.HasSuffix(s, "G"):
		mult = 1 << 30
	}
	n, err := strconv.ParseInt(strings.TrimRight(s, "kKmMgG"), 10, 64)
	return n * mult, err
}

// ngxRoute picks the location nginx would use for uri: exact match, then the
// longest prefix (final if "^~"), then the first matching regex, else the
// longest prefix.
func ngxRoute(t *testing.T, srv *ngxDirective, uri string) *ngxDirective {
	t.Helper()
	var best *ngxDirective
	bestLen := -1
	for _, l := range srv.find("location") {
		switch {
		case len(l.args) == 2 && l.args[0] == "=":
			if l.args[1] == uri {
				return l
			}
		case len(l.args) == 1 && strings.HasPrefix(uri, l.args[0]) && len(l.args[0]) > bestLen:
			best, bestLen = l, len(l.args[0])
		case len(l.args) == 2 && l.args[0] == "^~" && strings.HasPrefix(uri, l.args[1]) && len(l.args[1]) > bestLen:
			best, bestLen = l, len(l.args[1])
		}
	}
	if best != nil && best.args[0] == "^~" {
		return best
	}
	for _, l := range srv.find("location") {
		if len(l.args) == 2 && (l.args[0] == "~" || l.args[0] == "~*") {
			expr := l.args[1]
			if l.args[0] == "~*" {
				expr = "(?i)" + expr
			}
			if regexp.MustCompile(expr).MatchString(uri) {
				return l
			}
		}
	}
	require.NotNil(t, best, "no location for %s", uri)
	return best
}

// gate returns the geo variable a location refuses requests by (403), or "".
func gate(l *ngxDirective) string {
	for _, d := range l.find("if") {
		cond := strings.Join(d.args, " ")
		if strings.HasSuffix(cond, "= 0)") && d.value("return") == "403" {
			return strings.Fields(strings.TrimPrefix(cond, "("))[0]
		}
	}
	return ""
}

// networks lists the addresses a geo block maps to 1.
func networks(g *ngxDirective) []string {
	var out []string
	for _, d := range g.block {
		if d.name != "default" && strings.Join(d.args, " ") == "1" {
			out = append(out, d.name)
		}
	}
	return out
}

// ngxNamed returns the named location (location @name).
func ngxNamed(t *testing.T, srv *ngxDirective, name string) *ngxDirective {
	t.Helper()
	for _, l := range srv.find("location") {
		if len(l.args) == 1 && l.args[0] == name {
			return l
		}
	}
	t.Fatalf("no location %s", name)
	return nil
}
