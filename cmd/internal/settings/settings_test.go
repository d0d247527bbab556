package settings

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

func envMap(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

type bundle struct {
	fs     *FlagSet
	listen *string
	ttl    *time.Duration
	conns  *int
	json   *bool
	dsn    *string
}

func setup(env map[string]string) *bundle {
	fs := NewFlagSet("serve", envMap(env))
	return &bundle{
		fs:     fs,
		listen: fs.String("listen", "KECE_LISTEN", "127.0.0.1:8080", "address"),
		ttl:    fs.Duration("lease-ttl", "KECE_LEASE_TTL", time.Minute, "lease"),
		conns:  fs.Int("db-conns", "KECE_DB_CONNS", 32, "connections"),
		json:   fs.Bool("log-json", "KECE_LOG_JSON", false, "json logs"),
		dsn:    fs.Secret("mysql-dsn", "KECE_MYSQL_DSN", "KECE_MYSQL_DSN_FILE", "control database DSN"),
	}
}

func secretFile(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	require.NoError(t, os.Chmod(p, mode))
	return p
}

func TestPrecedenceFlagThenEnvThenDefault(t *testing.T) {
	t.Parallel()
	b := setup(map[string]string{"KECE_LISTEN": "0.0.0.0:1", "KECE_LEASE_TTL": "90s", "KECE_LOG_JSON": "1", "KECE_DB_CONNS": ""})
	require.NoError(t, b.fs.Parse([]string{"--listen", "127.0.0.1:2"}))
	require.Equal(t, "127.0.0.1:2", *b.listen, "the flag wins over the variable")
	require.Equal(t, 90*time.Second, *b.ttl, "the variable wins over the default")
	require.True(t, *b.json)
	require.Equal(t, 32, *b.conns, "an empty variable is unset")
	require.Equal(t, "--listen", b.fs.Source("listen"))
	require.Equal(t, "KECE_LEASE_TTL", b.fs.Source("lease-ttl"))
}

func TestBadValuesNameTheirSettingAndAllAreReported(t *testing.T) {
	t.Parallel()
	b := setup(map[string]string{"KECE_LEASE_TTL": "sixty", "KECE_DB_CONNS": "many", "KECE_LOG_JSON": "maybe"})
	err := b.fs.Parse(nil)
	require.True(t, IsConfigError(err))
	require.ErrorContains(t, err, `KECE_LEASE_TTL: "sixty": not a duration`)
	require.ErrorContains(t, err, `KECE_DB_CONNS: "many"`)
	require.ErrorContains(t, err, `KECE_LOG_JSON: "maybe"`)
	require.Equal(t, time.Minute, *b.ttl, "a bad value is refused, never half-applied")

	b = setup(nil)
	err = b.fs.Parse([]string{"--lease-ttl", "-5s"})
	require.True(t, IsConfigError(err))
	require.ErrorContains(t, err, "must not be negative")

	b = setup(nil)
	err = b.fs.Parse([]string{"--no-such-flag"})
	require.True(t, IsConfigError(err))
	require.ErrorContains(t, err, "no-such-flag")
}

func TestSecretFromFile(t *testing.T) {
	t.Parallel()
	p := secretFile(t, "kece:pw@tcp(db:3306)/kece\n", 0o600)
	b := setup(map[string]string{"KECE_MYSQL_DSN_FILE": p})
	require.NoError(t, b.fs.Parse(nil))
	require.Equal(t, "kece:pw@tcp(db:3306)/kece", *b.dsn, "read from the file, newline trimmed")

	// 0640 (root:service) is accepted too.
	b = setup(nil)
	require.NoError(t, b.fs.Parse([]string{"--mysql-dsn-file", secretFile(t, "x@tcp(y)/z", 0o640)}))
	require.Equal(t, "x@tcp(y)/z", *b.dsn)

	// Straight from the variable.
	b = setup(map[string]string{"KECE_MYSQL_DSN": "a@tcp(b)/c"})
	require.NoError(t, b.fs.Parse(nil))
	require.Equal(t, "a@tcp(b)/c", *b.dsn)
}

func TestSecretFileRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"world readable", map[string]string{"KECE_MYSQL_DSN_FILE": secretFile(t, "x", 0o644)}, "KECE_MYSQL_DSN_FILE: " + "" /* path follows */},
		{"group writable", map[string]string{"KECE_MYSQL_DSN_FILE": secretFile(t, "x", 0o660)}, "has mode 0660"},
		{"missing", map[string]string{"KECE_MYSQL_DSN_FILE": "/nonexistent/dsn"}, "KECE_MYSQL_DSN_FILE: /nonexistent/dsn does not exist"},
		{"empty", map[string]string{"KECE_MYSQL_DSN_FILE": secretFile(t, " \n", 0o600)}, "is empty"},
		{"directory", map[string]string{"KECE_MYSQL_DSN_FILE": t.TempDir()}, "not a regular file"},
		{"both", map[string]string{"KECE_MYSQL_DSN": "a@tcp(b)/c", "KECE_MYSQL_DSN_FILE": secretFile(t, "x", 0o600)}, "not both"},
	}
	for _, c := range cases {
		b := setup(c.env)
		err := b.fs.Parse(nil)
		require.True(t, IsConfigError(err), c.name)
		require.ErrorContains(t, err, c.want, c.name)
	}
	b := setup(map[string]string{"KECE_MYSQL_DSN_FILE": secretFile(t, "x", 0o644)})
	require.ErrorContains(t, b.fs.Parse(nil), "has mode 0644")
}

func TestEveryFlagNeedsAVariable(t *testing.T) {
	t.Parallel()
	b := setup(nil)
	b.fs.Flags().String("sneaky", "", "registered around the loader")
	err := b.fs.Parse(nil)
	require.ErrorContains(t, err, "--sneaky was registered without an environment variable")

	_, err = ApplyEnv([]Flag{{Name: "x", Env: "lower", Set: func(string) error { return nil }}}, envMap(nil))
	require.ErrorContains(t, err, "--x has no valid environment variable")
}

func TestHelpListsVariables(t *testing.T) {
	t.Parallel()
	b := setup(nil)
	err := b.fs.Parse([]string{"-h"})
	require.ErrorIs(t, err, pflag.ErrHelp)
	require.False(t, IsConfigError(err))
	for _, want := range []string{"(env KECE_LISTEN)", "(env KECE_LEASE_TTL)", "(env KECE_MYSQL_DSN_FILE)", "(default 1m)", "--lease-ttl duration"} {
		require.Contains(t, b.fs.Usage(), want)
	}
}

// ApplyEnv works for any flag package: here a hand-made flag, as a pflag
// adapter would pass it.
func TestApplyEnvGeneric(t *testing.T) {
	t.Parallel()
	var got []string
	set := func(v string) error {
		if v == "bad" {
			return errors.New("nope")
		}
		got = append(got, v)
		return nil
	}
	env := envMap(map[string]string{"KECE_A": "1", "KECE_B": "2", "KECE_C": "bad"})
	from, err := ApplyEnv([]Flag{
		{Name: "a", Env: "KECE_A", Set: set},
		{Name: "b", Env: "KECE_B", Changed: true, Set: set},
		{Name: "c", Env: "KECE_C", Set: set},
	}, env)
	require.Equal(t, []string{"1"}, got, "b was given on the command line")
	require.Equal(t, map[string]bool{"a": true}, from)
	var se *Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, "KECE_C", se.Setting)
}

func TestAliasCountsAsTheFlag(t *testing.T) {
	t.Parallel()
	fs := NewFlagSet("list", envMap(map[string]string{"KECE_OUTPUT": "json"}))
	out := fs.StringP("output", "o", "KECE_OUTPUT", "table", "table, json or yaml")
	require.NoError(t, fs.Parse([]string{"-o", "yaml"}))
	require.Equal(t, "yaml", *out, "-o given: the variable does not override it")

	fs = NewFlagSet("list", envMap(map[string]string{"KECE_OUTPUT": "json"}))
	out = fs.StringP("output", "o", "KECE_OUTPUT", "table", "table, json or yaml")
	require.NoError(t, fs.Parse(nil))
	require.Equal(t, "json", *out)
}

// An old name still sets the flag, counts as given (its variable does not
// override it) and is named in errors; it is hidden from help.
func TestDeprecatedNameIsAHiddenAlias(t *testing.T) {
	t.Parallel()
	newFS := func(env map[string]string) (*FlagSet, *time.Duration) {
		fs := NewFlagSet("run", envMap(env))
		d := fs.Duration("heartbeat-interval", "KECE_HEARTBEAT_INTERVAL", 5*time.Second, "heartbeat")
		fs.Deprecated("heartbeat", "heartbeat-interval")
		return fs, d
	}
	fs, d := newFS(map[string]string{"KECE_HEARTBEAT_INTERVAL": "9s"})
	require.NoError(t, fs.Parse([]string{"--heartbeat", "2s"}))
	require.Equal(t, 2*time.Second, *d)
	require.Equal(t, "--heartbeat", fs.Source("heartbeat-interval"))
	require.NotContains(t, fs.Usage(), "--heartbeat ")

	fs, _ = newFS(nil)
	err := fs.Parse([]string{"--heartbeat=-1s"})
	require.True(t, IsConfigError(err))
	require.ErrorContains(t, err, `--heartbeat: "-1s": must not be negative`)
}

// Bad values on the command line do not stop the parse: all are named at
// once, with the variables' and the secrets' problems.
func TestEveryBadCommandLineValueIsReported(t *testing.T) {
	t.Parallel()
	b := setup(map[string]string{"KECE_MYSQL_DSN_FILE": "/nonexistent/dsn"})
	err := b.fs.Parse([]string{"--lease-ttl=-1s", "--db-conns", "many", "--log-json=maybe", "--listen", "x:1"})
	require.True(t, IsConfigError(err))
	for _, want := range []string{`--lease-ttl: "-1s": must not be negative`, `--db-conns: "many": not a whole number`,
		`--log-json: "maybe"`, "KECE_MYSQL_DSN_FILE: /nonexistent/dsn does not exist"} {
		require.ErrorContains(t, err, want)
	}
	require.Equal(t, "x:1", *b.listen, "good values are kept")
	b = setup(nil)
	require.NoError(t, b.fs.Parse([]string{"--lease-ttl", "2d"}))
	require.Equal(t, 48*time.Hour, *b.ttl, "durations take days")
}

// ParseWithEnv: each flag reads PREFIX_<FLAG>; the command line wins; a bad
// value is an *Error naming the variable.
func TestParseWithEnvNamingRule(t *testing.T) {
	t.Parallel()
	newFS := func() (*flag.FlagSet, *int, *time.Duration, *string) {
		fs := flag.NewFlagSet("burst", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return fs, fs.Int("n", 30, ""), fs.Duration("wall-limit", time.Second, ""), fs.String("pool", "cpp", "")
	}
	env := map[string]string{"KECE_BENCH_BURST_N": "100", "KECE_BENCH_BURST_WALL_LIMIT": "3s", "KECE_BENCH_BURST_POOL": "java"}
	fs, n, wall, pool := newFS()
	require.NoError(t, ParseWithEnv(fs, "KECE_BENCH_BURST_", []string{"-pool", "python"}, func(k string) string { return env[k] }))
	require.Equal(t, 100, *n)
	require.Equal(t, 3*time.Second, *wall)
	require.Equal(t, "python", *pool, "the command line wins")

	fs, _, _, _ = newFS()
	err := ParseWithEnv(fs, "KECE_BENCH_BURST_", nil, func(k string) string {
		return map[string]string{"KECE_BENCH_BURST_N": "many"}[k]
	})
	require.True(t, IsConfigError(err), "%v", err)
	require.ErrorContains(t, err, "KECE_BENCH_BURST_N")
	require.Equal(t, "KECE_DEMO_JUDGE_MYSQL", EnvName("KECE_DEMO_", "judge-mysql"))

	// Durations take days, from the command line and from the variable.
	fs, _, wall, _ = newFS()
	require.NoError(t, ParseWithEnv(fs, "KECE_BENCH_BURST_", []string{"-wall-limit", "1d2h"}, func(string) string { return "" }))
	require.Equal(t, 26*time.Hour, *wall)
	fs, _, wall, _ = newFS()
	require.NoError(t, ParseWithEnv(fs, "KECE_BENCH_BURST_", nil, func(k string) string {
		return map[string]string{"KECE_BENCH_BURST_WALL_LIMIT": "2d"}[k]
	}))
	require.Equal(t, 48*time.Hour, *wall)
}

func TestFloatFlag(t *testing.T) {
	t.Parallel()
	fs := NewFlagSet("t", envMap(map[string]string{"KECE_RATE": "0.5"}))
	r := fs.Float("rate", "KECE_RATE", 20, "rate")
	q := fs.Float("other", "KECE_OTHER", 20, "other")
	require.NoError(t, fs.Parse(nil))
	require.Equal(t, 0.5, *r, "the variable wins over the default")
	require.Equal(t, 20.0, *q)
	require.True(t, fs.Given("rate"), "set by its variable")
	require.False(t, fs.Given("other"), "left at its default")

	fs = NewFlagSet("t", envMap(map[string]string{"KECE_RATE": "fast"}))
	fs.Float("rate", "KECE_RATE", 20, "rate")
	fs.Float("other", "KECE_OTHER", 20, "other")
	err := fs.Parse([]string{"--other", "NaN"})
	require.ErrorContains(t, err, `KECE_RATE: "fast": not a number`)
	require.ErrorContains(t, err, `--other: "NaN": not a number`, "both bad values are reported")
}
