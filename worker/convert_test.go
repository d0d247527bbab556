package worker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/engine"
)

func TestVerdictOfBoundsAndMaps(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 40<<10) // 80 KiB of two-byte runes
	v, err := verdictOf(engine.Verdict{Status: engine.StatusWrongAnswer, Score: 3, MaxScore: 5, CompileLog: long, Message: long,
		Cases: []engine.CaseResult{
			{ID: "a", Status: engine.StatusAccepted, Score: 3, CPUTime: 1500 * time.Microsecond, WallTime: 20 * time.Millisecond, MemoryKB: 900},
			{ID: "b", Status: engine.StatusRuntimeError, ExitCode: 139, Signal: 11, Message: long},
		}})
	require.NoError(t, err)
	require.Equal(t, machineapi.VerdictStatusWA, v.Status)
	require.LessOrEqual(t, len(v.CompileLog), 64<<10)
	require.LessOrEqual(t, len(v.Message), 4<<10)
	require.LessOrEqual(t, len(v.Cases[1].Message), 4<<10)
	for _, s := range []string{v.CompileLog, v.Message, v.Cases[1].Message} {
		require.True(t, utf8.ValidString(s), "never cut inside a rune")
	}
	require.Equal(t, machineapi.CaseResult{CaseId: "a", Status: machineapi.VerdictStatusAC, Score: 3, TimeMs: 1, WallMs: 20, MemoryKb: 900}, v.Cases[0])
	require.Equal(t, int32(139), v.Cases[1].ExitCode)
	require.Equal(t, int32(11), v.Cases[1].Signal)

	_, err = verdictOf(engine.Verdict{Status: "SYSTEM_ERROR"})
	require.Error(t, err, "an infrastructure word is never a verdict")
	_, err = verdictOf(engine.Verdict{Status: engine.StatusAccepted, Cases: []engine.CaseResult{{ID: "a", Status: "??"}}})
	require.Error(t, err)
}

func TestInfraOfMapsEveryClass(t *testing.T) {
	t.Parallel()
	for class, code := range wireInfra {
		require.Equal(t, code, infraOf(engine.Infra(class, errors.New("x"))).Code)
		require.Equal(t, string(class), string(code), "engine classes and wire codes share their words")
	}
	require.Equal(t, machineapi.InfraErrorCodeInternal, infraOf(errors.New("plain")).Code)
	require.Equal(t, machineapi.InfraErrorCodeCancelled, infraOf(context0()).Code)
	require.LessOrEqual(t, len(infraOf(engine.Infraf(engine.InfraConfig, "%s", strings.Repeat("x", 10000))).Message), 4<<10)
}

func TestTaskConversion(t *testing.T) {
	t.Parallel()
	wall := int64(3000)
	l := limitsOf(machineapi.Limits{TimeMs: 1000, MemoryMb: 256, OutputKb: 64, WallMs: &wall})
	require.Equal(t, engine.Limits{CPUTime: time.Second, WallTime: 3 * time.Second, MemoryBytes: 256 << 20, OutputBytes: 64 << 10}, l)
	abs, rel := 1e-6, 1e-9
	c, err := checkerOf(machineapi.Checker{Type: machineapi.CheckerTypeFloat, AbsTol: &abs, RelTol: &rel})
	require.NoError(t, err)
	require.Equal(t, engine.Checker{Kind: engine.CheckerFloat, AbsTol: abs, RelTol: rel}, c)
	_, err = checkerOf(machineapi.Checker{Type: "fuzzy"})
	require.Error(t, err)
	ref := "SELECT 1"
	types := []string{"INT"}
	one := "1"
	p, err := sqlProblemOf(&machineapi.SqlProblem{ProblemKind: machineapi.SqlProblemKindDml, SchemaSql: "CREATE TABLE t (a INT)",
		ReferenceSql: &ref, StatementTimeoutMs: 1500, MaxRows: 10, MaxBytes: 100,
		Verification: []machineapi.SqlVerification{{Query: "SELECT a FROM t", Ordered: true,
			Expected: machineapi.ResultSet{Columns: []string{"a"}, Types: &types, Rows: [][]*string{{&one}}}}}})
	require.NoError(t, err)
	require.Equal(t, engine.SQLKindDML, p.Kind)
	require.Equal(t, 1500*time.Millisecond, p.StatementTimeout)
	require.Equal(t, "SELECT 1", p.Reference)
	require.Equal(t, []string{"INT"}, p.Verification[0].Expected.Types)
	_, err = sqlProblemOf(nil)
	require.Error(t, err)
}

func context0() error { return context.Canceled }

func TestCheckerOfProtocols(t *testing.T) {
	t.Parallel()
	// A manifest published before the protocol field: legacy.
	c, err := checkerOf(machineapi.Checker{Type: machineapi.CheckerTypeSpecial,
		Special: &machineapi.SpecialChecker{Language: "cpp17", SourceSha256: "x", SourceSize: 1}})
	require.NoError(t, err)
	require.Equal(t, engine.ProtocolLegacy, c.SpecialProtocol)
	require.Zero(t, c.MaxPoints)

	p, pts := machineapi.CheckerProtocolTestlib, 40.0
	c, err = checkerOf(machineapi.Checker{Type: machineapi.CheckerTypeSpecial,
		Special: &machineapi.SpecialChecker{Language: "cpp17", Protocol: &p, MaxPoints: &pts}})
	require.NoError(t, err)
	require.Equal(t, engine.ProtocolTestlib, c.SpecialProtocol)
	require.Equal(t, 40.0, c.MaxPoints)

	bad := machineapi.CheckerProtocol("icpc")
	_, err = checkerOf(machineapi.Checker{Type: machineapi.CheckerTypeSpecial, Special: &machineapi.SpecialChecker{Protocol: &bad}})
	require.Error(t, err)
}

func TestPartialVerdictOnTheWire(t *testing.T) {
	t.Parallel()
	require.Equal(t, contracts.ScoreScale, engine.ScoreScale, "one scale on both sides")
	v, err := verdictOf(engine.Verdict{Status: engine.StatusPartial, Score: 2.5, MaxScore: 4, Cases: []engine.CaseResult{
		{ID: "a", Status: engine.StatusAccepted, Score: 2}, {ID: "b", Status: engine.StatusPartial, Score: 0.5, Message: "points 0.25"}}})
	require.NoError(t, err)
	require.Equal(t, machineapi.VerdictStatusPARTIAL, v.Status)
	require.Equal(t, 2.5, v.Score)
	require.Equal(t, machineapi.VerdictStatusPARTIAL, v.Cases[1].Status)
	require.Equal(t, 0.5, v.Cases[1].Score)
}

// A manifest's io becomes the task's file I/O; absent is stdin and stdout.
func TestFileIOOf(t *testing.T) {
	t.Parallel()
	require.Equal(t, engine.FileIO{}, fileIOOf(nil))
	in, out, yes := "sum.in", "sum.out", true
	require.Equal(t, engine.FileIO{InputFile: "sum.in", OutputFile: "sum.out", Stdio: true},
		fileIOOf(&machineapi.FileIO{InputFile: &in, OutputFile: &out, Stdio: &yes}))
	require.Equal(t, engine.FileIO{OutputFile: "sum.out"}, fileIOOf(&machineapi.FileIO{OutputFile: &out}))
}

// An interactive checker becomes the engine's interactor: testlib's
// convention whatever the manifest says, and its own CPU limit.
func TestCheckerOfInteractive(t *testing.T) {
	t.Parallel()
	ms := int64(2500)
	c, err := checkerOf(machineapi.Checker{Type: machineapi.CheckerTypeInteractive,
		Special: &machineapi.SpecialChecker{Language: "cpp17", SourceSha256: "x", SourceSize: 1, TimeMs: &ms}})
	require.NoError(t, err)
	require.Equal(t, engine.CheckerInteractive, c.Kind)
	require.Equal(t, engine.ProtocolTestlib, c.SpecialProtocol)
	require.Equal(t, 2500*time.Millisecond, c.InteractorTime)
}

// A communication checker carries its process count to the engine.
func TestCheckerOfCommunication(t *testing.T) {
	t.Parallel()
	n := 3
	c, err := checkerOf(machineapi.Checker{Type: machineapi.CheckerTypeCommunication,
		Special: &machineapi.SpecialChecker{Language: "cpp17", SourceSha256: "x", SourceSize: 1, Processes: &n}})
	require.NoError(t, err)
	require.Equal(t, engine.CheckerCommunication, c.Kind)
	require.Equal(t, engine.ProtocolTestlib, c.SpecialProtocol)
	require.Equal(t, 3, c.Processes)
}
