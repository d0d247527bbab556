package code

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/internal/sourcenames"
)

// Multi-file submissions (docs/engine.md, "Multi-file submissions"): Source
// stays the entry and is saved as the spec says (main.cpp, main.c, main.py,
// or for Java after its own class); the further files are saved under their
// names beside it and compiled with it: C and C++ translation units after
// the entry in the compiler's argument list (headers are only included),
// every Java file with javac (the class to run is found across all files),
// every Python module syntax-checked; the run command is the spec's.

// compiledWith lists the files of a multi-file submission the compile step
// takes beside the entry, by the entry's file name.
func compiledWith(entry string, files []engine.SourceFile) []string {
	var exts []string
	switch {
	case strings.HasSuffix(entry, ".cpp"):
		exts = []string{".cpp", ".cc", ".cxx", ".c++"}
	case strings.HasSuffix(entry, ".c"):
		exts = []string{".c"}
	case strings.HasSuffix(entry, ".py"):
		exts = []string{".py"}
	case strings.HasSuffix(entry, ".java"):
		exts = []string{".java"}
	}
	var out []string
	for _, f := range files {
		if slices.ContainsFunc(exts, func(x string) bool { return strings.HasSuffix(f.Name, x) }) {
			out = append(out, f.Name)
		}
	}
	return out
}

// multiFileSpec fills a spec for a multi-file submission: the entry's file
// name and class (Java: across every file) and the compile command with the
// further compiled files after the entry's own argument. Java's class to
// run is looked for in files[runFrom:] only (a grader's classes, grader.go);
// runFrom -1 means the source and every file.
func multiFileSpec(rt engine.RuntimeSpec, src []byte, files []engine.SourceFile, runFrom int) (engine.RuntimeSpec, error) {
	if len(rt.CompileCmd) == 0 || (rt.Pool != "cpp" && rt.Pool != "java" && rt.Pool != "python") {
		return rt, engine.Infraf(engine.InfraConfig, "multi-file submissions are for C, C++, Java and Python, not %s", rt.Language)
	}
	class := ""
	if rt.Entry == engine.EntryJavaClass {
		name, run, err := javaEntryAcross(src, files, runFrom)
		if err != nil {
			return rt, err
		}
		rt.SourceFile, class = name+".java", run
	}
	for _, f := range files {
		if f.Name == rt.SourceFile {
			return rt, &entryError{fmt.Sprintf("file %s has the entry's own name: the entry is the submission's source", f.Name)}
		}
	}
	arg := rt.SourceFile
	if rt.Entry == engine.EntryJavaClass {
		arg = engine.SourcePlaceholder
	}
	more := compiledWith(rt.SourceFile, files)
	var compile []string
	for _, a := range rt.CompileCmd {
		compile = append(compile, a)
		if a == arg {
			compile = append(compile, more...)
		}
	}
	sub := strings.NewReplacer(engine.SourcePlaceholder, rt.SourceFile, engine.ClassPlaceholder, class)
	run := make([]string, len(rt.RunCmd)) // new slices: the spec's own are shared
	for i, a := range rt.RunCmd {
		run[i] = sub.Replace(a)
	}
	for i, a := range compile {
		compile[i] = sub.Replace(a)
	}
	rt.CompileCmd, rt.RunCmd = compile, run
	rt.Entry = engine.EntryFixedFile
	return rt, nil
}

// javaEntryAcross finds the class to run across the source and the further
// Java files, by the one-source rule generalised: the only public top-level
// class declaring main, else the only top-level class declaring main, else
// the one named Main. It returns the source's own file name (its public
// type, else its class with main, else its first type) and the binary name
// to run, looked for in files[runFrom:] only (-1: the source and every file).
func javaEntryAcross(src []byte, files []engine.SourceFile, runFrom int) (string, string, error) {
	type found struct {
		pkg string
		t   javaType
	}
	var mains, publicMains []found
	nested := false
	srcName := ""
	for i := -1; i < len(files); i++ {
		data := src
		if i >= 0 {
			if !strings.HasSuffix(files[i].Name, ".java") {
				continue
			}
			data = files[i].Data
		}
		sc, err := scanJava(data)
		if err != nil {
			return "", "", err
		}
		if i == -1 {
			srcName = sourceClassName(sc.types)
		}
		if i < runFrom {
			continue
		}
		nested = nested || sc.nestedMain
		for _, t := range sc.types {
			if t.hasMain {
				mains = append(mains, found{sc.pkg, t})
				if t.public {
					publicMains = append(publicMains, found{sc.pkg, t})
				}
			}
		}
	}
	if srcName == "" {
		return "", "", &entryError{"the source declares no top-level class"}
	}
	var run found
	switch {
	case len(mains) == 0:
		msg := "no runnable class: no top-level class in any file declares public static void main(String[] args)"
		if nested {
			msg += " (a main method in a nested class is not run; declare it in a top-level class)"
		}
		return "", "", &entryError{msg}
	case len(publicMains) == 1:
		run = publicMains[0]
	case len(mains) == 1:
		run = mains[0]
	default:
		i := slices.IndexFunc(mains, func(f found) bool { return f.t.name == "Main" })
		if i < 0 {
			names := make([]string, len(mains))
			for k, m := range mains {
				names[k] = m.t.name
			}
			return "", "", &entryError{fmt.Sprintf("several top-level classes declare main (%s): make the one to run the only public one", strings.Join(names, ", "))}
		}
		run = mains[i]
	}
	for _, n := range []string{srcName, run.t.name} {
		if err := checkJavaName("class name", n); err != nil {
			return "", "", err
		}
	}
	e := javaEntry{Main: run.t.name, Package: run.pkg}
	return srcName, e.Run(), nil
}

// sourceClassName names the file of a Java source: its public top-level
// type, else its top-level class declaring main, else its first type.
func sourceClassName(types []javaType) string {
	for _, pick := range []func(javaType) bool{func(t javaType) bool { return t.public }, func(t javaType) bool { return t.hasMain }, func(javaType) bool { return true }} {
		if i := slices.IndexFunc(types, pick); i >= 0 {
			return types[i].name
		}
	}
	return ""
}

// maxSourceFiles bounds a submission's further files (the control plane
// refuses more at enqueue).
const maxSourceFiles = 16

// validateFiles refuses further files the box cannot hold safely: more than
// maxSourceFiles, names that are not plain, repeated names.
func validateFiles(files []engine.SourceFile) error {
	if len(files) > maxSourceFiles {
		return engine.Infraf(engine.InfraCorruptInput, "%d source files, at most %d", len(files), maxSourceFiles)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if !ioNameRE.MatchString(f.Name) || seen[f.Name] {
			return engine.Infraf(engine.InfraCorruptInput, "source file name %q is not plain or repeats", f.Name)
		}
		seen[f.Name] = true
	}
	return nil
}

// refusedNames refuses a further file the runtime would load in place of
// its own (internal/sourcenames): a Python module named like a
// standard-library one, a C or C++ precompiled header. It is the
// contestant's CE; the control plane refuses the same names at enqueue.
func refusedNames(rt engine.RuntimeSpec, files []engine.SourceFile) error {
	for _, f := range files {
		var why string
		switch rt.Pool {
		case "python":
			why = sourcenames.Python(f.Name)
		case "cpp":
			why = sourcenames.C(f.Name)
		}
		if why != "" {
			return &entryError{"file " + why}
		}
	}
	return nil
}
