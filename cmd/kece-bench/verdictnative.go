package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kece-oj/kece/cmd/internal/problems"
	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code"
	"github.com/kece-oj/kece/engine/code/checker"
)

// The native side of `kece-bench verdict`: the same compile and run
// commands the node runs in its sandbox (the engine's language table),
// executed directly on this host with the same inputs, and the same
// checker logic (the engine's tolerant comparison and testlib protocol;
// the special checker and the interactor compiled natively per
// submission, as the node compiles them per job today). No Docker, no
// control plane, no limits beyond a generous time-out.

// verdictTools are the host programs each language's native baseline runs.
var verdictTools = map[string][]string{
	"c17": {"gcc"}, "cpp17": {"g++"}, "java17": {"javac", "java"}, "python3": {"python3"},
	"javascript": {"node"}, "arkts": {"tsc", "node"},
}

// toolPackage is the Debian package that installs each tool
// (scripts/bench-verdict.sh installs them).
var toolPackage = map[string]string{
	"gcc": "gcc", "g++": "g++", "javac": "default-jdk-headless", "java": "default-jdk-headless",
	"python3": "python3", "node": "nodejs", "tsc": "node-typescript",
}

// Native run bounds: nothing here limits the programs, these only stop a
// run that hangs (a broken interaction) from hanging the benchmark.
const (
	nativeRunTimeout = 20 * time.Second
	nativeMemoryMB   = "256" // the problems' memory limit, as the node fills {memory_mb}
)

// nativeHost judges submissions natively.
type nativeHost struct {
	root    string
	cases   []problems.Case
	header  string
	specs   map[string]engine.RuntimeSpec // language → resolved commands
	checker engine.RuntimeSpec            // the checker's and the interactor's
	tools   map[string]string             // tool → path it resolved to
}

// newNativeHost checks the host has every tool the languages and kinds
// need (naming the packages of the missing ones), resolves the commands
// and writes the cases to disk.
func newNativeHost(ctx context.Context, languages, kinds []string, cases []problems.Case, header string) (*nativeHost, error) {
	need := []string{}
	for _, l := range languages {
		need = append(need, verdictTools[l]...)
	}
	if slices.Contains(kinds, kindTestlib) || slices.Contains(kinds, kindInteractive) {
		need = append(need, "g++")
	}
	slices.Sort(need)
	need = slices.Compact(need)
	h := &nativeHost{cases: cases, header: header, specs: map[string]engine.RuntimeSpec{}, tools: map[string]string{}}
	if err := h.findTools(ctx, need); err != nil {
		return nil, err
	}
	for _, l := range append(slices.Clone(languages), checkerLanguage) {
		rt, err := code.RuntimeForLanguage(l)
		if err != nil {
			return nil, err
		}
		h.specs[l] = h.resolve(rt)
	}
	h.checker = h.specs[checkerLanguage]
	var err error
	if h.root, err = os.MkdirTemp("", "kece-bench-verdict-"); err != nil {
		return nil, err
	}
	for i, c := range cases {
		if err := os.WriteFile(h.casePath(i, "in"), []byte(c.In), 0o644); err != nil {
			h.close()
			return nil, err
		}
		if err := os.WriteFile(h.casePath(i, "ans"), []byte(c.Out), 0o644); err != nil {
			h.close()
			return nil, err
		}
	}
	return h, nil
}

// missingToolsError names the missing tools and the Debian packages that
// install them.
func missingToolsError(missing []string) error {
	var pkgs, named []string
	for _, t := range missing {
		named = append(named, fmt.Sprintf("%s (Debian package %s)", t, toolPackage[t]))
		pkgs = append(pkgs, toolPackage[t])
	}
	slices.Sort(pkgs)
	pkgs = slices.Compact(pkgs)
	return fmt.Errorf("the native baseline needs host tools that are missing: %s; install them with `apt-get install -y %s`, or run scripts/bench-verdict.sh, which installs them and runs this benchmark",
		strings.Join(named, ", "), strings.Join(pkgs, " "))
}

// findTools resolves each tool on PATH. A python3 that is a shell shim
// (pyenv) is resolved to the interpreter it starts, so the baseline does not
// pay a shell per run that the sandbox does not.
func (h *nativeHost) findTools(ctx context.Context, need []string) error {
	var missing []string
	for _, t := range need {
		p, err := exec.LookPath(t)
		if err != nil {
			missing = append(missing, t)
			continue
		}
		h.tools[t] = p
	}
	if len(missing) > 0 {
		return missingToolsError(missing)
	}
	if p, ok := h.tools["python3"]; ok {
		out, err := exec.CommandContext(ctx, p, "-c", "import sys; print(sys.executable)").Output()
		if err != nil {
			return fmt.Errorf("python3 on this host does not start: %w", err)
		}
		if exe := strings.TrimSpace(string(out)); exe != "" {
			h.tools["python3"] = exe
		}
	}
	return nil
}

// toolList is the tools and their paths, for the header line.
func (h *nativeHost) toolList() string {
	var out []string
	for _, t := range slices.Sorted(maps.Keys(h.tools)) {
		out = append(out, t+":"+h.tools[t])
	}
	return strings.Join(out, ",")
}

// resolve fills the placeholders of a language's commands as the node
// does for the benchmark's programs (the Java class is Main) and points
// python3 at the interpreter findTools resolved.
func (h *nativeHost) resolve(rt engine.RuntimeSpec) engine.RuntimeSpec {
	class := ""
	if rt.Entry == engine.EntryJavaClass {
		rt.SourceFile, class = "Main.java", "Main"
	}
	sub := strings.NewReplacer(engine.SourcePlaceholder, rt.SourceFile, engine.ClassPlaceholder, class, code.MemoryPlaceholder, nativeMemoryMB)
	fill := func(cmd []string) []string {
		out := make([]string, len(cmd))
		for i, a := range cmd {
			out[i] = sub.Replace(a)
		}
		if len(out) > 0 && out[0] == "python3" && h.tools["python3"] != "" {
			out[0] = h.tools["python3"]
		}
		return out
	}
	rt.CompileCmd, rt.RunCmd = fill(rt.CompileCmd), fill(rt.RunCmd)
	return rt
}

func (h *nativeHost) casePath(i int, ext string) string {
	return filepath.Join(h.root, "case"+strconv.Itoa(i)+"."+ext)
}

func (h *nativeHost) close() {
	if h.root != "" {
		_ = os.RemoveAll(h.root)
	}
}

// judge judges the language's a+b program on the kind's problem natively:
// write the source, compile it (and the checker or interactor), run every
// case and check it. The time ends when the last case is checked.
func (h *nativeHost) judge(ctx context.Context, lang, kind string) (verdictSample, error) {
	start := time.Now()
	dir, err := os.MkdirTemp(h.root, lang+"-")
	if err != nil {
		return verdictSample{}, err
	}
	defer os.RemoveAll(dir)
	status, err := h.judgeIn(ctx, dir, lang, kind)
	if err != nil {
		return verdictSample{}, err
	}
	return verdictSample{ms: ms(time.Since(start)), ok: status == "AC", status: status}, nil
}

// judgeIn is judge in a fresh directory: the status, or a host failure.
func (h *nativeHost) judgeIn(ctx context.Context, dir, lang, kind string) (string, error) {
	spec := h.specs[lang]
	src, _ := problems.SumProgram(lang)
	if ok, err := h.compile(ctx, dir, spec, src, nil); err != nil || !ok {
		return "CE", err
	}
	cdir := filepath.Join(dir, "checker")
	switch kind {
	case kindTestlib:
		if ok, err := h.compile(ctx, cdir, h.checker, problems.SumChecker, map[string]string{"testlib.h": h.header}); err != nil || !ok {
			return "CHECKER_CE", err
		}
	case kindInteractive:
		if ok, err := h.compile(ctx, cdir, h.checker, problems.SumInteractor, nil); err != nil || !ok {
			return "CHECKER_CE", err
		}
	}
	for i := range h.cases {
		var status string
		var err error
		if kind == kindInteractive {
			status, err = h.interact(ctx, dir, cdir, spec, i)
		} else {
			status, err = h.runAndCheck(ctx, dir, cdir, spec, kind, i)
		}
		if err != nil || status != "AC" {
			return status, err
		}
	}
	return "AC", nil
}

// compile writes a program's source (and extra files) into dir and runs
// the spec's compile command there; false is a compile error.
func (h *nativeHost) compile(ctx context.Context, dir string, spec engine.RuntimeSpec, src string, files map[string]string) (bool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	all := map[string]string{spec.SourceFile: src}
	maps.Copy(all, files)
	for name, content := range all {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return false, err
		}
	}
	if len(spec.CompileCmd) == 0 {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, spec.CompileWallTime)
	defer cancel()
	cmd := nativeCommand(ctx, dir, spec.CompileCmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return false, nil
		}
		return false, fmt.Errorf("native compile %v: %w: %s", spec.CompileCmd, err, out)
	}
	return true, nil
}

// nativeCommand is argv run in dir; a relative program path (./main) is taken in
// dir.
func nativeCommand(ctx context.Context, dir string, argv []string) *exec.Cmd {
	prog := argv[0]
	if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
		prog = filepath.Join(dir, prog)
	}
	cmd := exec.CommandContext(ctx, prog, argv[1:]...)
	cmd.Dir = dir
	return cmd
}

// runAndCheck runs case i with its input on stdin and stdout to a file,
// then checks the output: the tolerant comparison, or the special checker
// under testlib's protocol.
func (h *nativeHost) runAndCheck(ctx context.Context, dir, cdir string, spec engine.RuntimeSpec, kind string, i int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, nativeRunTimeout)
	defer cancel()
	in, err := os.Open(h.casePath(i, "in"))
	if err != nil {
		return "", err
	}
	defer in.Close()
	outPath := filepath.Join(dir, "out"+strconv.Itoa(i))
	out, err := os.Create(outPath)
	if err != nil {
		return "", err
	}
	cmd := nativeCommand(ctx, dir, spec.RunCmd)
	cmd.Stdin, cmd.Stdout = in, out
	runErr := cmd.Run()
	out.Close()
	if runErr != nil {
		return "RE", nil
	}
	if kind == kindTolerant {
		got, err := os.ReadFile(outPath)
		if err != nil {
			return "", err
		}
		if ok, _ := checker.Tolerant([]byte(h.cases[i].Out), got); !ok {
			return "WA", nil
		}
		return "AC", nil
	}
	argv := append(slices.Clone(h.checker.RunCmd), h.casePath(i, "in"), outPath, h.casePath(i, "ans"))
	ck := nativeCommand(ctx, cdir, argv)
	var stderr bytes.Buffer
	ck.Stderr = &stderr
	return testlibStatus(ck.Run(), stderr.String())
}

// testlibStatus reads a checker's or interactor's end under testlib's
// protocol, as the engine does.
func testlibStatus(runErr error, stderr string) (string, error) {
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(runErr, &ee) && ee.Exited():
		code = ee.ExitCode()
	case runErr != nil:
		return "CHECKER_FAILED", nil
	}
	o, err := checker.Interpret(engine.ProtocolTestlib, checker.Run{ExitCode: code, Stderr: stderr}, 1)
	if err != nil || o.Fraction != 1 {
		return "WA", nil
	}
	return "AC", nil
}

// interact runs case i with the program and the interactor joined by two
// pipes (the interactor's stdout is the program's stdin and the reverse),
// the interactor called `input tout answer`.
func (h *nativeHost) interact(ctx context.Context, dir, cdir string, spec engine.RuntimeSpec, i int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, nativeRunTimeout)
	defer cancel()
	toProg, fromInter, err := os.Pipe()
	if err != nil {
		return "", err
	}
	fromProg, toInter, err := os.Pipe()
	if err != nil {
		toProg.Close()
		fromInter.Close()
		return "", err
	}
	prog := nativeCommand(ctx, dir, spec.RunCmd)
	prog.Stdin, prog.Stdout = toProg, toInter
	argv := append(slices.Clone(h.checker.RunCmd), h.casePath(i, "in"), filepath.Join(cdir, "tout"+strconv.Itoa(i)), h.casePath(i, "ans"))
	inter := nativeCommand(ctx, cdir, argv)
	var stderr bytes.Buffer
	inter.Stdin, inter.Stdout, inter.Stderr = fromProg, fromInter, &stderr
	progErr := prog.Start()
	interErr := inter.Start()
	// The children hold their ends now; ours would keep the other side
	// from ever seeing an end of file.
	for _, f := range []*os.File{toProg, fromInter, fromProg, toInter} {
		f.Close()
	}
	if progErr == nil {
		progErr = prog.Wait()
	}
	if interErr == nil {
		interErr = inter.Wait()
	}
	status, err := testlibStatus(interErr, stderr.String())
	if err == nil && status == "AC" && progErr != nil {
		status = "RE"
	}
	return status, err
}
