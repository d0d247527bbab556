package code

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// javaEntry is where a Java source must be written and what to run.
type javaEntry struct {
	// File is the simple name of the type the file is named after
	// (<File>.java): the top-level public type, else the main class.
	File string
	// Main is the simple name of the top-level class declaring
	// public static void main(String[]); Run is its binary name, qualified by
	// the package.
	Main    string
	Package string
}

// Run is the name given to the java launcher.
func (e javaEntry) Run() string {
	if e.Package == "" {
		return e.Main
	}
	return e.Package + "." + e.Main
}

// entryError is a source whose entry point cannot be found: a compile error
// of the user, decided before anything runs.
type entryError struct{ msg string }

func (e *entryError) Error() string { return e.msg }

// maxJavaNameBytes is the longest name (in UTF-8 bytes) that fits a file
// system name component (255 bytes on ext4, xfs, overlayfs) with ".class"
// after it: class names become file names, package names directories.
const maxJavaNameBytes = 255 - len(".class")

// checkJavaName refuses the names the file system or the JVM cannot take:
// anything but a Java identifier (Character.isJavaIdentifierStart/Part, so
// any script's letters, digits and marks), and names too long for a file
// name. The run environment's LANG=C.UTF-8 makes javac and the launcher use
// UTF-8 for file names and arguments, as the source encoding is.
func checkJavaName(what, n string) error {
	ok := n != "" && utf8.ValidString(n)
	for i, r := range n {
		if !ok {
			break
		}
		ok = javaIdentPart(r) && (i > 0 || javaIdentStart(r))
	}
	switch {
	case !ok:
		return &entryError{fmt.Sprintf("%s %q is not a Java identifier", what, n)}
	case len(n) > maxJavaNameBytes:
		return &entryError{fmt.Sprintf("%s %.40q…: %d bytes in UTF-8; a file name takes at most %d with its .class suffix", what, n, len(n), maxJavaNameBytes)}
	}
	return nil
}

// javaIdentStart is Character.isJavaIdentifierStart: letters, letter
// numbers, currency symbols and connectors (such as '_').
func javaIdentStart(r rune) bool {
	return unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Sc, r) || unicode.Is(unicode.Pc, r)
}

// javaIdentPart is Character.isJavaIdentifierPart without the ignorable
// characters (javaIgnorable), which javac drops from names.
func javaIdentPart(r rune) bool {
	return javaIdentStart(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r)
}

// javaIgnorable is Character.isIdentifierIgnorable: format characters (such
// as a zero-width space) and the non-whitespace ISO controls. They may
// appear inside an identifier, and javac leaves them out of the name.
func javaIgnorable(r rune) bool {
	return unicode.Is(unicode.Cf, r) || r <= 0x08 || (r >= 0x0e && r <= 0x1b) || (r >= 0x7f && r <= 0x9f)
}

// javaType is one top-level type declaration.
type javaType struct {
	name    string
	public  bool
	hasMain bool
}

// findJavaEntry reads the top-level type declarations of a Java source the
// way javac's file-name rule and the java launcher see them. Comments,
// string, char and text-block literals are skipped; nested and local classes
// do not count. Unicode escapes (\u0063lass) are not decoded.
//
// The class to run is the top-level public type when it declares main; else
// the only top-level class declaring main; among several, the one named Main.
// The file is named after the top-level public type (javac requires it), or
// after the class to run when no type is public.
func findJavaEntry(src []byte) (javaEntry, error) {
	sc, err := scanJava(src)
	e := javaEntry{Package: sc.pkg}
	if err != nil {
		return e, err
	}
	return decideJavaEntry(e, sc.types, sc.nestedMain)
}

// javaScan is what scanJava finds in one source: its package and its
// top-level types, and whether a nested class declares main.
type javaScan struct {
	pkg        string
	types      []javaType
	nestedMain bool
}

// scanJava reads the package and the top-level type declarations of a
// source (see findJavaEntry for what is skipped).
func scanJava(src []byte) (javaScan, error) {
	toks := javaTokens(string(src))
	var sc javaScan
	start := 0 // first token of the current top-level declaration
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t == ";":
			start = i + 1
		case t == "package" && i == start:
			j := i + 1
			var parts []string
			for ; j < len(toks) && toks[j] != ";"; j++ {
				if toks[j] != "." {
					parts = append(parts, toks[j])
				}
			}
			sc.pkg = strings.Join(parts, ".")
			for _, p := range parts {
				if err := checkJavaName("package name", p); err != nil {
					return sc, err
				}
			}
			i, start = j, j+1
		case t == "import" && i == start:
			for i < len(toks) && toks[i] != ";" {
				i++
			}
			start = i + 1
		case t == "{":
			// A stray block at top level: skip it whole.
			i = matchBrace(toks, i)
			start = i + 1
		case isTypeKeyword(toks, i):
			kind := t
			if i > 0 && toks[i-1] == "@" {
				kind = "@interface"
			}
			if i+1 >= len(toks) || !isIdent(toks[i+1]) {
				continue
			}
			jt := javaType{name: toks[i+1], public: slices.Contains(toks[start:i], "public")}
			open := bodyStart(toks, i+2)
			if open < 0 {
				i = len(toks)
				break
			}
			end := matchBrace(toks, open)
			var nested bool
			jt.hasMain, nested = declaresMain(toks[open:end+1], kind == "interface" || kind == "@interface")
			sc.nestedMain = sc.nestedMain || nested
			sc.types = append(sc.types, jt)
			i, start = end, end+1
		}
	}
	return sc, nil
}

// decideJavaEntry applies the entry rule of findJavaEntry to one source's
// top-level types.
func decideJavaEntry(e javaEntry, types []javaType, nestedMain bool) (javaEntry, error) {
	var publics, mains []javaType
	for _, t := range types {
		if t.public {
			publics = append(publics, t)
		}
		if t.hasMain {
			mains = append(mains, t)
		}
	}
	switch {
	case len(mains) == 0:
		msg := "no runnable class: no top-level class declares public static void main(String[] args)"
		if nestedMain {
			msg += " (a main method in a nested class is not run; declare it in a top-level class)"
		}
		return e, &entryError{msg}
	case len(publics) > 0 && publics[0].hasMain:
		e.Main = publics[0].name
	case len(mains) == 1:
		e.Main = mains[0].name
	default:
		names := make([]string, len(mains))
		for i, m := range mains {
			names[i] = m.name
		}
		if !slices.Contains(names, "Main") {
			return e, &entryError{fmt.Sprintf("several top-level classes declare main (%s): make the one to run public", strings.Join(names, ", "))}
		}
		e.Main = "Main"
	}
	e.File = e.Main
	if len(publics) > 0 {
		e.File = publics[0].name
	}
	for _, n := range []string{e.File, e.Main} {
		if err := checkJavaName("class name", n); err != nil {
			return e, err
		}
	}
	return e, nil
}

// isTypeKeyword reports whether toks[i] starts a type declaration: class,
// interface, enum, @interface, or the contextual keyword record followed by
// a name and its header.
func isTypeKeyword(toks []string, i int) bool {
	if i > 0 && toks[i-1] == "." { // Foo.class
		return false
	}
	switch toks[i] {
	case "class", "interface", "enum":
		return true
	case "record":
		return i+2 < len(toks) && isIdent(toks[i+1]) && (toks[i+2] == "(" || toks[i+2] == "<")
	}
	return false
}

// bodyStart returns the index of the "{" opening the body of a type whose
// name ends before from (skipping generics, a record header, extends and
// implements clauses), or -1.
func bodyStart(toks []string, from int) int {
	paren := 0
	for i := from; i < len(toks); i++ {
		switch toks[i] {
		case "(":
			paren++
		case ")":
			paren--
		case "{":
			if paren == 0 {
				return i
			}
			i = matchBrace(toks, i) // an annotation's array value in a record header
		case ";":
			if paren == 0 {
				return -1
			}
		}
	}
	return -1
}

// matchBrace returns the index of the "}" closing toks[open] (or the last
// index when the source ends first).
func matchBrace(toks []string, open int) int {
	depth := 0
	for i := open; i < len(toks); i++ {
		switch toks[i] {
		case "{":
			depth++
		case "}":
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return len(toks) - 1
}

// declaresMain reports whether a type body (from its "{" to its "}") declares
// public static void main(String[]) as a direct member, and whether some
// deeper level (a nested or local class) declares a method named main.
func declaresMain(body []string, implicitPublic bool) (direct, nested bool) {
	depth, paren := 0, 0
	start := 1 // first token of the current member
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case "{":
			depth++
			if depth == 2 && paren == 0 {
				start = -1 // inside a member's body
			}
			continue
		case "}":
			depth--
			if depth == 1 && paren == 0 {
				start = i + 1
			}
			continue
		case "(":
			paren++
		case ")":
			paren--
		case ";":
			if depth == 1 && paren == 0 {
				start = i + 1
			}
		}
		if body[i] != "main" || i == 0 || body[i-1] != "void" || i+1 >= len(body) || body[i+1] != "(" || paren != 0 {
			continue
		}
		if depth > 1 {
			nested = true
			continue
		}
		if start < 0 || start > i {
			continue
		}
		mods := body[start : i-1]
		if !slices.Contains(mods, "static") || !(implicitPublic || slices.Contains(mods, "public")) {
			continue
		}
		close := i + 1
		for p := 0; close < len(body); close++ {
			if body[close] == "(" {
				p++
			} else if body[close] == ")" {
				if p--; p == 0 {
					break
				}
			}
		}
		if close < len(body) && isStringArrayParam(body[i+2:close]) {
			direct = true
		}
	}
	return direct, nested
}

// isStringArrayParam accepts one parameter of type String[] (String[] a,
// String a[], String... a; java.lang.String; final and annotations allowed).
func isStringArrayParam(p []string) bool {
	var rest []string
	for i := 0; i < len(p); i++ {
		switch {
		case p[i] == "@" && i+1 < len(p) && p[i+1] != "interface":
			i++ // annotation name, maybe qualified, maybe with arguments
			for i+2 < len(p) && p[i+1] == "." {
				i += 2
			}
			if i+1 < len(p) && p[i+1] == "(" {
				depth := 0
				for i++; i < len(p); i++ {
					if p[i] == "(" {
						depth++
					} else if p[i] == ")" {
						if depth--; depth == 0 {
							break
						}
					}
				}
			}
		case p[i] == "final":
		default:
			rest = append(rest, p[i])
		}
	}
	s := strings.Join(rest, " ")
	s = strings.TrimPrefix(s, "java . lang . ")
	if !strings.HasPrefix(s, "String ") {
		return false
	}
	f := strings.Fields(strings.TrimPrefix(s, "String "))
	switch {
	case len(f) == 3 && f[0] == "[" && f[1] == "]" && isIdent(f[2]):
		return true
	case len(f) == 2 && f[0] == "..." && isIdent(f[1]):
		return true
	case len(f) == 3 && isIdent(f[0]) && f[1] == "[" && f[2] == "]":
		return true
	}
	return false
}

func isIdent(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && javaIdentStart(r)
}

// javaTokens splits Java source into identifiers, keywords, numbers and
// punctuation ("..." is one token), dropping whitespace, comments and every
// literal that could contain text (strings, text blocks, chars).
func javaTokens(s string) []string {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case strings.HasPrefix(s[i:], "//"):
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case strings.HasPrefix(s[i:], "/*"):
			if end := strings.Index(s[i+2:], "*/"); end >= 0 {
				i += 2 + end + 2
			} else {
				i = len(s)
			}
		case strings.HasPrefix(s[i:], `"""`):
			i += 3
			for i < len(s) && !strings.HasPrefix(s[i:], `"""`) {
				if s[i] == '\\' {
					i++
				}
				i++
			}
			i += 3
		case c == '"' || c == '\'':
			i++
			for i < len(s) && s[i] != c && s[i] != '\n' {
				if s[i] == '\\' {
					i++
				}
				i++
			}
			i++
		case strings.HasPrefix(s[i:], "..."):
			toks = append(toks, "...")
			i += 3
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if javaIdentPart(r) {
				// An identifier (or a number): ignorable characters inside
				// it are dropped, as javac drops them from the name.
				var b strings.Builder
				j := i
				for j < len(s) {
					r, n := utf8.DecodeRuneInString(s[j:])
					if javaIgnorable(r) {
						j += n
						continue
					}
					if !javaIdentPart(r) {
						break
					}
					b.WriteString(s[j : j+n])
					j += n
				}
				toks = append(toks, b.String())
				i = j
				continue
			}
			toks = append(toks, s[i:i+n])
			i += n
		}
	}
	return toks
}
