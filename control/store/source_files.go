package store

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/internal/jobdb"
	"github.com/kece-oj/kece/internal/sourcenames"
)

// MaxSourceFiles bounds a multi-file submission's further files.
const MaxSourceFiles = 16

// MaxSourceBytes bounds a multi-file submission's source and further files
// together (UTF-8 bytes of their contents), the 256 KiB the contract gives a
// source; each file is bounded by it too. Beyond it the request is refused
// with field "files" (422 REQUEST_INVALID), before the snapshot limit.
const MaxSourceBytes = 256 << 10

var sourceFileNameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// multiFileLanguages are the pools whose runtimes build several files
// (docs/engine.md, "Multi-file submissions").
var multiFileLanguages = map[string]bool{"cpp": true, "java": true, "python": true}

// checkSourceFiles validates the further files of a submission: only for
// C, C++, Java and Python; at most MaxSourceFiles of them, at most
// MaxSourceBytes together with the source; plain distinct names that are
// not the entry's own file or a name the build writes; Java files named
// <Name>.java; no name the runtime would load in place of its own (a
// Python standard-library module, a C/C++ precompiled header:
// internal/sourcenames, which the engine applies too).
func checkSourceFiles(language, source string, files []SourceFile) error {
	if files == nil {
		return nil
	}
	l, _ := contracts.LookupLanguage(language)
	if !multiFileLanguages[l.Pool] {
		return jobdb.Invalid("files", "multi-file submissions are for C, C++, Java and Python, not %s", language)
	}
	if len(files) == 0 || len(files) > MaxSourceFiles {
		return jobdb.Invalid("files", "1..%d files (omit files for a one-file submission)", MaxSourceFiles)
	}
	total := len(source)
	for _, f := range files {
		total += len(f.Content)
	}
	if total > MaxSourceBytes {
		return jobdb.Invalid("files", "source and files together are %d bytes, above the limit of %d", total, MaxSourceBytes)
	}
	seen := make(map[string]bool, len(files))
	for i, f := range files {
		field := fmt.Sprintf("files[%d].name", i)
		switch {
		case !sourceFileNameRE.MatchString(f.Name):
			return jobdb.Invalid(field, "must be a plain file name matching %s", sourceFileNameRE)
		case seen[f.Name]:
			return jobdb.Invalid(field, "duplicate file name %q", f.Name)
		case f.Name == "main" || f.Name == "main.cpp" || f.Name == "main.c" || f.Name == "main.py" || strings.HasSuffix(f.Name, ".class"):
			return jobdb.Invalid(field, "%q is the entry's file or one the build writes; the entry is source", f.Name)
		case l.Pool == "java" && !strings.HasSuffix(f.Name, ".java"):
			return jobdb.Invalid(field, "Java files are named <Class>.java")
		}
		if why := runtimeName(l.Pool, f.Name); why != "" {
			return jobdb.Invalid(field, "%s", why)
		}
		seen[f.Name] = true
	}
	return nil
}

// runtimeName says why a further file of a submission judged in pool may
// not have this name: one its runtime would load in place of its own.
func runtimeName(pool, name string) string {
	switch machineapi.Pool(pool) {
	case machineapi.PoolPython:
		return sourcenames.Python(name)
	case machineapi.PoolCpp:
		return sourcenames.C(name)
	}
	return ""
}
