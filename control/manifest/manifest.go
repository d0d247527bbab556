// Package manifest owns the immutable test-data manifest of the control plane:
// its JSON shape (the same as the business API's Manifest schema), validation,
// canonical digest, and the check of a node's verdict against it. It reads no
// database and no files.
package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
)

// Limits on manifests; values outside are refused at publish time.
const (
	MaxCases          = 1000
	MaxTimeMs         = 60_000
	MaxMemoryMb       = 4096
	MaxOutputKb       = 256 * 1024
	MaxCaseIDLen      = 64
	MaxSQLTextBytes   = 1 << 20
	MaxLogBytes       = 64 << 10
	MaxMessageBytes   = 4 << 10
	MaxStatementMs    = 60_000
	DefaultOutputKb   = 64 * 1024
	DefaultStatementM = 2_000
)

// ErrInvalid is matched by every validation error of this package.
var ErrInvalid = errors.New("invalid")

// Error is a validation error with a field path.
type Error struct {
	Field   string
	Problem string
}

func (e *Error) Error() string { return e.Field + ": " + e.Problem }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &Error{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Kind is CODE or SQL.
type Kind string

// Manifest kinds.
const (
	KindCode Kind = "CODE"
	KindSQL  Kind = "SQL"
)

// Manifest is the frozen test data of one problem version.
type Manifest struct {
	Kind    Kind    `json:"kind"`
	Limits  Limits  `json:"limits"`
	Checker Checker `json:"checker"`
	Cases   []Case  `json:"cases"`
	SQL     *SQL    `json:"sql,omitempty"`
	// IO is file input and output; absent (every manifest published before
	// it existed) means stdin and stdout, and keeps the canonical JSON.
	IO *FileIO `json:"io,omitempty"`
	// Subtasks group the cases (docs/engine.md, "Subtasks"); absent (every
	// manifest published before them) judges each case on its own.
	Subtasks []Subtask `json:"subtasks,omitempty"`
	// Grader makes a function-signature task (grader.go); absent (every
	// manifest published before graders) runs the contestant's program alone.
	Grader *Grader `json:"grader,omitempty"`
}

// Subtask is a test group: its cases, how they score together, and the
// earlier subtasks it needs.
type Subtask struct {
	SubtaskID string   `json:"subtaskId"`
	Scoring   string   `json:"scoring"`
	Cases     []string `json:"cases"`
	DependsOn []string `json:"dependsOn,omitempty"`
}

// Subtask scoring rules.
const (
	ScoringSum = "sum"
	ScoringMin = "min"
	ScoringMul = "mul"
)

// FileIO names the files a program reads its input from and writes its
// output to (docs/engine.md, "File input and output").
type FileIO struct {
	InputFile  string `json:"inputFile,omitempty"`
	OutputFile string `json:"outputFile,omitempty"`
	// Stdio: the input is also stdin, and without an output file stdout is judged.
	Stdio bool `json:"stdio,omitempty"`
}

// Limits per case.
type Limits struct {
	TimeMs   int64 `json:"timeMs"`
	MemoryMb int64 `json:"memoryMb"`
	OutputKb int64 `json:"outputKb"`
	WallMs   int64 `json:"wallMs,omitempty"`
}

// Checker selects answer comparison.
type Checker struct {
	Type    string          `json:"type"`
	AbsTol  float64         `json:"absTol,omitempty"`
	RelTol  float64         `json:"relTol,omitempty"`
	Special *SpecialChecker `json:"special,omitempty"`
}

// SpecialChecker is a special-judge program stored as an artifact.
//
// The fields added for partial credit are all omitempty and an explicit
// "legacy" protocol is stored as absent, so every manifest published before
// them keeps its canonical JSON, its digest and its judging.
type SpecialChecker struct {
	Language     string `json:"language"`
	SourceSha256 string `json:"sourceSha256"`
	SourceSize   int64  `json:"sourceSize"`
	// Protocol is legacy (absent), testlib or score (docs/engine.md, "Checkers").
	Protocol string `json:"protocol,omitempty"`
	// MaxPoints divides a testlib or score checker's points; absent means 1.
	MaxPoints float64 `json:"maxPoints,omitempty"`
	// Files are laid next to the source before it compiles (e.g. testlib.h).
	Files []CheckerFile `json:"files,omitempty"`
	// TimeMs is an interactor's (or manager's) CPU limit per case; absent
	// means the node's checker time. Only for checker types interactive
	// and communication.
	TimeMs int64 `json:"timeMs,omitempty"`
	// Processes is how many copies of the contestant's program a
	// communication task's manager talks to; only for that checker type.
	Processes int `json:"processes,omitempty"`
}

// CheckerFile is an extra file of a special checker, stored as an artifact.
type CheckerFile struct {
	Name   string `json:"name"`
	Sha256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Special checker protocols.
const (
	ProtocolLegacy  = "legacy"
	ProtocolTestlib = "testlib"
	ProtocolScore   = "score"
)

// Bounds of a special checker's extra files and points.
const (
	MaxCheckerFiles     = 16
	MaxCheckerFileBytes = 4 << 20
	MaxCheckerPoints    = 1e9
)

// Case is one test case; input and expected output are artifacts.
type Case struct {
	CaseID       string `json:"caseId"`
	InputSha256  string `json:"inputSha256"`
	InputSize    int64  `json:"inputSize"`
	OutputSha256 string `json:"outputSha256"`
	OutputSize   int64  `json:"outputSize"`
	Weight       int64  `json:"weight"`
}

// SQL is the frozen SQL part of a manifest.
type SQL struct {
	ProblemKind          string         `json:"problemKind"`
	SchemaSQL            string         `json:"schemaSql"`
	SeedSQL              string         `json:"seedSql"`
	ReferenceSQL         string         `json:"referenceSql,omitempty"`
	Expected             *ResultSet     `json:"expected,omitempty"`
	Ordered              bool           `json:"ordered"`
	CompareColumnNames   bool           `json:"compareColumnNames"`
	Verification         []Verification `json:"verification"`
	StatementTimeoutMs   int64          `json:"statementTimeoutMs"`
	MaxRows              int64          `json:"maxRows"`
	MaxBytes             int64          `json:"maxBytes"`
	AllowMultiStatements bool           `json:"allowMultiStatements"`
}

// ResultSet is a frozen result: column names, type names, rows (nil = NULL).
type ResultSet struct {
	Columns []string    `json:"columns"`
	Types   []string    `json:"types,omitempty"`
	Rows    [][]*string `json:"rows"`
}

// Verification is one query checked after a DML problem's statement.
type Verification struct {
	Query    string    `json:"query"`
	Expected ResultSet `json:"expected"`
	Ordered  bool      `json:"ordered"`
}

var (
	digestRE = regexp.MustCompile(`^[0-9a-f]{64}$`)
	caseIDRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
)

// ValidDigest reports whether d is 64 lowercase hex characters.
func ValidDigest(d string) bool { return digestRE.MatchString(d) }

// Parse decodes and validates a manifest, refusing unknown fields.
func Parse(body []byte) (Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, invalid("manifest", "not valid JSON: %v", err)
	}
	if err := m.Validate(); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// Validate checks limits, checker, cases and the SQL section.
func (m *Manifest) Validate() error {
	switch m.Kind {
	case KindCode:
		if m.SQL != nil {
			return invalid("sql", "only SQL manifests have a sql section")
		}
		if err := m.validateCode(); err != nil {
			return err
		}
	case KindSQL:
		if m.IO != nil {
			return invalid("io", "only CODE manifests have file input and output")
		}
		if m.Subtasks != nil {
			return invalid("subtasks", "only CODE manifests have subtasks")
		}
		if m.Grader != nil {
			return invalid("grader", "only CODE manifests have a grader")
		}
		if err := m.validateSQL(); err != nil {
			return err
		}
	default:
		return invalid("kind", "must be CODE or SQL, got %q", m.Kind)
	}
	return nil
}

func (m *Manifest) validateCode() error {
	l := m.Limits
	if l.TimeMs <= 0 || l.TimeMs > MaxTimeMs {
		return invalid("limits.timeMs", "must be 1..%d", MaxTimeMs)
	}
	if l.MemoryMb <= 0 || l.MemoryMb > MaxMemoryMb {
		return invalid("limits.memoryMb", "must be 1..%d", MaxMemoryMb)
	}
	if l.OutputKb <= 0 || l.OutputKb > MaxOutputKb {
		return invalid("limits.outputKb", "must be 1..%d", MaxOutputKb)
	}
	if l.WallMs < 0 || l.WallMs > 3*MaxTimeMs {
		return invalid("limits.wallMs", "must be 0..%d", 3*MaxTimeMs)
	}
	switch c := m.Checker; c.Type {
	case "exact", "tolerant":
		if c.Special != nil || c.AbsTol != 0 || c.RelTol != 0 {
			return invalid("checker", "%s takes no tolerance or special program", c.Type)
		}
	case "float":
		if c.AbsTol < 0 || c.RelTol < 0 || (c.AbsTol == 0 && c.RelTol == 0) {
			return invalid("checker", "float needs a non-negative absTol or relTol, at least one positive")
		}
	case "special", CheckerInteractive, CheckerCommunication:
		s := c.Special
		if s == nil {
			return invalid("checker.special", "required for a %s checker", c.Type)
		}
		if err := m.validateInteractive(); err != nil {
			return err
		}
		if _, err := PoolForLanguage(s.Language); err != nil || s.Language == "mysql" {
			return invalid("checker.special.language", "unknown checker language %q", s.Language)
		}
		if !ValidDigest(s.SourceSha256) || s.SourceSize <= 0 {
			return invalid("checker.special", "sourceSha256 must be 64 lowercase hex and sourceSize positive")
		}
		if err := s.validate(); err != nil {
			return err
		}
		if c.Type != "special" {
			s.Protocol = "" // an interactor's or manager's only convention is stored as absent
		}
	default:
		return invalid("checker.type", "must be exact, tolerant, float, special, interactive or communication, got %q", c.Type)
	}
	if err := m.IO.validate(); err != nil {
		return err
	}
	if err := m.Grader.validate(); err != nil {
		return err
	}
	if len(m.Cases) == 0 || len(m.Cases) > MaxCases {
		return invalid("cases", "must have 1..%d cases", MaxCases)
	}
	seen := make(map[string]bool, len(m.Cases))
	for i, c := range m.Cases {
		f := fmt.Sprintf("cases[%d]", i)
		if !caseIDRE.MatchString(c.CaseID) {
			return invalid(f+".caseId", "must match %s", caseIDRE)
		}
		if seen[c.CaseID] {
			return invalid(f+".caseId", "duplicate case id %q", c.CaseID)
		}
		seen[c.CaseID] = true
		if !ValidDigest(c.InputSha256) || !ValidDigest(c.OutputSha256) {
			return invalid(f, "inputSha256 and outputSha256 must be 64 lowercase hex")
		}
		if c.InputSize < 0 || c.OutputSize < 0 {
			return invalid(f, "sizes must not be negative")
		}
		if c.Weight < 0 || c.Weight > 1_000_000 {
			return invalid(f+".weight", "must be 0..1000000")
		}
	}
	return m.validateSubtasks()
}

// validateSubtasks: ids unique, a known scoring rule, every case in exactly
// one subtask, and dependencies only on earlier subtasks (so there is no
// cycle and the listed order is a judging order). An empty list is stored
// as absent, one canonical form per meaning.
func (m *Manifest) validateSubtasks() error {
	if len(m.Subtasks) == 0 {
		m.Subtasks = nil
		return nil
	}
	if len(m.Subtasks) > MaxCases {
		return invalid("subtasks", "at most %d subtasks", MaxCases)
	}
	caseOf := make(map[string]string, len(m.Cases))
	for _, c := range m.Cases {
		caseOf[c.CaseID] = ""
	}
	earlier := make(map[string]bool, len(m.Subtasks))
	for i, st := range m.Subtasks {
		f := fmt.Sprintf("subtasks[%d]", i)
		if !caseIDRE.MatchString(st.SubtaskID) {
			return invalid(f+".subtaskId", "must match %s", caseIDRE)
		}
		if earlier[st.SubtaskID] {
			return invalid(f+".subtaskId", "duplicate subtask id %q", st.SubtaskID)
		}
		switch st.Scoring {
		case ScoringSum, ScoringMin, ScoringMul:
		default:
			return invalid(f+".scoring", "must be sum, min or mul, got %q", st.Scoring)
		}
		if len(st.Cases) == 0 {
			return invalid(f+".cases", "a subtask needs at least one case")
		}
		for j, id := range st.Cases {
			owner, ok := caseOf[id]
			switch {
			case !ok:
				return invalid(fmt.Sprintf("%s.cases[%d]", f, j), "%q is not a case of the manifest", id)
			case owner != "":
				return invalid(fmt.Sprintf("%s.cases[%d]", f, j), "case %q is already in subtask %q", id, owner)
			}
			caseOf[id] = st.SubtaskID
		}
		for j, d := range st.DependsOn {
			if !earlier[d] {
				return invalid(fmt.Sprintf("%s.dependsOn[%d]", f, j), "%q is not an earlier subtask", d)
			}
		}
		earlier[st.SubtaskID] = true
	}
	for _, c := range m.Cases {
		if caseOf[c.CaseID] == "" {
			return invalid("subtasks", "case %q is in no subtask (with subtasks, every case is in one)", c.CaseID)
		}
	}
	return nil
}

// validate checks the file names: plain, distinct, none the build uses
// (the runtimes write main, main.*, *.java, *.class next to the program).
// io absent is stdin/stdout; an io that names no file is refused, so each
// meaning has one canonical form.
func (f *FileIO) validate() error {
	if f == nil {
		return nil
	}
	if f.InputFile == "" && f.OutputFile == "" {
		return invalid("io", "name an inputFile, an outputFile or both (omit io for stdin and stdout)")
	}
	if f.InputFile == f.OutputFile {
		return invalid("io.outputFile", "must differ from inputFile")
	}
	for _, n := range []struct{ field, name string }{{"io.inputFile", f.InputFile}, {"io.outputFile", f.OutputFile}} {
		if n.name == "" {
			continue
		}
		if !checkerFileRE.MatchString(n.name) || strings.Contains(n.name, "+") {
			return invalid(n.field, "must be a plain file name matching ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
		}
		if n.name == "main" || strings.HasPrefix(n.name, "main.") || strings.HasSuffix(n.name, ".java") ||
			strings.HasSuffix(n.name, ".class") || n.name == "kece-env.d.ts" || n.name == "__pycache__" {
			return invalid(n.field, "%q is a name the program's build uses in its working directory", n.name)
		}
	}
	return nil
}

// checkerFileRE is a plain file name: no directory, no leading dot.
var checkerFileRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}$`)

// validate checks the protocol, points and files, and stores an explicit
// legacy protocol as absent (one canonical form per meaning).
func (s *SpecialChecker) validate() error {
	switch s.Protocol {
	case "", ProtocolLegacy:
		s.Protocol = ""
		if s.MaxPoints != 0 {
			return invalid("checker.special.maxPoints", "a legacy checker awards no points; use protocol testlib or score")
		}
	case ProtocolTestlib, ProtocolScore:
		if s.MaxPoints < 0 || s.MaxPoints > MaxCheckerPoints || math.IsNaN(s.MaxPoints) {
			return invalid("checker.special.maxPoints", "must be above 0 and at most %g (absent means 1)", MaxCheckerPoints)
		}
	default:
		return invalid("checker.special.protocol", "must be legacy, testlib or score, got %q", s.Protocol)
	}
	if len(s.Files) > MaxCheckerFiles {
		return invalid("checker.special.files", "at most %d files", MaxCheckerFiles)
	}
	seen := make(map[string]bool, len(s.Files))
	for i, f := range s.Files {
		field := fmt.Sprintf("checker.special.files[%d]", i)
		if !checkerFileRE.MatchString(f.Name) {
			return invalid(field+".name", "must be a plain file name matching %s", checkerFileRE)
		}
		if seen[f.Name] {
			return invalid(field+".name", "duplicate file name %q", f.Name)
		}
		seen[f.Name] = true
		if !ValidDigest(f.Sha256) {
			return invalid(field+".sha256", "must be 64 lowercase hex")
		}
		if f.Size < 0 || f.Size > MaxCheckerFileBytes {
			return invalid(field+".size", "must be 0..%d", MaxCheckerFileBytes)
		}
	}
	return nil
}

func (m *Manifest) validateSQL() error {
	s := m.SQL
	if s == nil {
		return invalid("sql", "required for a SQL manifest")
	}
	if len(m.Cases) != 0 {
		return invalid("cases", "a SQL manifest has no cases (its checks are in sql)")
	}
	if m.Checker.Type != "exact" || m.Checker.Special != nil {
		return invalid("checker", "a SQL manifest takes checker {\"type\": \"exact\"}; result sets are compared as sql says")
	}
	if m.Limits.TimeMs < 0 || m.Limits.MemoryMb < 0 || m.Limits.OutputKb < 0 || m.Limits.WallMs < 0 {
		return invalid("limits", "must not be negative")
	}
	if strings.TrimSpace(s.SchemaSQL) == "" {
		return invalid("sql.schemaSql", "required")
	}
	if len(s.SchemaSQL)+len(s.SeedSQL)+len(s.ReferenceSQL) > MaxSQLTextBytes {
		return invalid("sql", "schema, seed and reference together exceed %d bytes", MaxSQLTextBytes)
	}
	if s.StatementTimeoutMs <= 0 || s.StatementTimeoutMs > MaxStatementMs {
		return invalid("sql.statementTimeoutMs", "must be 1..%d", MaxStatementMs)
	}
	if s.MaxRows <= 0 || s.MaxRows > 1_000_000 {
		return invalid("sql.maxRows", "must be 1..1000000")
	}
	if s.MaxBytes <= 0 || s.MaxBytes > 64<<20 {
		return invalid("sql.maxBytes", "must be 1..%d", 64<<20)
	}
	switch s.ProblemKind {
	case "SELECT":
		if (strings.TrimSpace(s.ReferenceSQL) == "") == (s.Expected == nil) {
			return invalid("sql", "a SELECT problem needs exactly one of referenceSql or expected")
		}
		if s.Expected != nil {
			if err := validateResultSet("sql.expected", *s.Expected, s.MaxRows); err != nil {
				return err
			}
		}
		if len(s.Verification) != 0 {
			return invalid("sql.verification", "only DML problems have verification queries")
		}
	case "DML":
		if len(s.Verification) == 0 {
			return invalid("sql.verification", "a DML problem needs at least one verification query")
		}
		for i, v := range s.Verification {
			f := fmt.Sprintf("sql.verification[%d]", i)
			if strings.TrimSpace(v.Query) == "" {
				return invalid(f+".query", "required")
			}
			if err := validateResultSet(f+".expected", v.Expected, s.MaxRows); err != nil {
				return err
			}
		}
		if s.Expected != nil || strings.TrimSpace(s.ReferenceSQL) != "" {
			return invalid("sql", "a DML problem is checked by its verification queries only (no referenceSql or expected)")
		}
	default:
		return invalid("sql.problemKind", "must be SELECT or DML, got %q", s.ProblemKind)
	}
	return nil
}

// validateResultSet mirrors the SQL judge's own check (engine/sqljudge
// ValidateProblem), so a manifest it would refuse is refused at publish time.
func validateResultSet(field string, r ResultSet, maxRows int64) error {
	if len(r.Columns) == 0 {
		return invalid(field+".columns", "required")
	}
	if int64(len(r.Rows)) > maxRows {
		return invalid(field+".rows", "%d rows exceed sql.maxRows %d", len(r.Rows), maxRows)
	}
	if len(r.Types) != 0 && len(r.Types) != len(r.Columns) {
		return invalid(field+".types", "must match the column count")
	}
	for i, row := range r.Rows {
		if len(row) != len(r.Columns) {
			return invalid(fmt.Sprintf("%s.rows[%d]", field, i), "has %d values for %d columns", len(row), len(r.Columns))
		}
	}
	return nil
}

// Canonical returns the canonical JSON encoding of a validated manifest and
// its SHA-256; the same content always publishes to the same manifest.
func (m *Manifest) Canonical() ([]byte, string, error) {
	if m.Cases == nil {
		m.Cases = []Case{}
	}
	if m.SQL != nil && m.SQL.Verification == nil {
		m.SQL.Verification = []Verification{}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, "", fmt.Errorf("manifest: encode: %w", err)
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:]), nil
}

// Digests lists every artifact digest the manifest references (inputs,
// outputs, special checker source and files, grader files), without duplicates, with sizes.
func (m *Manifest) Digests() map[string]int64 {
	out := make(map[string]int64)
	for _, c := range m.Cases {
		out[c.InputSha256] = c.InputSize
		out[c.OutputSha256] = c.OutputSize
	}
	if sp := m.Checker.Special; sp != nil {
		out[sp.SourceSha256] = sp.SourceSize
		for _, f := range sp.Files {
			out[f.Sha256] = f.Size
		}
	}
	if m.Grader != nil {
		for _, gl := range m.Grader.Languages {
			for _, f := range gl.Files {
				out[f.Sha256] = f.Size
			}
		}
	}
	return out
}

// MaxScore is the sum of case weights.
func (m *Manifest) MaxScore() int64 {
	var n int64
	for _, c := range m.Cases {
		n += c.Weight
	}
	return n
}
