package manifest

import (
	"fmt"
	"strings"
)

// ValidateNew is what a manifest published now must pass beyond Validate.
// Validate is also what every stored manifest is read back with, so a rule
// added later goes here, where it refuses new manifests without making one
// published before it unreadable (such a manifest keeps failing at judging
// time, as it always did).
//
// Today: no problem file may take a name its sandbox's runtime uses (see
// runtimeOwns). The engine refuses such a checker at judging time
// (CHECKER_FAILED on every job), or its compile overwrites or trips over
// the file; publishing is where the problem's author can still be told.
func (m *Manifest) ValidateNew() error {
	if err := m.Validate(); err != nil {
		return err
	}
	if sp := m.Checker.Special; sp != nil {
		role := checkerRole(m.Checker.Type)
		for i, f := range sp.Files {
			if why := runtimeOwns(sp.Language, f.Name, false); why != "" {
				return invalid(fmt.Sprintf("checker.special.files[%d].name", i),
					"%q is %s of the %s runtime the %s runs in; name the file otherwise", f.Name, why, sp.Language, role)
			}
		}
	}
	if m.Grader == nil {
		return nil
	}
	for i, gl := range m.Grader.Languages {
		for k, f := range gl.Files {
			field := fmt.Sprintf("grader.languages[%d].files[%d].name", i, k)
			if strings.Contains(f.Name, "+") {
				// The contestant's files are held to the same rule.
				return invalid(field, "%q: a grader file's name is letters, digits, '_', '.' and '-'", f.Name)
			}
			if why := runtimeOwns(gl.Language, f.Name, true); why != "" {
				return invalid(field, "%q is %s of the %s runtime the grader is built with; name the file otherwise", f.Name, why, gl.Language)
			}
		}
	}
	return nil
}

// checkerRole names what the special program of a checker type is.
func checkerRole(typ string) string {
	switch typ {
	case CheckerInteractive:
		return "interactor"
	case CheckerCommunication:
		return "manager"
	}
	return "checker"
}

// runtimeOwns says why name is a file the runtime of lang writes or reads
// in the sandbox's working directory, or "" when it is free. The
// runtimes are engine/code's (languages.go): each compiles a fixed source
// name (main.cpp, main.c, main.py, main.ets, main.js; a Java source is
// named after its class, which only its text tells) into its own outputs
// (main; Java's .class files; CPython's __pycache__; tsc's main.ts,
// kece-env.d.ts and main.js).
//
// A checker, interactor or manager is one source in a sandbox of its own:
// its extra files may take none of these names, and for Java no .java or
// .class name either (the source's file name depends on its class, so any
// .java name may be it). A grader's files are compiled with the
// contestant's source: its entry source (main.cpp, main.c, main.py) is the
// grader's own rule (grader.go) and Java graders are .java files by
// design, so only the compile's outputs are refused.
func runtimeOwns(lang, name string, grader bool) string {
	const source, output = "the source file", "a compile output"
	switch canonicalLanguage(lang) {
	case "cpp11", "cpp14", "cpp17", "cpp20":
		if name == "main.cpp" && !grader {
			return source
		}
		if name == "main" {
			return output
		}
	case "c11", "c17":
		if name == "main.c" && !grader {
			return source
		}
		if name == "main" {
			return output
		}
	case "java17":
		if strings.HasSuffix(name, ".java") && !grader {
			return "a Java source name (the source file is named after its class)"
		}
		if strings.HasSuffix(name, ".class") {
			return output
		}
	case "python3":
		if name == "main.py" && !grader {
			return source
		}
		if name == "__pycache__" {
			return output
		}
	case "arkts":
		switch name {
		case "main.ets":
			return source
		case "main.ts", "kece-env.d.ts", "main.js":
			return output
		}
	case "javascript":
		if name == "main.js" {
			return source
		}
	}
	return ""
}
