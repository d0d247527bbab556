package worker

import (
	"os"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/engine"
)

// canonicalLanguage maps an alias (cpp, java, python) to the id it stands for.
func canonicalLanguage(lang string) string {
	if l, ok := contracts.LookupLanguage(lang); ok && l.AliasOf != "" {
		return l.AliasOf
	}
	return lang
}

// graderOf fetches the grader files of the job's language (docs/engine.md,
// "Graders"); nil when the manifest has no grader. A grader manifest without
// one for the language was refused at enqueue, so meeting one here is
// corrupt input.
func (n *Node) graderOf(g *machineapi.Grader, lang machineapi.Language, get func(string, int64) (string, error)) (*engine.Grader, error) {
	if g == nil {
		return nil, nil
	}
	for _, gl := range g.Languages {
		if canonicalLanguage(string(gl.Language)) != canonicalLanguage(string(lang)) {
			continue
		}
		out := &engine.Grader{}
		if gl.SourceName != nil {
			out.SourceName = *gl.SourceName
		}
		for _, f := range gl.Files {
			path, err := get(f.Sha256, f.Size)
			if err != nil {
				return nil, err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return nil, engine.Infraf(engine.InfraInternal, "grader file %s: %w", f.Name, err)
			}
			out.Files = append(out.Files, engine.SourceFile{Name: f.Name, Data: data})
		}
		return out, nil
	}
	return nil, engine.Infraf(engine.InfraCorruptInput, "the manifest has no grader for %s", lang)
}
