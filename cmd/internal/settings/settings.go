package settings

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kece-oj/kece/internal/duration"
)

// ExitConfig is the exit status of a process refused for a bad setting. The
// systemd units list it in RestartPreventExitStatus=.
const ExitConfig = 2

// Error is one bad setting. Setting is what the user wrote: a flag
// ("--lease-ttl") or a variable ("KECE_LEASE_TTL").
type Error struct {
	Setting string
	Err     error
}

func (e *Error) Error() string { return e.Setting + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error for setting with a formatted reason. Callers use
// it for their own validation so that every refusal exits the same way.
func Errorf(setting, format string, args ...any) error {
	return &Error{Setting: setting, Err: fmt.Errorf(format, args...)}
}

// IsConfigError reports whether err is, or joins, an *Error: the process
// must exit ExitConfig.
func IsConfigError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// Flag is one flag as ApplyEnv sees it, whatever flag package holds it.
type Flag struct {
	// Name is the flag without dashes ("lease-ttl").
	Name string
	// Env is its variable ("KECE_LEASE_TTL"); required.
	Env string
	// Changed is true when the command line gave the flag.
	Changed bool
	// Set parses and stores a value, as flag.Value.Set.
	Set func(string) error
}

var envNameRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// ApplyEnv sets every flag the command line did not give from its
// variable, when the variable is set and not empty. It returns the names
// of the flags it set and every failure joined, each an *Error naming the
// variable.
func ApplyEnv(flags []Flag, getenv func(string) string) (fromEnv map[string]bool, err error) {
	fromEnv = map[string]bool{}
	var errs []error
	for _, f := range flags {
		if !envNameRE.MatchString(f.Env) {
			// A programming error, not the user's: still refuse to start.
			errs = append(errs, fmt.Errorf("settings: flag --%s has no valid environment variable (%q)", f.Name, f.Env))
			continue
		}
		if f.Changed {
			continue
		}
		v := getenv(f.Env)
		if v == "" {
			continue
		}
		if err := f.Set(v); err != nil {
			errs = append(errs, &Error{Setting: f.Env, Err: fmt.Errorf("%q: %w", v, err)})
			continue
		}
		fromEnv[f.Name] = true
	}
	return fromEnv, errors.Join(errs...)
}

// ReadSecretFile reads a secret from path for setting (named in errors):
// the file must be a regular file not writable by its group nor accessible
// to others, and hold a non-empty value; surrounding whitespace (a trailing
// newline) is trimmed.
func ReadSecretFile(setting, path string) (string, error) {
	if path == "" {
		return "", Errorf(setting, "empty path")
	}
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", Errorf(setting, "%s does not exist", path)
		}
		return "", &Error{Setting: setting, Err: err}
	}
	if !st.Mode().IsRegular() {
		return "", Errorf(setting, "%s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o027 != 0 {
		return "", Errorf(setting, "%s has mode %04o; it holds a secret: chmod 0600 (or 0640 for a reading group)", path, perm)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", &Error{Setting: setting, Err: err}
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", Errorf(setting, "%s is empty", path)
	}
	return s, nil
}

// FlagSet is a pflag.FlagSet (the flags of a cobra command) whose every
// flag has a variable. Register flags with its typed methods, hand Flags()
// to the command (cmd.Flags().AddFlagSet), and call Apply once cobra has
// parsed the command line; or call Parse to do both without cobra.
//
// A value on the command line that does not parse does not stop the
// parse: it is kept and reported by Apply together with every other bad
// setting, so one run names them all.
type FlagSet struct {
	flags   *pflag.FlagSet
	getenv  func(string) string
	env     map[string]string // flag → variable
	aliases map[string]string // alias → flag
	secrets []*secret
	fromEnv map[string]bool
	bad     []error   // command-line values that did not parse
	warn    io.Writer // where Apply says an old name was used
}

type secret struct {
	name, env string
	value     *string
	file      *string
}

// NewFlagSet returns an empty set that reads variables through getenv
// (os.Getenv in main; a map in tests).
func NewFlagSet(name string, getenv func(string) string) *FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	return &FlagSet{flags: fs, getenv: getenv, env: map[string]string{}, aliases: map[string]string{}, warn: io.Discard}
}

// WarnTo sets where Apply warns that an old flag name was used (default:
// nowhere).
func (f *FlagSet) WarnTo(w io.Writer) { f.warn = w }

// Flags is the pflag set to add to a cobra command.
func (f *FlagSet) Flags() *pflag.FlagSet { return f.flags }

// Lookup returns the flag called name, or nil.
func (f *FlagSet) Lookup(name string) *pflag.Flag { return f.flags.Lookup(name) }

// Args are the positional arguments left after Parse.
func (f *FlagSet) Args() []string { return f.flags.Args() }

// lenient stores what parses and keeps what does not for Apply.
type lenient struct {
	pflag.Value
	setting string
	fs      *FlagSet
}

func (l lenient) Set(s string) error {
	if err := l.Value.Set(s); err != nil {
		l.fs.bad = append(l.fs.bad, &Error{Setting: l.setting, Err: fmt.Errorf("%q: %w", s, err)})
	}
	return nil
}

func (f *FlagSet) define(name, short, env string, v pflag.Value, usage string) *pflag.Flag {
	fl := f.flags.VarPF(lenient{Value: v, setting: "--" + name, fs: f}, name, short, usage+" (env "+env+")")
	f.env[name] = env
	return fl
}

// String defines a string flag read from env when not given.
func (f *FlagSet) String(name, env, value, usage string) *string {
	return f.StringP(name, "", env, value, usage)
}

// StringP is String with a one-letter shorthand ("o" for output).
func (f *FlagSet) StringP(name, short, env, value, usage string) *string {
	p := &value
	f.define(name, short, env, (*stringValue)(p), usage)
	return p
}

// Bool defines a bool flag; the variable takes 1/0/true/false.
func (f *FlagSet) Bool(name, env string, value bool, usage string) *bool {
	p := &value
	f.define(name, "", env, (*boolValue)(p), usage).NoOptDefVal = "true"
	return p
}

// Int defines an int flag.
func (f *FlagSet) Int(name, env string, value int, usage string) *int {
	p := &value
	f.define(name, "", env, (*intValue)(p), usage)
	return p
}

// Float defines a decimal-number flag (a rate per second, say).
func (f *FlagSet) Float(name, env string, value float64, usage string) *float64 {
	p := &value
	f.define(name, "", env, (*floatValue)(p), usage)
	return p
}

// Duration defines a duration flag: Go syntax plus days (60s, 15m, 24h,
// 7d; package internal/duration); a negative value is refused.
func (f *FlagSet) Duration(name, env string, value time.Duration, usage string) *time.Duration {
	p := &value
	f.define(name, "", env, duration.Value{D: p}, usage)
	return p
}

// Deprecated gives flag name a hidden old name that still works for one
// release; using it prints a warning that names the new one.
func (f *FlagSet) Deprecated(old, name string) {
	fl := f.flags.Lookup(name)
	v := fl.Value.(lenient)
	v.setting = "--" + old
	alias := f.flags.VarPF(v, old, "", fl.Usage)
	alias.NoOptDefVal = fl.NoOptDefVal
	alias.Hidden = true
	f.aliases[old] = name
}

// Secret defines a secret: --name / env, or --name-file / fileEnv (by
// convention env+"_FILE") naming a file that holds it. After Apply the
// returned string holds the value from whichever was given ("" when none).
func (f *FlagSet) Secret(name, env, fileEnv, usage string) *string {
	s := &secret{name: name, env: env}
	s.value = f.String(name, env, "", usage+"; prefer --"+name+"-file")
	s.file = f.String(name+"-file", fileEnv, "", "file holding the "+usage+" (mode 0600 or 0640)")
	f.secrets = append(f.secrets, s)
	return s.value
}

// Parse parses args (without cobra), then Apply. pflag.ErrHelp is
// returned as is for -h.
func (f *FlagSet) Parse(args []string) error {
	if err := f.flags.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return errors.Join(append(f.bad, &Error{Setting: "command line", Err: err})...)
	}
	return f.Apply()
}

// Apply runs once the command line is parsed: it reports the command
// line's bad values, applies the variables of flags not given, then reads
// secret files. Every problem is reported, joined.
func (f *FlagSet) Apply() error {
	errs := append([]error(nil), f.bad...)
	changed := map[string]bool{}
	// Changed, not Visit: under cobra the flags are parsed by the
	// command's own set, which shares the *Flag but not the record of
	// what it set.
	f.flags.VisitAll(func(fl *pflag.Flag) {
		if !fl.Changed {
			return
		}
		changed[fl.Name] = true
		if name, ok := f.aliases[fl.Name]; ok {
			changed[name] = true
			fmt.Fprintf(f.warn, "warning: --%s is the old name of --%s and goes in the next release\n", fl.Name, name)
		}
	})
	var flags []Flag
	f.flags.VisitAll(func(fl *pflag.Flag) {
		if _, ok := f.aliases[fl.Name]; ok {
			return
		}
		env, ok := f.env[fl.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("settings: flag --%s was registered without an environment variable", fl.Name))
			return
		}
		flags = append(flags, Flag{Name: fl.Name, Env: env, Changed: changed[fl.Name], Set: fl.Value.(lenient).Value.Set})
	})
	fromEnv, err := ApplyEnv(flags, f.getenv)
	f.fromEnv = fromEnv
	errs = append(errs, err)
	for _, s := range f.secrets {
		if *s.file == "" {
			continue
		}
		if *s.value != "" {
			errs = append(errs, Errorf(f.Source(s.name), "give the %s or its file (%s), not both", s.name, f.Source(s.name+"-file")))
			continue
		}
		v, err := ReadSecretFile(f.Source(s.name+"-file"), *s.file)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		*s.value = v
	}
	return errors.Join(errs...)
}

// Source names where a flag's value came from, for error messages: its
// variable when the environment set it, the flag (or the old name) when
// the command line did, else both ways to set it ("KECE_X (--x)").
func (f *FlagSet) Source(name string) string {
	if f.fromEnv[name] {
		return f.env[name]
	}
	for old, n := range f.aliases {
		if n == name && f.flags.Lookup(old).Changed {
			return "--" + old
		}
	}
	if fl := f.flags.Lookup(name); fl != nil && !fl.Changed && f.env[name] != "" {
		return f.env[name] + " (--" + name + ")"
	}
	return "--" + name
}

// Given reports whether the command line or the environment set flag
// name (after Apply), as opposed to its default.
func (f *FlagSet) Given(name string) bool {
	if f.fromEnv[name] {
		return true
	}
	for old, n := range f.aliases {
		if n == name && f.flags.Lookup(old).Changed {
			return true
		}
	}
	fl := f.flags.Lookup(name)
	return fl != nil && fl.Changed
}

// Usage is the flags with their variables, as cobra prints them.
func (f *FlagSet) Usage() string { return f.flags.FlagUsages() }

type stringValue string

func (s *stringValue) Set(v string) error { *s = stringValue(v); return nil }
func (s *stringValue) String() string     { return string(*s) }
func (*stringValue) Type() string         { return "string" }

type boolValue bool

func (b *boolValue) Set(v string) error {
	x, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("want true or false (1 or 0)")
	}
	*b = boolValue(x)
	return nil
}
func (b *boolValue) String() string { return strconv.FormatBool(bool(*b)) }
func (*boolValue) Type() string     { return "bool" }

type intValue int

func (i *intValue) Set(v string) error {
	x, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return errors.New("not a whole number")
	}
	*i = intValue(x)
	return nil
}
func (i *intValue) String() string { return strconv.Itoa(int(*i)) }
func (*intValue) Type() string     { return "int" }

type floatValue float64

func (v *floatValue) Set(s string) error {
	x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return errors.New("not a number (e.g. 20 or 0.5)")
	}
	*v = floatValue(x)
	return nil
}
func (v *floatValue) String() string { return strconv.FormatFloat(float64(*v), 'g', -1, 64) }
func (*floatValue) Type() string     { return "float" }

// EnvName is the variable of flag name under prefix: KECE_BENCH_BURST_ +
// "wall-limit" is KECE_BENCH_BURST_WALL_LIMIT.
func EnvName(prefix, name string) string {
	return prefix + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
}

// ParseWithEnv parses a standard-library FlagSet whose flags take their
// variables by a naming rule rather than one by one (the benchmark and demo
// tools, whose many per-run flags all follow EnvName(prefix, flag)): the
// command line wins, then the variable, then the default; a bad variable is
// an *Error naming it.
func ParseWithEnv(fs *flag.FlagSet, prefix string, args []string, getenv func(string) string) error {
	// Durations take days here too (internal/duration), as on every KECE
	// command line.
	fs.VisitAll(func(f *flag.Flag) {
		if g, ok := f.Value.(flag.Getter); ok {
			if _, isDuration := g.Get().(time.Duration); isDuration {
				f.Value = &dayDuration{inner: f.Value}
			}
		}
	})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &Error{Setting: "command line", Err: err}
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var flags []Flag
	fs.VisitAll(func(f *flag.Flag) {
		flags = append(flags, Flag{Name: f.Name, Env: EnvName(prefix, f.Name), Changed: given[f.Name], Set: f.Value.Set})
	})
	_, err := ApplyEnv(flags, getenv)
	return err
}

// dayDuration lets a standard-library duration flag take the day unit: the
// value is parsed by internal/duration and stored through the flag's own
// Set, so the variable the flag was defined with still receives it. Its
// zero value answers String (flag.PrintDefaults makes one to find
// defaults).
type dayDuration struct{ inner flag.Value }

func (d *dayDuration) String() string {
	if d == nil || d.inner == nil {
		return ""
	}
	return d.inner.String()
}

func (d *dayDuration) Set(s string) error {
	v, err := duration.Parse(s)
	if err != nil {
		return err
	}
	return d.inner.Set(v.String())
}
