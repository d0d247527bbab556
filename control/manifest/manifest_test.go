package manifest_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/manifest"
)

const d1 = "f251ddc12234e0da8d3b778bd0f7463fb477f16f47757f5617dc8b4ff4d4f14a"

func codeManifest() manifest.Manifest {
	return manifest.Manifest{Kind: manifest.KindCode, Limits: manifest.Limits{TimeMs: 1000, MemoryMb: 256, OutputKb: 64},
		Checker: manifest.Checker{Type: "tolerant"},
		Cases:   []manifest.Case{{CaseID: "1", InputSha256: d1, InputSize: 4, OutputSha256: d1, OutputSize: 4, Weight: 100}}}
}

func sqlManifest() manifest.Manifest {
	return manifest.Manifest{Kind: manifest.KindSQL, Checker: manifest.Checker{Type: "exact"},
		SQL: &manifest.SQL{ProblemKind: "SELECT", SchemaSQL: "CREATE TABLE t (a INT)", ReferenceSQL: "SELECT a FROM t",
			StatementTimeoutMs: 1000, MaxRows: 10, MaxBytes: 1 << 20}}
}

func TestValidateRefusesWhatTheJudgesCannotRun(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	cases := map[string]struct {
		m     func() manifest.Manifest
		field string
	}{
		"zero time":          {func() manifest.Manifest { m := codeManifest(); m.Limits.TimeMs = 0; return m }, "limits.timeMs"},
		"negative memory":    {func() manifest.Manifest { m := codeManifest(); m.Limits.MemoryMb = -1; return m }, "limits.memoryMb"},
		"no output limit":    {func() manifest.Manifest { m := codeManifest(); m.Limits.OutputKb = 0; return m }, "limits.outputKb"},
		"unknown checker":    {func() manifest.Manifest { m := codeManifest(); m.Checker.Type = "fuzzy"; return m }, "checker.type"},
		"float without tol":  {func() manifest.Manifest { m := codeManifest(); m.Checker.Type = "float"; return m }, "checker"},
		"special no program": {func() manifest.Manifest { m := codeManifest(); m.Checker.Type = "special"; return m }, "checker.special"},
		"no cases":           {func() manifest.Manifest { m := codeManifest(); m.Cases = nil; return m }, "cases"},
		"duplicate case": {func() manifest.Manifest {
			m := codeManifest()
			m.Cases = append(m.Cases, m.Cases[0])
			return m
		}, "cases[1].caseId"},
		"bad digest":      {func() manifest.Manifest { m := codeManifest(); m.Cases[0].InputSha256 = strings.ToUpper(d1); return m }, "cases[0]"},
		"sql without ddl": {func() manifest.Manifest { m := sqlManifest(); m.SQL.SchemaSQL = " "; return m }, "sql.schemaSql"},
		"sql no timeout":  {func() manifest.Manifest { m := sqlManifest(); m.SQL.StatementTimeoutMs = 0; return m }, "sql.statementTimeoutMs"},
		"select needs exactly one answer": {func() manifest.Manifest {
			m := sqlManifest()
			m.SQL.Expected = &manifest.ResultSet{Columns: []string{"a"}}
			return m
		}, "sql"},
		"dml without verification": {func() manifest.Manifest {
			m := sqlManifest()
			m.SQL.ProblemKind, m.SQL.ReferenceSQL = "DML", ""
			return m
		}, "sql.verification"},
		"dml with reference": {func() manifest.Manifest {
			m := sqlManifest()
			m.SQL.ProblemKind = "DML"
			m.SQL.Verification = []manifest.Verification{{Query: "SELECT a FROM t", Expected: manifest.ResultSet{Columns: []string{"a"}}}}
			return m
		}, "sql"},
		"expected above row cap": {func() manifest.Manifest {
			m := sqlManifest()
			m.SQL.ReferenceSQL = ""
			rows := make([][]*string, 11)
			for i := range rows {
				rows[i] = []*string{s("1")}
			}
			m.SQL.Expected = &manifest.ResultSet{Columns: []string{"a"}, Rows: rows}
			return m
		}, "sql.expected.rows"},
		"sql with cases": {func() manifest.Manifest { m := sqlManifest(); m.Cases = codeManifest().Cases; return m }, "cases"},
		"code with sql":  {func() manifest.Manifest { m := codeManifest(); m.SQL = sqlManifest().SQL; return m }, "sql"},
		"unknown kind":   {func() manifest.Manifest { m := codeManifest(); m.Kind = "BINARY"; return m }, "kind"},
	}
	for name, c := range cases {
		m := c.m()
		err := m.Validate()
		require.ErrorIs(t, err, manifest.ErrInvalid, name)
		var e *manifest.Error
		require.ErrorAs(t, err, &e, name)
		require.Equal(t, c.field, e.Field, name)
	}
	good, sq := codeManifest(), sqlManifest()
	require.NoError(t, good.Validate())
	require.NoError(t, sq.Validate())
}

func TestCanonicalIsStableAndRoundTrips(t *testing.T) {
	t.Parallel()
	a, b := sqlManifest(), sqlManifest()
	ba, da, err := a.Canonical()
	require.NoError(t, err)
	_, db, err := b.Canonical()
	require.NoError(t, err)
	require.Equal(t, da, db, "same content, same digest")
	require.Contains(t, string(ba), `"cases":[]`, "the contract requires cases, even empty")
	back, err := manifest.Parse(ba)
	require.NoError(t, err)
	_, dc, err := back.Canonical()
	require.NoError(t, err)
	require.Equal(t, da, dc)
	var generic map[string]any
	require.NoError(t, json.Unmarshal(ba, &generic))
	_, err = manifest.Parse([]byte(`{"kind":"CODE","bogus":1}`))
	require.ErrorIs(t, err, manifest.ErrInvalid, "unknown fields are refused")
}

func TestLanguagesMapToPools(t *testing.T) {
	t.Parallel()
	for lang, pool := range map[string]string{"cpp17": "cpp", "java17": "java", "python3": "python", "arkts": "arkts", "mysql": "mysql"} {
		got, err := manifest.PoolForLanguage(lang)
		require.NoError(t, err)
		require.Equal(t, pool, got)
	}
	_, err := manifest.PoolForLanguage("brainfuck")
	require.ErrorIs(t, err, manifest.ErrInvalid)
}

func specialManifest(sp manifest.SpecialChecker) manifest.Manifest {
	m := codeManifest()
	sp.Language, sp.SourceSha256, sp.SourceSize = "cpp17", d1, 10
	m.Checker = manifest.Checker{Type: "special", Special: &sp}
	return m
}

func TestSpecialCheckerProtocolFields(t *testing.T) {
	t.Parallel()
	const d2 = "0000000000000000000000000000000000000000000000000000000000000002"
	bad := map[string]struct {
		sp    manifest.SpecialChecker
		field string
	}{
		"unknown protocol":   {manifest.SpecialChecker{Protocol: "icpc"}, "checker.special.protocol"},
		"points for legacy":  {manifest.SpecialChecker{MaxPoints: 10}, "checker.special.maxPoints"},
		"negative maxPoints": {manifest.SpecialChecker{Protocol: "score", MaxPoints: -1}, "checker.special.maxPoints"},
		"huge maxPoints":     {manifest.SpecialChecker{Protocol: "score", MaxPoints: 1e12}, "checker.special.maxPoints"},
		"file with a path":   {manifest.SpecialChecker{Protocol: "testlib", Files: []manifest.CheckerFile{{Name: "../testlib.h", Sha256: d2, Size: 1}}}, "checker.special.files[0].name"},
		"hidden file":        {manifest.SpecialChecker{Protocol: "testlib", Files: []manifest.CheckerFile{{Name: ".h", Sha256: d2, Size: 1}}}, "checker.special.files[0].name"},
		"duplicate file":     {manifest.SpecialChecker{Protocol: "testlib", Files: []manifest.CheckerFile{{Name: "a.h", Sha256: d2, Size: 1}, {Name: "a.h", Sha256: d1, Size: 1}}}, "checker.special.files[1].name"},
		"file digest":        {manifest.SpecialChecker{Protocol: "testlib", Files: []manifest.CheckerFile{{Name: "a.h", Sha256: "x", Size: 1}}}, "checker.special.files[0].sha256"},
		"file too large":     {manifest.SpecialChecker{Protocol: "testlib", Files: []manifest.CheckerFile{{Name: "a.h", Sha256: d2, Size: 5 << 20}}}, "checker.special.files[0].size"},
		"too many files":     {manifest.SpecialChecker{Protocol: "testlib", Files: make([]manifest.CheckerFile, 17)}, "checker.special.files"},
	}
	for name, tc := range bad {
		m := specialManifest(tc.sp)
		err := m.Validate()
		var ve *manifest.Error
		require.ErrorAs(t, err, &ve, name)
		require.Equal(t, tc.field, ve.Field, name)
	}

	// testlib with its header: valid, and the header is an artifact of the
	// manifest (a node may download it).
	m := specialManifest(manifest.SpecialChecker{Protocol: "testlib", MaxPoints: 100,
		Files: []manifest.CheckerFile{{Name: "testlib.h", Sha256: d2, Size: 7}}})
	require.NoError(t, m.Validate())
	require.Equal(t, int64(7), m.Digests()[d2])
}

// An old manifest (no protocol) keeps its canonical form and digest, and an
// explicit "legacy" publishes to the same manifest.
func TestOldSpecialManifestsKeepTheirDigest(t *testing.T) {
	t.Parallel()
	old := `{"kind":"CODE","limits":{"timeMs":1000,"memoryMb":256,"outputKb":64},` +
		`"checker":{"type":"special","special":{"language":"cpp17","sourceSha256":"` + d1 + `","sourceSize":10}},` +
		`"cases":[{"caseId":"1","inputSha256":"` + d1 + `","inputSize":4,"outputSha256":"` + d1 + `","outputSize":4,"weight":100}]}`
	m, err := manifest.Parse([]byte(old))
	require.NoError(t, err)
	b, digest, err := m.Canonical()
	require.NoError(t, err)
	require.JSONEq(t, old, string(b))
	require.NotContains(t, string(b), "protocol")

	explicit := strings.Replace(old, `"sourceSize":10}`, `"sourceSize":10,"protocol":"legacy"}`, 1)
	m2, err := manifest.Parse([]byte(explicit))
	require.NoError(t, err)
	_, digest2, err := m2.Canonical()
	require.NoError(t, err)
	require.Equal(t, digest, digest2)
}

// File I/O is optional: a manifest without io keeps its exact canonical
// bytes and digest (pinned here), io names at least one plain file the
// build does not use, and a SQL manifest has none.
func TestFileIO(t *testing.T) {
	t.Parallel()
	old := `{"kind":"CODE","limits":{"timeMs":1000,"memoryMb":256,"outputKb":64},"checker":{"type":"tolerant"},` +
		`"cases":[{"caseId":"1","inputSha256":"` + d1 + `","inputSize":4,"outputSha256":"` + d1 + `","outputSize":4,"weight":100}]}`
	m, err := manifest.Parse([]byte(old))
	require.NoError(t, err)
	b, digest, err := m.Canonical()
	require.NoError(t, err)
	require.Equal(t, old, string(b), "an old manifest's canonical JSON is unchanged")
	// sha256 of exactly those bytes (sha256sum agrees), as before io existed.
	require.Equal(t, "ef37c920a3b575de6c8ef44d49d573af1b92180c5e6bf8ab96b1fabe96201acf", digest)

	withIO := strings.TrimSuffix(old, "}") + `,"io":{"inputFile":"sum.in","outputFile":"sum.out"}}`
	m, err = manifest.Parse([]byte(withIO))
	require.NoError(t, err)
	require.Equal(t, &manifest.FileIO{InputFile: "sum.in", OutputFile: "sum.out"}, m.IO)
	b, digestIO, err := m.Canonical()
	require.NoError(t, err)
	require.JSONEq(t, withIO, string(b))
	require.NotEqual(t, digest, digestIO)

	for name, io := range map[string]struct {
		io    manifest.FileIO
		field string
	}{
		"no file":        {manifest.FileIO{Stdio: true}, "io"},
		"same names":     {manifest.FileIO{InputFile: "a.txt", OutputFile: "a.txt"}, "io.outputFile"},
		"path":           {manifest.FileIO{InputFile: "../in"}, "io.inputFile"},
		"dir":            {manifest.FileIO{OutputFile: "a/b"}, "io.outputFile"},
		"hidden":         {manifest.FileIO{OutputFile: ".out"}, "io.outputFile"},
		"the binary":     {manifest.FileIO{OutputFile: "main"}, "io.outputFile"},
		"the source":     {manifest.FileIO{InputFile: "main.py"}, "io.inputFile"},
		"a class file":   {manifest.FileIO{OutputFile: "Main.class"}, "io.outputFile"},
		"plus in a name": {manifest.FileIO{InputFile: "a+b.in"}, "io.inputFile"},
	} {
		m := codeManifest()
		m.IO = &io.io
		err := m.Validate()
		var ve *manifest.Error
		require.ErrorAs(t, err, &ve, name)
		require.Equal(t, io.field, ve.Field, name)
	}
	s := sqlManifest()
	s.IO = &manifest.FileIO{InputFile: "a.in"}
	require.Error(t, s.Validate())
}

// Subtasks: every case in exactly one, known scoring, dependencies on earlier
// subtasks only; an empty list is stored as absent, so a manifest without
// subtasks keeps its digest.
func TestSubtasks(t *testing.T) {
	t.Parallel()
	m := codeManifest()
	m.Cases = append(m.Cases, manifest.Case{CaseID: "2", InputSha256: d1, InputSize: 4, OutputSha256: d1, OutputSize: 4, Weight: 50})
	_, plain, err := m.Canonical()
	require.NoError(t, err)
	m.Subtasks = []manifest.Subtask{}
	require.NoError(t, m.Validate())
	b, same, err := m.Canonical()
	require.NoError(t, err)
	require.Equal(t, plain, same, "an empty subtask list is no subtasks")
	require.NotContains(t, string(b), "subtasks")

	ok := []manifest.Subtask{{SubtaskID: "easy", Scoring: "min", Cases: []string{"1"}},
		{SubtaskID: "full", Scoring: "sum", Cases: []string{"2"}, DependsOn: []string{"easy"}}}
	m.Subtasks = ok
	require.NoError(t, m.Validate())
	b, _, err = m.Canonical()
	require.NoError(t, err)
	back, err := manifest.Parse(b)
	require.NoError(t, err)
	require.Equal(t, ok, back.Subtasks)

	for name, tc := range map[string]struct {
		subs  []manifest.Subtask
		field string
	}{
		"unknown scoring":  {[]manifest.Subtask{{SubtaskID: "a", Scoring: "max", Cases: []string{"1", "2"}}}, "subtasks[0].scoring"},
		"case in none":     {[]manifest.Subtask{{SubtaskID: "a", Scoring: "sum", Cases: []string{"1"}}}, "subtasks"},
		"case in two":      {[]manifest.Subtask{{SubtaskID: "a", Scoring: "sum", Cases: []string{"1", "2"}}, {SubtaskID: "b", Scoring: "sum", Cases: []string{"2"}}}, "subtasks[1].cases[0]"},
		"unknown case":     {[]manifest.Subtask{{SubtaskID: "a", Scoring: "sum", Cases: []string{"1", "2", "3"}}}, "subtasks[0].cases[2]"},
		"no cases":         {[]manifest.Subtask{{SubtaskID: "a", Scoring: "sum"}, {SubtaskID: "b", Scoring: "sum", Cases: []string{"1", "2"}}}, "subtasks[0].cases"},
		"duplicate id":     {[]manifest.Subtask{{SubtaskID: "a", Scoring: "sum", Cases: []string{"1"}}, {SubtaskID: "a", Scoring: "sum", Cases: []string{"2"}}}, "subtasks[1].subtaskId"},
		"later dependency": {[]manifest.Subtask{{SubtaskID: "a", Scoring: "sum", Cases: []string{"1"}, DependsOn: []string{"b"}}, {SubtaskID: "b", Scoring: "sum", Cases: []string{"2"}}}, "subtasks[0].dependsOn[0]"},
		"self dependency":  {[]manifest.Subtask{{SubtaskID: "a", Scoring: "sum", Cases: []string{"1", "2"}, DependsOn: []string{"a"}}}, "subtasks[0].dependsOn[0]"},
		"bad id":           {[]manifest.Subtask{{SubtaskID: "a b", Scoring: "sum", Cases: []string{"1", "2"}}}, "subtasks[0].subtaskId"},
	} {
		m := codeManifest()
		m.Cases = append(m.Cases, manifest.Case{CaseID: "2", InputSha256: d1, InputSize: 4, OutputSha256: d1, OutputSize: 4, Weight: 50})
		m.Subtasks = tc.subs
		var ve *manifest.Error
		require.ErrorAs(t, m.Validate(), &ve, name)
		require.Equal(t, tc.field, ve.Field, name)
	}
	s := sqlManifest()
	s.Subtasks = ok
	require.Error(t, s.Validate())
}
