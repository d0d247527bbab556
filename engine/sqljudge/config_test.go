package sqljudge

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := Config{AdminDSN: "judge:s3cret@tcp(127.0.0.1:33062)/", NodeID: "node-1"}
	require.NoError(t, ok.Validate())

	bad := map[string]func(*Config){
		"empty DSN":        func(c *Config) { c.AdminDSN = "" },
		"DSN without user": func(c *Config) { c.AdminDSN = "tcp(127.0.0.1:1)/" },
		"empty node":       func(c *Config) { c.NodeID = "" },
		"node with quote":  func(c *Config) { c.NodeID = "a'b" },
		"registry name":    func(c *Config) { c.RegistrySchema = "x`y" },
		"student host":     func(c *Config) { c.StudentHost = "a'b" },
		"connections":      func(c *Config) { c.StudentConnections = -1 },
		"admin conns":      func(c *Config) { c.AdminMaxOpenConns = 1 },
		"negative grace":   func(c *Config) { c.KillGrace = -time.Second },
		"message bytes":    func(c *Config) { c.MaxMessageBytes = 10 },
	}
	all := ok
	for name, mod := range bad {
		c := ok
		mod(&c)
		require.Error(t, c.Validate(), name)
		if name != "DSN without user" { // the empty DSN stands for both DSN problems
			mod(&all)
		}
	}
	// Every problem at once, not the first one found.
	msg := all.Validate().Error()
	for _, part := range []string{"admin DSN is empty", "node id", "registry schema", "student host",
		"student connections", "admin max open conns", "durations", "max message bytes"} {
		require.Contains(t, msg, part)
	}
}

func TestConfigErrorsNeverQuoteTheDSN(t *testing.T) {
	t.Parallel()
	c := Config{AdminDSN: "judge:pw-s3cret@tcp(127.0.0.1:33062)/?badparam=%zz", NodeID: "n"}
	err := c.Validate()
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret")
	_, err = New(Config{AdminDSN: "judge:pw-s3cret@bogus(", NodeID: "n"})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret")
	require.Equal(t, engine.InfraConfig, engine.ClassOf(err))
}

func TestValidateProblem(t *testing.T) {
	t.Parallel()
	good := func() *engine.SQLProblem {
		return &engine.SQLProblem{Kind: engine.SQLKindSelect, Schema: "CREATE TABLE t (x INT)", Reference: "SELECT x FROM t",
			StatementTimeout: time.Second, MaxRows: 10, MaxBytes: 100}
	}
	require.NoError(t, ValidateProblem(good()))
	dml := &engine.SQLProblem{Kind: engine.SQLKindDML, Schema: "CREATE TABLE t (x INT)",
		Verification:     []engine.SQLVerification{{Query: "SELECT x FROM t", Expected: engine.ResultSet{Columns: []string{"x"}}}},
		StatementTimeout: time.Second, MaxRows: 10, MaxBytes: 100}
	require.NoError(t, ValidateProblem(dml))

	bad := map[string]func(*engine.SQLProblem){
		"no schema":          func(p *engine.SQLProblem) { p.Schema = " " },
		"no limit":           func(p *engine.SQLProblem) { p.StatementTimeout = 0 },
		"no row cap":         func(p *engine.SQLProblem) { p.MaxRows = 0 },
		"no byte cap":        func(p *engine.SQLProblem) { p.MaxBytes = 0 },
		"unknown kind":       func(p *engine.SQLProblem) { p.Kind = "DDL" },
		"neither ref nor ex": func(p *engine.SQLProblem) { p.Reference = "" },
		"both ref and ex": func(p *engine.SQLProblem) {
			p.Expected = &engine.ResultSet{Columns: []string{"x"}}
		},
		"ragged expected": func(p *engine.SQLProblem) {
			p.Reference = ""
			p.Expected = &engine.ResultSet{Columns: []string{"x"}, Rows: [][]*string{{nil, nil}}}
		},
		"types mismatch": func(p *engine.SQLProblem) {
			p.Reference = ""
			p.Expected = &engine.ResultSet{Columns: []string{"x"}, Types: []string{"INT", "INT"}}
		},
		"select with verification": func(p *engine.SQLProblem) {
			p.Verification = dml.Verification
		},
		"dml without verification": func(p *engine.SQLProblem) { p.Kind = engine.SQLKindDML; p.Reference = "" },
	}
	for name, mod := range bad {
		p := good()
		mod(p)
		err := ValidateProblem(p)
		require.Error(t, err, name)
		require.True(t, errors.Is(err, ErrInvalidProblem), name)
	}
	require.Error(t, ValidateProblem(nil))
}

func TestScrub(t *testing.T) {
	t.Parallel()
	n := namesFor("node", "job", 1)
	sc := newScrubber(n.User, n.DB, "127.0.0.1", 200)
	msg := sc.scrub("Access denied for user '" + n.User + "'@'127.0.0.1' to database '" + n.DB + "' reading /var/lib/mysql/x.ibd; check your MariaDB server version")
	require.NotContains(t, msg, n.User)
	require.NotContains(t, msg, n.DB)
	require.NotContains(t, msg, "127.0.0.1")
	require.NotContains(t, msg, "/var/lib")
	require.NotContains(t, msg, "MariaDB")
	require.Contains(t, msg, "'student'@'host'")
	require.Contains(t, msg, "student_db")
	require.LessOrEqual(t, len(sc.scrub(strings.Repeat("é", 500))), 200)
}

func TestNamesFor(t *testing.T) {
	t.Parallel()
	a, b := namesFor("n", "1001", 1), namesFor("n", "1002", 1)
	require.NotEqual(t, a, b)
	require.NotEqual(t, a, namesFor("n", "1001", 2))
	require.NotEqual(t, a, namesFor("m", "1001", 1))
	require.Equal(t, a, namesFor("n", "1001", 1))
	require.LessOrEqual(t, len(a.User), 32)
	require.Regexp(t, `^[a-z0-9]+$`, a.DB+a.User)
}
