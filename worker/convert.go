package worker

import (
	"fmt"
	"strconv"
	"time"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/engine"
)

// Bounds of the result payload (docs/api.md).
const (
	maxCompileLog = 64 << 10
	maxMessage    = 4 << 10
)

// codePoolOf maps a language key to its code pool (special checkers may be
// written in another language than the submission), by the contract's table.
func codePoolOf(lang string) (string, error) {
	if pool, ok := contracts.PoolOfLanguage(lang); ok && pool != string(machineapi.PoolMysql) {
		return pool, nil
	}
	return "", fmt.Errorf("no code pool for language %q", lang)
}

// limitsOf converts manifest limits (per case).
func limitsOf(l machineapi.Limits) engine.Limits {
	out := engine.Limits{
		CPUTime:     time.Duration(l.TimeMs) * time.Millisecond,
		MemoryBytes: l.MemoryMb << 20,
		OutputBytes: l.OutputKb << 10,
	}
	if l.WallMs != nil {
		out.WallTime = time.Duration(*l.WallMs) * time.Millisecond
	}
	return out
}

// sourceFilesOf converts a multi-file submission's further files; nil for
// a one-file submission.
func sourceFilesOf(in *[]machineapi.SourceFile) []engine.SourceFile {
	if in == nil {
		return nil
	}
	out := make([]engine.SourceFile, 0, len(*in))
	for _, f := range *in {
		out = append(out, engine.SourceFile{Name: f.Name, Data: []byte(f.Content)})
	}
	return out
}

// fileIOOf converts a manifest's file input and output; absent is stdin
// and stdout, as for every manifest published before the field existed.
func fileIOOf(f *machineapi.FileIO) engine.FileIO {
	if f == nil {
		return engine.FileIO{}
	}
	var out engine.FileIO
	if f.InputFile != nil {
		out.InputFile = *f.InputFile
	}
	if f.OutputFile != nil {
		out.OutputFile = *f.OutputFile
	}
	out.Stdio = f.Stdio != nil && *f.Stdio
	return out
}

// checkerOf converts the checker; the special judge's source, files and
// runtime are filled in by the caller after download. An absent protocol is
// legacy: manifests published before the field existed judge as they did.
func checkerOf(c machineapi.Checker) (engine.Checker, error) {
	out := engine.Checker{}
	switch c.Type {
	case machineapi.CheckerTypeExact:
		out.Kind = engine.CheckerExact
	case machineapi.CheckerTypeTolerant, "":
		out.Kind = engine.CheckerTolerant
	case machineapi.CheckerTypeFloat:
		out.Kind = engine.CheckerFloat
	case machineapi.CheckerTypeSpecial:
		out.Kind = engine.CheckerSpecial
	case machineapi.CheckerTypeInteractive:
		out.Kind = engine.CheckerInteractive
	case machineapi.CheckerTypeCommunication:
		out.Kind = engine.CheckerCommunication
	default:
		return out, fmt.Errorf("unknown checker %q", c.Type)
	}
	if c.AbsTol != nil {
		out.AbsTol = *c.AbsTol
	}
	if c.RelTol != nil {
		out.RelTol = *c.RelTol
	}
	if sp := c.Special; sp != nil {
		out.SpecialProtocol = engine.ProtocolLegacy
		if sp.Protocol != nil {
			out.SpecialProtocol = engine.CheckerProtocol(*sp.Protocol)
			if !out.SpecialProtocol.Valid() {
				return out, fmt.Errorf("unknown special checker protocol %q", *sp.Protocol)
			}
		}
		if sp.MaxPoints != nil {
			out.MaxPoints = *sp.MaxPoints
		}
		if out.Interacts() {
			// An interactor or manager always follows testlib's convention.
			out.SpecialProtocol = engine.ProtocolTestlib
			if sp.TimeMs != nil {
				out.InteractorTime = time.Duration(*sp.TimeMs) * time.Millisecond
			}
			if sp.Processes != nil {
				out.Processes = *sp.Processes
			}
		}
	}
	return out, nil
}

func resultSetOf(r machineapi.ResultSet) engine.ResultSet {
	out := engine.ResultSet{Columns: r.Columns, Rows: r.Rows}
	if r.Types != nil {
		out.Types = *r.Types
	}
	return out
}

// sqlProblemOf converts the frozen SQL part of a manifest.
func sqlProblemOf(p *machineapi.SqlProblem) (*engine.SQLProblem, error) {
	if p == nil {
		return nil, fmt.Errorf("SQL manifest without a sql section")
	}
	out := &engine.SQLProblem{
		Kind: engine.SQLKind(p.ProblemKind), Schema: p.SchemaSql, Seed: p.SeedSql,
		Ordered: p.Ordered, CompareColumnNames: p.CompareColumnNames,
		StatementTimeout: time.Duration(p.StatementTimeoutMs) * time.Millisecond,
		MaxRows:          p.MaxRows, MaxBytes: p.MaxBytes, AllowMultiStatements: p.AllowMultiStatements,
	}
	if p.ReferenceSql != nil {
		out.Reference = *p.ReferenceSql
	}
	if p.Expected != nil {
		rs := resultSetOf(*p.Expected)
		out.Expected = &rs
	}
	for _, v := range p.Verification {
		out.Verification = append(out.Verification, engine.SQLVerification{Query: v.Query, Expected: resultSetOf(v.Expected), Ordered: v.Ordered})
	}
	return out, nil
}

var wireStatus = map[engine.Status]machineapi.VerdictStatus{
	engine.StatusAccepted:            machineapi.VerdictStatusAC,
	engine.StatusPartial:             machineapi.VerdictStatusPARTIAL,
	engine.StatusWrongAnswer:         machineapi.VerdictStatusWA,
	engine.StatusTimeLimitExceeded:   machineapi.VerdictStatusTLE,
	engine.StatusMemoryLimitExceeded: machineapi.VerdictStatusMLE,
	engine.StatusOutputLimitExceeded: machineapi.VerdictStatusOLE,
	engine.StatusRuntimeError:        machineapi.VerdictStatusRE,
	engine.StatusCompileError:        machineapi.VerdictStatusCE,
	engine.StatusSkipped:             machineapi.VerdictStatusSKIPPED,
}

// verdictOf maps an engine verdict to the wire, bounding logs and messages.
// An invalid status is the executor's defect, reported as an error.
func verdictOf(v engine.Verdict) (machineapi.Verdict, error) {
	st, ok := wireStatus[v.Status]
	if !ok {
		return machineapi.Verdict{}, fmt.Errorf("executor returned status %q, which is not a user outcome", v.Status)
	}
	out := machineapi.Verdict{Status: st, Score: max(v.Score, 0), MaxScore: max(v.MaxScore, 0),
		CompileLog: clip(v.CompileLog, maxCompileLog), Message: clip(v.Message, maxMessage),
		Cases: make([]machineapi.CaseResult, 0, len(v.Cases))}
	for i, c := range v.Cases {
		cs, ok := wireStatus[c.Status]
		if !ok {
			return machineapi.Verdict{}, fmt.Errorf("executor returned status %q for case %d", c.Status, i)
		}
		out.Cases = append(out.Cases, machineapi.CaseResult{CaseId: c.ID, Status: cs, Score: max(c.Score, 0),
			TimeMs: c.CPUTime.Milliseconds(), WallMs: c.WallTime.Milliseconds(), MemoryKb: max(c.MemoryKB, 0),
			ExitCode: int32(c.ExitCode), Signal: int32(max(c.Signal, 0)), Message: clip(c.Message, maxMessage)})
	}
	if v.Subtasks != nil {
		subs := make([]machineapi.SubtaskResult, 0, len(v.Subtasks))
		for _, st := range v.Subtasks {
			ss, ok := wireStatus[st.Status]
			if !ok {
				return machineapi.Verdict{}, fmt.Errorf("executor returned status %q for subtask %s", st.Status, st.ID)
			}
			subs = append(subs, machineapi.SubtaskResult{SubtaskId: st.ID, Status: ss, Score: max(st.Score, 0), MaxScore: max(st.MaxScore, 0)})
		}
		out.Subtasks = &subs
	}
	return out, nil
}

// subtasksOf converts a manifest's subtasks to the task's, case ids to
// indexes into the task's cases; nil when the manifest has none.
func subtasksOf(m *[]machineapi.Subtask, cases []engine.Case) ([]engine.Subtask, error) {
	if m == nil || len(*m) == 0 {
		return nil, nil
	}
	index := make(map[string]int, len(cases))
	for i, c := range cases {
		index[c.ID] = i
	}
	out := make([]engine.Subtask, 0, len(*m))
	for _, st := range *m {
		s := engine.Subtask{ID: st.SubtaskId, Scoring: engine.Scoring(st.Scoring)}
		for _, id := range st.Cases {
			i, ok := index[id]
			if !ok {
				return nil, fmt.Errorf("subtask %s names case %q, which the manifest does not have", st.SubtaskId, id)
			}
			s.Cases = append(s.Cases, i)
		}
		if st.DependsOn != nil {
			s.DependsOn = append(s.DependsOn, *st.DependsOn...)
		}
		out = append(out, s)
	}
	return out, nil
}

var wireInfra = map[engine.InfraClass]machineapi.InfraErrorCode{
	engine.InfraDaemonUnreachable:  machineapi.InfraErrorCodeDaemonUnreachable,
	engine.InfraImageMissing:       machineapi.InfraErrorCodeImageMissing,
	engine.InfraContainerCreate:    machineapi.InfraErrorCodeContainerCreate,
	engine.InfraResourceExhausted:  machineapi.InfraErrorCodeResourceExhausted,
	engine.InfraCorruptInput:       machineapi.InfraErrorCodeCorruptInput,
	engine.InfraCancelled:          machineapi.InfraErrorCodeCancelled,
	engine.InfraConfig:             machineapi.InfraErrorCodeConfig,
	engine.InfraCheckerFailed:      machineapi.InfraErrorCodeCheckerFailed,
	engine.InfraJudgeDBUnreachable: machineapi.InfraErrorCodeJudgeDbUnreachable,
	engine.InfraJudgeDBRights:      machineapi.InfraErrorCodeJudgeDbRights,
	engine.InfraInternal:           machineapi.InfraErrorCodeInternal,
}

// dependencyFault: err says a dependency of the node itself is down (the
// Docker daemon or the runtime image, the judge database), so the next job
// would fail the same way; the node's probe checks exactly these.
func dependencyFault(err error) bool {
	switch engine.ClassOf(err) {
	case engine.InfraDaemonUnreachable, engine.InfraImageMissing, engine.InfraJudgeDBUnreachable:
		return true
	}
	return false
}

// infraOf maps an infrastructure error to the wire error.
func infraOf(err error) *machineapi.InfraError {
	code, ok := wireInfra[engine.ClassOf(err)]
	if !ok {
		code = machineapi.InfraErrorCodeInternal
	}
	return &machineapi.InfraError{Code: code, Message: clip(err.Error(), maxMessage)}
}

func jobKey(jobID string, epoch int64) string { return jobID + "/" + strconv.FormatInt(epoch, 10) }
