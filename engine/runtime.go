package engine

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// RuntimeSpec is the validated description of one code runtime. The four code
// pools share one executor flow and differ only by their spec.
type RuntimeSpec struct {
	Pool string // cpp, java, python, arkts
	// Image is the sandbox image. Operators pin it by digest
	// (repo@sha256:…); local images built by deploy/images/build-local.sh are
	// referenced by their tag, which carries the recipe hash.
	Image      string
	SourceFile string   // file name the source is written to, e.g. main.cpp
	CompileCmd []string // empty: interpreted runtime (still syntax-checked if given)
	RunCmd     []string
	// CompileTime and CompileMemoryBytes bound the compile step.
	CompileTime        time.Duration
	CompileMemoryBytes int64
	// ExtraMemoryBytes is added to the user's memory limit (JVM overhead).
	ExtraMemoryBytes int64
	// VersionProbe prints the runtime version, reported in heartbeats.
	VersionProbe []string
	// AddressSpaceExtraBytes, when positive, sets a per-run RLIMIT_AS of the
	// memory limit + ExtraMemoryBytes + this. Zero leaves RLIMIT_AS off, for
	// VMs that reserve large virtual ranges (JVM, V8); they are held by the
	// container memory limit and judged by peak RSS.
	AddressSpaceExtraBytes int64
	// MemoryErrorMarkers: a failing run whose stderr contains one of these
	// (std::bad_alloc, MemoryError, java.lang.OutOfMemoryError) is an MLE.
	MemoryErrorMarkers []string
}

var sourceFileRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// Validate refuses incomplete or unsafe specs.
func (r RuntimeSpec) Validate() error {
	switch r.Pool {
	case "cpp", "java", "python", "arkts":
	default:
		return fmt.Errorf("runtime spec: unknown code pool %q (want cpp, java, python or arkts)", r.Pool)
	}
	if strings.TrimSpace(r.Image) == "" {
		return fmt.Errorf("runtime spec %s: image is empty", r.Pool)
	}
	if !sourceFileRE.MatchString(r.SourceFile) {
		return fmt.Errorf("runtime spec %s: source file %q is not a plain file name", r.Pool, r.SourceFile)
	}
	if len(r.RunCmd) == 0 {
		return fmt.Errorf("runtime spec %s: run command is empty", r.Pool)
	}
	if len(r.CompileCmd) > 0 && (r.CompileTime <= 0 || r.CompileMemoryBytes <= 0) {
		return fmt.Errorf("runtime spec %s: compile time and memory limits must be positive", r.Pool)
	}
	if r.ExtraMemoryBytes < 0 || r.AddressSpaceExtraBytes < 0 {
		return fmt.Errorf("runtime spec %s: extra memory must not be negative", r.Pool)
	}
	return nil
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
