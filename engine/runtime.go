package engine

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// EntryKind says how a runtime finds the file name and the entry point of a
// source. It is part of the spec so that the executor keeps one flow for every
// code runtime.
type EntryKind string

// Entry point rules.
const (
	// EntryFixedFile (the zero value) writes every source to SourceFile and
	// runs the spec's commands as they are.
	EntryFixedFile EntryKind = ""
	// EntryJavaClass derives the file name and the class to run from the
	// source: the file is named after the top-level public type (or, without
	// one, the top-level class declaring public static void main(String[])),
	// and ClassPlaceholder is the binary name of the class holding main,
	// qualified by the package when one is declared. SourceFile stays empty.
	EntryJavaClass EntryKind = "java-class"
)

// Placeholders a compile or run command may contain; the executor replaces
// them once the entry point of a source is known.
const (
	// SourcePlaceholder is the file name the source was written to.
	SourcePlaceholder = "{source}"
	// ClassPlaceholder is the class to run (EntryJavaClass only).
	ClassPlaceholder = "{class}"
)

// RuntimeSpec is the validated description of one code runtime for one
// language id. The four code pools share one executor flow and differ only by
// their spec.
type RuntimeSpec struct {
	Pool string // cpp, java, python, arkts
	// Language is the accepted language id this spec judges (cpp20, java17…);
	// empty for an operator-supplied spec that names no id.
	Language string
	// Standard says which language standard or version the id means, e.g.
	// "C++20 (GNU dialect, g++ -std=gnu++20)".
	Standard string
	// Image is the sandbox image. Operators pin it by digest
	// (repo@sha256:…); local images built by deploy/images/build-local.sh are
	// referenced by their tag, which carries the recipe hash.
	Image string
	// Entry is the entry point rule; SourceFile is the file name the source
	// is written to under EntryFixedFile (e.g. main.cpp) and empty otherwise.
	Entry      EntryKind
	SourceFile string
	CompileCmd []string // empty: interpreted runtime (still syntax-checked if given)
	RunCmd     []string
	// CompileTime (CPU), CompileWallTime and CompileMemoryBytes bound the
	// compile step. The wall limit stays close to the CPU limit so a runaway
	// compiler holds a slot for seconds, not minutes.
	CompileTime        time.Duration
	CompileWallTime    time.Duration
	CompileMemoryBytes int64
	// ExtraMemoryBytes is added to the user's memory limit (JVM overhead).
	ExtraMemoryBytes int64
	// MinMemoryBytes is the smallest memory limit the runtime starts under
	// (the JVM's smallest heap, an interpreter's own footprint); the control
	// plane refuses lower limits for this language at enqueue.
	MinMemoryBytes int64
	// VersionProbe prints the runtime version, reported in heartbeats.
	VersionProbe []string
	// AddressSpaceExtraBytes, when positive, sets a per-run RLIMIT_AS of the
	// memory limit + ExtraMemoryBytes + this. Zero leaves RLIMIT_AS off, for
	// VMs that reserve large virtual ranges (JVM, V8); they are held by the
	// container memory limit and judged by peak RSS.
	AddressSpaceExtraBytes int64
	// MemoryErrorMarkers: a failing run whose stderr or head of stdout has a
	// line containing one of these (std::bad_alloc, MemoryError,
	// java.lang.OutOfMemoryError, a JVM that cannot reserve its heap) is an
	// MLE, unless that line also contains one of MemoryErrorExceptions (the
	// JVM reports a thread limit as "OutOfMemoryError: unable to create
	// native thread", which is no memory verdict).
	MemoryErrorMarkers    []string
	MemoryErrorExceptions []string
}

var (
	sourceFileRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)
	languageRE   = regexp.MustCompile(`^[a-z][a-z0-9+._-]{0,31}$`)
)

// Validate refuses incomplete or unsafe specs.
func (r RuntimeSpec) Validate() error {
	switch r.Pool {
	case "cpp", "java", "python", "arkts":
	default:
		return fmt.Errorf("runtime spec: unknown code pool %q (want cpp, java, python or arkts)", r.Pool)
	}
	name := r.Pool
	if r.Language != "" {
		if !languageRE.MatchString(r.Language) {
			return fmt.Errorf("runtime spec %s: language id %q is not of the form %s", r.Pool, r.Language, languageRE)
		}
		name = r.Language
	}
	if strings.TrimSpace(r.Image) == "" {
		return fmt.Errorf("runtime spec %s: image is empty", name)
	}
	switch r.Entry {
	case EntryFixedFile:
		if !sourceFileRE.MatchString(r.SourceFile) {
			return fmt.Errorf("runtime spec %s: source file %q is not a plain file name", name, r.SourceFile)
		}
	case EntryJavaClass:
		if r.SourceFile != "" {
			return fmt.Errorf("runtime spec %s: the %s entry rule derives the source file; leave it empty (got %q)", name, r.Entry, r.SourceFile)
		}
	default:
		return fmt.Errorf("runtime spec %s: unknown entry rule %q (want %q or %q)", name, r.Entry, EntryFixedFile, EntryJavaClass)
	}
	if len(r.RunCmd) == 0 {
		return fmt.Errorf("runtime spec %s: run command is empty", name)
	}
	if r.Entry != EntryJavaClass && (slices.ContainsFunc(r.RunCmd, hasClass) || slices.ContainsFunc(r.CompileCmd, hasClass)) {
		return fmt.Errorf("runtime spec %s: %s is only known under the %s entry rule", name, ClassPlaceholder, EntryJavaClass)
	}
	if len(r.CompileCmd) > 0 && (r.CompileTime <= 0 || r.CompileMemoryBytes <= 0) {
		return fmt.Errorf("runtime spec %s: compile time and memory limits must be positive", name)
	}
	if r.CompileWallTime < 0 || (r.CompileWallTime > 0 && r.CompileWallTime < r.CompileTime) {
		return fmt.Errorf("runtime spec %s: compile wall limit %s must not be below the CPU limit %s", name, r.CompileWallTime, r.CompileTime)
	}
	if r.ExtraMemoryBytes < 0 || r.AddressSpaceExtraBytes < 0 || r.MinMemoryBytes < 0 {
		return fmt.Errorf("runtime spec %s: extra and minimum memory must not be negative", name)
	}
	return nil
}

func hasClass(arg string) bool { return strings.Contains(arg, ClassPlaceholder) }

// CompileWall is the compile wall limit: CompileWallTime, or the CPU limit
// plus CompileWallSlackDefault when it is not set.
func (r RuntimeSpec) CompileWall() time.Duration {
	if r.CompileWallTime > 0 {
		return r.CompileWallTime
	}
	return r.CompileTime + CompileWallSlackDefault
}

// CompileWallSlackDefault is what a compile may wait beyond its CPU limit
// (I/O, a loaded host) when the spec sets no wall limit of its own.
const CompileWallSlackDefault = 5 * time.Second

// EntryRule states the spec's file-name and entry-point rule in words, for
// language listings and documentation.
func (r RuntimeSpec) EntryRule() string {
	switch r.Entry {
	case EntryJavaClass:
		return "saved as <Name>.java after the top-level public class (without one: the top-level class declaring " +
			"public static void main(String[])); the top-level class declaring that main is run, by its package-qualified " +
			"name when the source declares a package; no such class is a compile error"
	default:
		return "saved as " + r.SourceFile
	}
}

// SQLKind is the kind of a SQL problem.
type SQLKind string

// SQL problem kinds.
const (
	SQLKindSelect SQLKind = "SELECT"
	SQLKindDML    SQLKind = "DML"
)

// ResultSet is a frozen expected result: column names, type names as text, rows
// as text with nil for NULL.
type ResultSet struct {
	Columns []string
	Types   []string
	Rows    [][]*string
}

// SQLVerification is one query run as admin after a DML problem's student SQL.
type SQLVerification struct {
	Query    string
	Expected ResultSet
	Ordered  bool
}

// SQLProblem is the frozen SQL part of a manifest.
type SQLProblem struct {
	Kind   SQLKind
	Schema string // DDL, applied as admin
	Seed   string // data, applied as admin
	// SELECT problems: the expected result is either frozen (Expected) or
	// produced by running Reference as admin on the same fresh database.
	Reference          string
	Expected           *ResultSet
	Ordered            bool
	CompareColumnNames bool
	// DML problems.
	Verification []SQLVerification

	StatementTimeout     time.Duration
	MaxRows              int64
	MaxBytes             int64
	AllowMultiStatements bool
}
