package manifest

import (
	"fmt"
	"strings"

	"github.com/kece-oj/kece/contracts"
)

// Grader is the problem's side of a function-signature task: per language,
// the grader sources and headers compiled or linked with the contestant's
// source (docs/engine.md, "Graders"). Manifests published before graders
// carry none and keep their canonical JSON.
type Grader struct {
	Languages []GraderLanguage `json:"languages"`
}

// GraderLanguage is the grader of one language id.
type GraderLanguage struct {
	Language string `json:"language"`
	// SourceName, when set, is the name the contestant's source is saved
	// under; the grader's file with the runtime's entry name (main.cpp,
	// main.c, main.py) is then what runs. Required for Python (the grader
	// imports the contestant's module), refused for Java (a class's file is
	// named after it).
	SourceName string        `json:"sourceName,omitempty"`
	Files      []CheckerFile `json:"files"`
}

// Bounds of a grader.
const (
	MaxGraderLanguages  = 16
	MaxGraderFiles      = 16
	MaxGraderTotalBytes = 16 << 20
)

// GraderEntryName is the file a language's runtime runs or compiles first
// ("" for Java, whose file is named after its class, and for languages
// without graders).
func GraderEntryName(lang string) string {
	l, ok := contracts.LookupLanguage(lang)
	if !ok {
		return ""
	}
	id := lang
	if l.AliasOf != "" {
		id = l.AliasOf
	}
	switch {
	case l.Pool == "python":
		return "main.py"
	case l.Pool == "cpp" && strings.HasPrefix(id, "cpp"):
		return "main.cpp"
	case l.Pool == "cpp":
		return "main.c"
	}
	return ""
}

// canonicalLanguage maps an alias (cpp, java, python) to the id it stands for.
func canonicalLanguage(lang string) string {
	if l, ok := contracts.LookupLanguage(lang); ok && l.AliasOf != "" {
		return l.AliasOf
	}
	return lang
}

// For returns the grader of a submission's language (an alias matches the
// id it stands for), or nil when the problem has none for it.
func (g *Grader) For(lang string) *GraderLanguage {
	if g == nil {
		return nil
	}
	for i := range g.Languages {
		if canonicalLanguage(g.Languages[i].Language) == canonicalLanguage(lang) {
			return &g.Languages[i]
		}
	}
	return nil
}

// CheckGraderLanguage refuses a submission to a grader problem in a
// language the problem has no grader for.
func CheckGraderLanguage(lang string, m Manifest) error {
	if m.Grader == nil || m.Grader.For(lang) != nil {
		return nil
	}
	var have []string
	for _, gl := range m.Grader.Languages {
		have = append(have, gl.Language)
	}
	return invalid("language", "the problem has graders for %s only, not for %s", strings.Join(have, ", "), lang)
}

// validate checks languages (known, C, C++, Java or Python, one grader per
// language), source names and files (plain unique names, bounded count and
// size, the entry file present when the roles swap).
func (g *Grader) validate() error {
	if g == nil {
		return nil
	}
	if len(g.Languages) == 0 || len(g.Languages) > MaxGraderLanguages {
		return invalid("grader.languages", "must have 1..%d languages", MaxGraderLanguages)
	}
	seen := map[string]bool{}
	for i, gl := range g.Languages {
		f := fmt.Sprintf("grader.languages[%d]", i)
		pool, err := PoolForLanguage(gl.Language)
		if err != nil || (pool != "cpp" && pool != "java" && pool != "python") {
			return invalid(f+".language", "graders are for C, C++, Java and Python language ids, got %q", gl.Language)
		}
		if seen[canonicalLanguage(gl.Language)] {
			return invalid(f+".language", "a second grader for %s", canonicalLanguage(gl.Language))
		}
		seen[canonicalLanguage(gl.Language)] = true
		if err := gl.validate(f, pool); err != nil {
			return err
		}
	}
	return nil
}

func (gl *GraderLanguage) validate(f, pool string) error {
	if len(gl.Files) == 0 || len(gl.Files) > MaxGraderFiles {
		return invalid(f+".files", "must have 1..%d files", MaxGraderFiles)
	}
	entry := GraderEntryName(gl.Language)
	names := map[string]bool{}
	var total int64
	for i, file := range gl.Files {
		ff := fmt.Sprintf("%s.files[%d]", f, i)
		if !checkerFileRE.MatchString(file.Name) {
			return invalid(ff+".name", "must be a plain file name matching %s", checkerFileRE)
		}
		if names[file.Name] {
			return invalid(ff+".name", "duplicate file name %q", file.Name)
		}
		names[file.Name] = true
		if !ValidDigest(file.Sha256) {
			return invalid(ff+".sha256", "must be 64 lowercase hex")
		}
		if file.Size < 0 || file.Size > MaxCheckerFileBytes {
			return invalid(ff+".size", "must be 0..%d", MaxCheckerFileBytes)
		}
		total += file.Size
	}
	if total > MaxGraderTotalBytes {
		return invalid(f+".files", "%d bytes in all, at most %d", total, MaxGraderTotalBytes)
	}
	switch {
	case pool == "java" && gl.SourceName != "":
		return invalid(f+".sourceName", "not for Java: the contestant's file is named after its class")
	case pool == "python" && gl.SourceName == "":
		return invalid(f+".sourceName", "required for Python: the module name the grader imports, e.g. solution.py")
	case gl.SourceName == "":
		if names[entry] {
			return invalid(f+".files", "%s is the contestant's file; name the grader's file otherwise, or set sourceName", entry)
		}
		return nil
	}
	ext := entry[strings.LastIndex(entry, "."):]
	if !checkerFileRE.MatchString(gl.SourceName) || !strings.HasSuffix(gl.SourceName, ext) || gl.SourceName == entry || names[gl.SourceName] {
		return invalid(f+".sourceName", "must be a plain file name ending in %s, not %s and not a grader file's name", ext, entry)
	}
	if !names[entry] {
		return invalid(f+".files", "with sourceName, the grader's entry %s is one of its files", entry)
	}
	return nil
}
