package structure

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The rules, as CONTRIBUTING.md ("Name and place") states them.
const (
	maxFileLines     = 700
	maxFuncLines     = 100
	maxExportedMeths = 25
)

// ruled are the trees the size rules apply to (engine/ since its re-cut
// into a sandbox driver, a compile step and a plan per problem type).
var ruled = []string{"control", "worker", "artifact", "cmd", "engine"}

// ruleTables are the functions allowed past maxFuncLines: each is one
// table of rules, one entry after another, that reads best whole.
var ruleTables = map[string]string{
	"control/store.(*Store).ReconcileWith": "reconcile's invariants, one query and message per rule",
	"worker.newPromMetrics":                "the node's metric families, one definition per metric",
	"engine/code.rawLanguage":              "the language table, one spec per language id",
}

var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

type goFile struct {
	path string // relative to the module root
	pkg  string // directory, relative to the module root
	src  []byte
	ast  *ast.File
	fset *token.FileSet
}

// handWritten parses every non-test, non-generated Go file under dirs.
func handWritten(t *testing.T, root string, dirs []string) []goFile {
	t.Helper()
	return parseTree(t, root, dirs, func(path string, src []byte) bool {
		return !strings.HasSuffix(path, "_test.go") && !generated.Match(src)
	})
}

// testFiles parses every _test.go file under dirs, with comments.
func testFiles(t *testing.T, root string, dirs []string) []goFile {
	t.Helper()
	return parseTree(t, root, dirs, func(path string, _ []byte) bool { return strings.HasSuffix(path, "_test.go") })
}

// parseTree parses the Go files under dirs that keep accepts (testdata and
// node_modules left out), named relative to root.
func parseTree(t *testing.T, root string, dirs []string, keep func(path string, src []byte) bool) []goFile {
	t.Helper()
	var files []goFile
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil || !keep(path, src) {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, rel, src, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			files = append(files, goFile{path: rel, pkg: filepath.Dir(rel), src: src, ast: f, fset: fset})
			return nil
		})
		if err != nil {
			t.Fatalf("reading %s: %v", dir, err)
		}
	}
	return files
}

// repo reads dirs of this repository with walk, and fails when that finds
// too few files to be the real tree.
func repo(t *testing.T, walk func(*testing.T, string, []string) []goFile, dirs []string) []goFile {
	t.Helper()
	files := walk(t, moduleRoot(t), dirs)
	if len(files) < 50 {
		t.Fatalf("%d Go files under %v: the walk is wrong", len(files), dirs)
	}
	return files
}

// moduleRoot is two directories up from this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found from %s: %v", root, err)
	}
	return root
}

// funcName is pkg.Func or pkg.(*T).Method, as ruleTables keys them.
func funcName(pkg string, fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return pkg + "." + fn.Name.Name
	}
	return pkg + ".(" + typeExpr(fn.Recv.List[0].Type) + ")." + fn.Name.Name
}

func typeExpr(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return "*" + typeExpr(e.X)
	case *ast.IndexExpr:
		return typeExpr(e.X)
	case *ast.IndexListExpr:
		return typeExpr(e.X)
	case *ast.Ident:
		return e.Name
	}
	return fmt.Sprintf("%T", e)
}

func TestFilesAndFunctionsStayShort(t *testing.T) {
	report(t, sizeProblems(repo(t, handWritten, ruled), ruleTables))
}

// sizeProblems lists files over maxFileLines and functions over
// maxFuncLines that tables does not name, and entries of tables that name
// no long function.
func sizeProblems(files []goFile, tables map[string]string) []string {
	var problems []string
	longTables := map[string]bool{}
	for _, f := range files {
		if n := lineCount(f.src); n > maxFileLines {
			problems = append(problems, fmt.Sprintf("%s: %d lines (at most %d: split it by concern)", f.path, n, maxFileLines))
		}
		for _, d := range f.ast.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			lines := f.fset.Position(fn.End()).Line - f.fset.Position(fn.Pos()).Line + 1
			name := funcName(f.pkg, fn)
			if lines <= maxFuncLines {
				continue
			}
			if _, ok := tables[name]; ok {
				longTables[name] = true
				continue
			}
			problems = append(problems, fmt.Sprintf("%s: %s is %d lines (at most %d unless it is a rule table listed in ruleTables)",
				f.fset.Position(fn.Pos()), name, lines, maxFuncLines))
		}
	}
	for name := range tables {
		if !longTables[name] {
			problems = append(problems, fmt.Sprintf("ruleTables lists %s, which is gone or no longer over %d lines: remove the entry", name, maxFuncLines))
		}
	}
	return problems
}

func TestTypesKeepFewExportedMethods(t *testing.T) {
	report(t, methodProblems(repo(t, handWritten, ruled)))
}

// methodProblems lists types with more than maxExportedMeths exported
// methods. No type is allowed more: split it by aggregate.
func methodProblems(files []goFile) []string {
	methods := map[string]int{}
	for _, f := range files {
		for _, d := range f.ast.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) == 0 || !fn.Name.IsExported() {
				continue
			}
			methods[f.pkg+"."+strings.TrimPrefix(typeExpr(fn.Recv.List[0].Type), "*")]++
		}
	}
	var problems []string
	for typ, n := range methods {
		if n > maxExportedMeths {
			problems = append(problems, fmt.Sprintf("%s has %d exported methods (at most %d: split it by aggregate)", typ, n, maxExportedMeths))
		}
	}
	return problems
}

// TestEveryConfigValidates: a Config struct of a ruled package, or of
// engine/, has a Validate method, which reports every problem at once
// (each package's own test checks that).
func TestEveryConfigValidates(t *testing.T) {
	report(t, configProblems(repo(t, handWritten, append([]string{"engine"}, ruled...))))
}

// configProblems lists Config structs whose package declares no
// (Config).Validate.
func configProblems(files []goFile) []string {
	configs := map[string]string{}
	validates := map[string]bool{}
	for _, f := range files {
		for _, d := range f.ast.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == "Config" {
						if _, isStruct := ts.Type.(*ast.StructType); isStruct {
							configs[f.pkg] = f.fset.Position(ts.Pos()).String()
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && len(d.Recv.List) > 0 && d.Name.Name == "Validate" &&
					strings.TrimPrefix(typeExpr(d.Recv.List[0].Type), "*") == "Config" {
					validates[f.pkg] = true
				}
			}
		}
	}
	var problems []string
	for pkg, pos := range configs {
		if !validates[pkg] {
			problems = append(problems, fmt.Sprintf("%s: %s.Config has no Validate method", pos, pkg))
		}
	}
	return problems
}

func lineCount(src []byte) int {
	n := strings.Count(string(src), "\n")
	if len(src) > 0 && src[len(src)-1] != '\n' {
		n++
	}
	return n
}

func report(t *testing.T, problems []string) {
	t.Helper()
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// TestRulesCatchWhatTheyName runs the checks over a small tree built to
// break each rule once, so a check that stopped finding anything fails
// here rather than passing on the real tree.
func TestRulesCatchWhatTheyName(t *testing.T) {
	root := t.TempDir()
	write := func(path, src string) {
		t.Helper()
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	long := "package a\n\nfunc Long() {\n" + strings.Repeat("\t_ = 1\n", maxFuncLines) + "}\n"
	write("ruled/a/long.go", long)
	write("ruled/a/table.go", strings.Replace(long, "Long", "Table", 1))
	write("ruled/a/big.go", "package a\n"+strings.Repeat("\n", maxFileLines))
	write("ruled/a/gen.go", "// Code generated by x. DO NOT EDIT.\n\npackage a\n"+strings.Repeat("\n", maxFileLines))
	write("ruled/a/long_test.go", "package a\n"+strings.Repeat("\n", maxFileLines))
	var meths strings.Builder
	meths.WriteString("package a\n\ntype Wide struct{}\n\ntype Config struct{}\n")
	for i := 0; i <= maxExportedMeths; i++ {
		fmt.Fprintf(&meths, "func (Wide) M%d() {}\n", i)
	}
	write("ruled/a/wide.go", meths.String())
	write("ruled/b/config.go", "package b\n\ntype Config struct{}\n\nfunc (c *Config) Validate() error { return nil }\n")
	for i := 0; i < 10; i++ {
		write(fmt.Sprintf("ruled/b/f%d.go", i), "package b\n")
	}

	files := handWritten(t, root, []string{"ruled"})
	want := func(problems []string, n int, parts ...string) {
		t.Helper()
		if len(problems) != n {
			t.Errorf("got %d problems, want %d: %q", len(problems), n, problems)
		}
		for _, part := range parts {
			if !strings.Contains(strings.Join(problems, "\n"), part) {
				t.Errorf("no problem names %q: %q", part, problems)
			}
		}
	}
	want(sizeProblems(files, map[string]string{"ruled/a.Table": "x", "ruled/a.Gone": "x"}), 3,
		"ruled/a/big.go: 701 lines", "ruled/a/long.go:3:1: ruled/a.Long is 102 lines", "ruleTables lists ruled/a.Gone")
	want(methodProblems(files), 1, "ruled/a.Wide has 26 exported methods")
	want(configProblems(files), 1, "ruled/a.Config has no Validate method")

	write("ruled/c/sleep_test.go", `package c

import "time"

func waits() {
	time.Sleep(time.Millisecond)
	// a measured window
	time.Sleep(time.Second)
	time.Sleep(time.Second) // a pace
}
`)
	want(sleepProblems(testFiles(t, root, []string{"ruled"})), 1, "ruled/c/sleep_test.go:6:2: time.Sleep with no comment")
}

// TestTestSleepsSayWhy: tests wait on signals, not on time.Sleep
// (CONTRIBUTING.md). A sleep that stays is a measured window, a pace, a
// poll interval or the time under test passing, and says which in a
// comment on its line or the line above, so a sleep that waits for another
// goroutine cannot slip in unremarked.
func TestTestSleepsSayWhy(t *testing.T) {
	report(t, sleepProblems(repo(t, testFiles, append([]string{"engine", "internal", "deploy", "contracts"}, ruled...))))
}

// sleepProblems lists time.Sleep calls with no comment on their line or
// the line before.
func sleepProblems(files []goFile) []string {
	var problems []string
	for _, f := range files {
		commented := map[int]bool{}
		for _, g := range f.ast.Comments {
			commented[f.fset.Position(g.End()).Line] = true
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Sleep" {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "time" {
				return true
			}
			pos := f.fset.Position(call.Pos())
			if !commented[pos.Line] && !commented[pos.Line-1] {
				problems = append(problems, fmt.Sprintf("%s: time.Sleep with no comment saying why (a window, a pace, a poll interval): wait on a signal instead, or say which", pos))
			}
			return true
		})
	}
	return problems
}
