package code

import (
	"fmt"
	"slices"

	"github.com/kece-oj/kece/engine"
)

// Graders (docs/engine.md, "Graders"): the problem's grader files join the
// submission's files and the multi-file rule builds them (multifile.go), so
// there is one mechanism: C/C++ units after the entry in the compiler's
// arguments and headers beside them, every Java file to javac with the class
// to run found across the files, every Python module syntax-checked. With a
// SourceName the roles swap: the grader's file with the runtime's entry name
// (main.py) is the entry and the contestant's source is saved under
// SourceName, where the grader imports it. The grader's stdout is the
// output the checker judges.

// withGrader returns the task with its grader folded into Source and Files.
// A contestant's file that takes a grader file's name is the contestant's
// CE; a grader that does not fit its runtime is the problem's fault.
func withGrader(t engine.Task) (engine.Task, error) {
	g := t.Grader
	if g == nil {
		return t, nil
	}
	if len(g.Files) == 0 {
		return t, engine.Infraf(engine.InfraConfig, "grader has no files")
	}
	if err := validateFiles(g.Files); err != nil {
		return t, engine.Infraf(engine.InfraConfig, "grader: %v", err)
	}
	isGraders := func(name string) bool {
		return slices.ContainsFunc(g.Files, func(f engine.SourceFile) bool { return f.Name == name })
	}
	for _, f := range t.Files {
		if isGraders(f.Name) || f.Name == g.SourceName {
			return t, &entryError{fmt.Sprintf("file %s has the name of one of the problem's grader files or of the solution's own file", f.Name)}
		}
	}
	files := slices.Clone(t.Files)
	if g.SourceName == "" {
		t.Files = append(files, g.Files...)
		return t, nil
	}
	if t.Runtime.Entry != engine.EntryFixedFile || isGraders(g.SourceName) || g.SourceName == t.Runtime.SourceFile {
		return t, engine.Infraf(engine.InfraConfig, "grader source name %q does not fit %s (not for Java; not the entry's or a grader file's name)", g.SourceName, t.Runtime.Language)
	}
	i := slices.IndexFunc(g.Files, func(f engine.SourceFile) bool { return f.Name == t.Runtime.SourceFile })
	if i < 0 {
		return t, engine.Infraf(engine.InfraConfig, "grader with a source name needs a file named %s, the %s entry", t.Runtime.SourceFile, t.Runtime.Language)
	}
	files = append(files, engine.SourceFile{Name: g.SourceName, Data: t.Source})
	for k, f := range g.Files {
		if k != i {
			files = append(files, f)
		}
	}
	t.Source, t.Files = g.Files[i].Data, files
	return t, nil
}
