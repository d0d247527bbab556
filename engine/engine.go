// Package engine judges one fixed input with no network and no control plane.
//
// It owns the Executor interface, the task and verdict types shared by every
// executor, and the classification of infrastructure faults. Executors live in
// sub-packages: engine/code (Docker sandbox for cpp, java, python, arkts) and
// engine/sqljudge (a dedicated judge MySQL). This package must not import
// control, worker or contracts: a Task is resolved local input, nothing more.
package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Executor judges one task. A Verdict is a user outcome; a non-nil error is an
// infrastructure fault (see InfraError) and the verdict must then be ignored.
type Executor interface {
	Execute(ctx context.Context, task Task, progress ProgressSink) (Verdict, error)
}

// ProgressSink receives phase and case progress while a task runs. It must not
// block; executors call it from their own goroutine.
type ProgressSink interface {
	Report(Progress)
}

// ProgressFunc adapts a function to ProgressSink.
type ProgressFunc func(Progress)

// Report implements ProgressSink.
func (f ProgressFunc) Report(p Progress) { f(p) }

// NoProgress discards progress.
var NoProgress ProgressSink = ProgressFunc(func(Progress) {})

// Phase is the coarse stage of a running task.
type Phase string

// Phases reported through ProgressSink.
const (
	PhaseCompiling Phase = "COMPILING"
	PhaseJudging   Phase = "JUDGING"
)

// Progress is one progress report; CasesDone only moves forward.
type Progress struct {
	Phase      Phase
	CasesDone  int
	CasesTotal int
}

// Status is a user outcome. Infrastructure faults are never a Status.
type Status string

// User outcomes. A job's status is decided from its cases by JobStatus.
const (
	StatusAccepted            Status = "AC"
	StatusPartial             Status = "PARTIAL" // a checker awarded 0 < fraction < 1
	StatusWrongAnswer         Status = "WA"
	StatusTimeLimitExceeded   Status = "TLE"
	StatusMemoryLimitExceeded Status = "MLE"
	StatusOutputLimitExceeded Status = "OLE"
	StatusRuntimeError        Status = "RE"
	StatusCompileError        Status = "CE"
	// StatusSkipped is a case (or subtask) not run: its subtask already
	// failed (min, mul) or a prerequisite subtask is not AC. Never a job's.
	StatusSkipped Status = "SKIPPED"
)

// Valid reports whether s is one of the user outcomes.
func (s Status) Valid() bool {
	switch s {
	case StatusAccepted, StatusPartial, StatusWrongAnswer, StatusTimeLimitExceeded, StatusMemoryLimitExceeded,
		StatusOutputLimitExceeded, StatusRuntimeError, StatusCompileError, StatusSkipped:
		return true
	}
	return false
}

// Task is everything an executor needs, already resolved to local files.
// It carries no credentials, URLs or control-plane database settings.
type Task struct {
	// NodeID, JobID and LeaseEpoch label sandbox resources (container labels,
	// temporary database names) so janitors can find leftovers.
	NodeID     string
	JobID      string
	LeaseEpoch int64

	// Runtime selects the code runtime; empty for SQL tasks.
	Runtime RuntimeSpec
	// Source is the user's program (or SQL text for the mysql pool).
	Source []byte
	// Files are further named source files of a multi-file submission
	// (headers, translation units, Java classes, Python modules); Source
	// stays the entry (docs/engine.md, "Multi-file submissions").
	Files []SourceFile
	// Grader is the problem's grader for the task's language (a
	// function-signature task, docs/engine.md "Graders"); nil for none.
	Grader *Grader

	Limits  Limits
	Cases   []Case
	Checker Checker
	// IO names the files a program reads its input from and writes its
	// output to (file I/O problems); the zero value is stdin and stdout.
	IO FileIO
	// Subtasks group Cases (docs/engine.md, "Subtasks"); nil judges every
	// case on its own, in order.
	Subtasks []Subtask

	// SQL is set for tasks of the mysql pool.
	SQL *SQLProblem
}

// Limits bound one run of the user's program (per case).
type Limits struct {
	CPUTime     time.Duration // per case
	WallTime    time.Duration // per case; 0 means a multiple of CPUTime chosen by the executor
	MemoryBytes int64         // address space / RSS budget for the user program
	OutputBytes int64         // stdout cap per case
	StackBytes  int64         // 0: executor default
}

// Grader is the part of a function-signature task the problem supplies:
// sources and headers compiled or linked with the contestant's source.
// With SourceName set, the contestant's source is saved under that name and
// the grader's file with the runtime's entry name (main.cpp, main.c,
// main.py) is the entry; otherwise the contestant's source stays the entry
// and the grader's files lie beside it (a C/C++ grader's main is then in
// one of its units, a Java grader's in its own class).
type Grader struct {
	Files      []SourceFile
	SourceName string
}

// SourceFile is one further file of a multi-file submission.
type SourceFile struct {
	Name string
	Data []byte
}

// Scoring is how a subtask's cases score together.
type Scoring string

// Subtask scoring rules.
const (
	ScoringSum Scoring = "sum" // the sum of the case scores
	ScoringMin Scoring = "min" // all or nothing (IOI GroupMin): weights × the smallest fraction
	ScoringMul Scoring = "mul" // weights × the product of the fractions
)

// Subtask is a test group: indexes into Task.Cases, its scoring rule, and
// the ids of earlier subtasks that must be AC for it to run.
type Subtask struct {
	ID        string
	Scoring   Scoring
	Cases     []int
	DependsOn []string
}

// SubtaskResult is the outcome of one subtask.
type SubtaskResult struct {
	ID       string
	Status   Status
	Score    float64
	MaxScore int64
}

// FileIO is a problem's file input and output (IOI/NOI style): the program
// runs with the case input at InputFile in its working directory and its
// output is read from OutputFile there. An empty name means stdin or stdout.
// With Stdio the input is also the program's stdin, and a program that
// creates no OutputFile is judged on its stdout.
type FileIO struct {
	InputFile  string
	OutputFile string
	Stdio      bool
}

// Files reports whether the program uses any named file.
func (f FileIO) Files() bool { return f.InputFile != "" || f.OutputFile != "" }

// Case is one test case. Paths are local, verified files; ExpectedPath is read
// only by the checker on the host and never enters the sandbox.
type Case struct {
	ID           string
	InputPath    string
	ExpectedPath string
	Weight       int64
}

// CheckerKind names a checker.
type CheckerKind string

// Checkers. CheckerTolerant (trailing blanks and trailing empty lines ignored)
// is the default; docs/engine.md "Checkers" states the token rules exactly.
const (
	CheckerExact    CheckerKind = "exact"
	CheckerTolerant CheckerKind = "tolerant"
	CheckerFloat    CheckerKind = "float"
	CheckerSpecial  CheckerKind = "special"
	// CheckerInteractive: the Special* program is an interactor that talks
	// to the user's program over pipes while it runs and decides the case
	// (testlib's interactor convention; docs/engine.md "Interactive problems").
	CheckerInteractive CheckerKind = "interactive"
	// CheckerCommunication: the Special* program is the manager of a
	// communication task, talking to Processes copies of the user's program,
	// each in its own sandbox (docs/engine.md "Communication tasks").
	CheckerCommunication CheckerKind = "communication"
)

// HasProgram reports whether the checker is a program of the problem's
// (a special judge or an interactor) compiled and run in its own sandbox.
func (c Checker) HasProgram() bool {
	return c.Kind == CheckerSpecial || c.Kind == CheckerInteractive || c.Kind == CheckerCommunication
}

// Interacts reports whether the checker's program talks to the user's
// program while it runs (an interactor or a communication manager).
func (c Checker) Interacts() bool {
	return c.Kind == CheckerInteractive || c.Kind == CheckerCommunication
}

// CheckerProtocol is how a special checker is called and how its outcome is read.
type CheckerProtocol string

// Special checker protocols (docs/engine.md "Checkers").
const (
	// ProtocolLegacy: argv input expected output; exit 0 AC, 1 or 2 WA. The
	// protocol of every manifest published before the field existed.
	ProtocolLegacy CheckerProtocol = "legacy"
	// ProtocolTestlib: argv input output expected (testlib's order); exit 0
	// OK, 1 WA, 2 PE (WA), 3 FAIL (infrastructure), 7 points on stderr.
	ProtocolTestlib CheckerProtocol = "testlib"
	// ProtocolScore: argv as testlib; exit 0 and one number on stdout, the
	// points in [0, MaxPoints].
	ProtocolScore CheckerProtocol = "score"
)

// Valid reports whether p is a known protocol ("" is not: callers default it).
func (p CheckerProtocol) Valid() bool {
	return p == ProtocolLegacy || p == ProtocolTestlib || p == ProtocolScore
}

// MaxProcesses bounds a communication task's processes per case.
const MaxProcesses = 8

// Checker configures answer comparison.
type Checker struct {
	Kind   CheckerKind
	AbsTol float64 // float checker
	RelTol float64 // float checker
	// Special judge: source compiled with SpecialRuntime in the sandbox, next
	// to SpecialFiles (headers such as testlib.h); Protocol decides its argv
	// and how its exit code and output become a fraction of the case weight.
	SpecialSource   []byte
	SpecialRuntime  RuntimeSpec
	SpecialFiles    []CheckerFile
	SpecialProtocol CheckerProtocol // "" = ProtocolLegacy
	// MaxPoints is what a testlib or score checker's points are divided by
	// (fraction = points / MaxPoints); 0 means 1.
	MaxPoints float64
	// InteractorTime is an interactor's (or manager's) CPU limit per case;
	// 0 means the executor's checker time.
	InteractorTime time.Duration
	// Processes is how many copies of the user's program a communication
	// task's manager talks to (1..MaxProcesses); 0 for every other checker.
	Processes int
}

// CheckerFile is an extra file laid next to the special checker's source
// before it compiles (a header such as testlib.h).
type CheckerFile struct {
	Name string
	Data []byte
}

// Verdict is the user-facing outcome of a task.
type Verdict struct {
	Status     Status
	Score      float64 // sum of the case scores (see CaseScore)
	MaxScore   int64   // sum of all weights
	CompileLog string
	Message    string
	Cases      []CaseResult
	// Subtasks is set when the task has subtasks; Score is then their sum.
	Subtasks []SubtaskResult
	// Phases says where the executor's time went. It is a measurement, not
	// part of the outcome: two judgings of one task agree on everything
	// else, not on this.
	Phases Phases
}

// Phases is where one Execute call spent its time, measured by the
// executor with the monotonic clock. A phase that did not happen is zero.
type Phases struct {
	// Sandbox is the time until the sandboxes the task needs were ready to
	// run a command (created and started, or taken ready from a node's
	// pool of started ones).
	Sandbox time.Duration
	// Compile is the submission's compile step and Checker the checker's
	// (interactor's, manager's) compile; either is a cache look-up when
	// the matching Cached flag is set.
	Compile time.Duration
	Checker time.Duration
	// Run is the program runs of every case together, Check the checking
	// of their outputs (a special judge's runs included).
	Run   time.Duration
	Check time.Duration
	// CompileCached and CheckerCached: that compile's outcome came from the
	// node's compile cache. SandboxWarm: the program's sandbox was started
	// before the task arrived.
	CompileCached bool
	CheckerCached bool
	SandboxWarm   bool
}

// CaseResult is the outcome of one case.
type CaseResult struct {
	ID       string
	Status   Status
	Score    float64 // CaseScore(fraction, weight)
	CPUTime  time.Duration
	WallTime time.Duration
	MemoryKB int64
	ExitCode int
	Signal   int
	Message  string // bounded: checker diff, signal name, SQL error
	// Fraction is what the case earned of its weight (1 AC, 0 for every
	// failure and SKIPPED, the checker's value for PARTIAL); subtasks score
	// from it. It is not reported.
	Fraction float64
}

// ScoreScale is the resolution of every score: a case score is a whole
// number of 1/ScoreScale points (4 decimal places), so sums are exact and
// the control plane can check them without a tolerance.
const ScoreScale = 10_000

// ScoreUnits is the score in 1/ScoreScale points, rounded half away from zero.
func ScoreUnits(score float64) int64 { return int64(math.Round(score * ScoreScale)) }

// CaseScore is fraction × weight rounded to 1/ScoreScale; fraction is clamped
// to [0, 1] (checkers are validated before, so clamping only absorbs float
// noise such as 1.0000000000000002).
func CaseScore(fraction float64, weight int64) float64 {
	fraction = min(max(fraction, 0), 1)
	return float64(int64(math.Round(fraction*float64(weight)*ScoreScale))) / ScoreScale
}

// SumScores adds case scores in whole units, so the total has no float drift.
func SumScores(cases []CaseResult) float64 {
	var units int64
	for _, c := range cases {
		units += ScoreUnits(c.Score)
	}
	return float64(units) / ScoreScale
}

// CaseStatus is a checked case's status from the checker's fraction: 1 is AC,
// 0 is WA, anything between is PARTIAL.
func CaseStatus(fraction float64) Status {
	switch {
	case fraction >= 1:
		return StatusAccepted
	case fraction <= 0:
		return StatusWrongAnswer
	}
	return StatusPartial
}

// JobStatus decides a job's status from its cases, in order: the first case
// that is neither AC, PARTIAL nor SKIPPED decides (a TLE on case 3 is the
// job's TLE even when case 5 scored partially); else PARTIAL if any case is
// PARTIAL or SKIPPED; else AC. No cases is AC (the caller handles CE before
// any case runs). A subtask's status is the same rule over its cases.
func JobStatus(cases []CaseResult) Status {
	partial := false
	for _, c := range cases {
		switch c.Status {
		case StatusAccepted:
		case StatusPartial, StatusSkipped:
			partial = true
		default:
			return c.Status
		}
	}
	if partial {
		return StatusPartial
	}
	return StatusAccepted
}

// InfraClass classifies an infrastructure fault. The worker reports it as the
// attempt's error code; it never becomes a user's CE/RE.
type InfraClass string

// Infrastructure fault classes.
const (
	InfraDaemonUnreachable  InfraClass = "DAEMON_UNREACHABLE"
	InfraImageMissing       InfraClass = "IMAGE_MISSING"
	InfraContainerCreate    InfraClass = "CONTAINER_CREATE"
	InfraResourceExhausted  InfraClass = "RESOURCE_EXHAUSTED"
	InfraCorruptInput       InfraClass = "CORRUPT_INPUT"
	InfraCancelled          InfraClass = "CANCELLED"
	InfraConfig             InfraClass = "CONFIG"
	InfraCheckerFailed      InfraClass = "CHECKER_FAILED"
	InfraJudgeDBUnreachable InfraClass = "JUDGE_DB_UNREACHABLE"
	InfraJudgeDBRights      InfraClass = "JUDGE_DB_RIGHTS"
	InfraInternal           InfraClass = "INTERNAL"
)

// ErrInfrastructure is matched by every InfraError through errors.Is.
var ErrInfrastructure = errors.New("infrastructure fault")

// InfraError is an infrastructure fault with its class.
type InfraError struct {
	Class InfraClass
	Err   error
}

// Infra wraps err as an infrastructure fault of the given class.
func Infra(class InfraClass, err error) error { return &InfraError{Class: class, Err: err} }

// Infraf formats an infrastructure fault of the given class.
func Infraf(class InfraClass, format string, args ...any) error {
	return &InfraError{Class: class, Err: fmt.Errorf(format, args...)}
}

func (e *InfraError) Error() string { return fmt.Sprintf("%s: %v", e.Class, e.Err) }

// Unwrap returns the cause.
func (e *InfraError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInfrastructure) true for every InfraError.
func (e *InfraError) Is(target error) bool { return target == ErrInfrastructure }

// ClassOf returns the class of an infrastructure error, InfraCancelled for
// context cancellation, and InfraInternal for anything else.
func ClassOf(err error) InfraClass {
	var ie *InfraError
	if errors.As(err, &ie) {
		return ie.Class
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return InfraCancelled
	}
	return InfraInternal
}
