package settings

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"time"
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

// FlagSet is a flag.FlagSet whose every flag has a variable. Register flags
// with its typed methods (not the embedded FlagSet's), then Parse.
type FlagSet struct {
	*flag.FlagSet
	getenv  func(string) string
	env     map[string]string
	secrets []*secret
	fromEnv map[string]bool
	aliases map[string]string // alias → flag
	out     io.Writer
}

type secret struct {
	name, env string
	value     *string
	file      *string
}

// NewFlagSet returns an empty set that reads variables through getenv
// (os.Getenv in main; a map in tests). Parse errors are returned, not
// printed twice; -h prints the flags with their variables.
func NewFlagSet(name string, getenv func(string) string) *FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &FlagSet{FlagSet: fs, getenv: getenv, env: map[string]string{}, aliases: map[string]string{}, out: os.Stderr}
}

func (f *FlagSet) bind(name, env string) {
	f.env[name] = env
	fl := f.Lookup(name)
	fl.Usage += " (env " + env + ")"
}

// String defines a string flag read from env when not given.
func (f *FlagSet) String(name, env, value, usage string) *string {
	p := f.FlagSet.String(name, value, usage)
	f.bind(name, env)
	return p
}

// Bool defines a bool flag; the variable takes 1/0/true/false.
func (f *FlagSet) Bool(name, env string, value bool, usage string) *bool {
	p := f.FlagSet.Bool(name, value, usage)
	f.bind(name, env)
	return p
}

// Int defines an int flag.
func (f *FlagSet) Int(name, env string, value int, usage string) *int {
	p := f.FlagSet.Int(name, value, usage)
	f.bind(name, env)
	return p
}

// Duration defines a duration flag (Go syntax: 60s, 1m30s); a negative
// value is refused.
func (f *FlagSet) Duration(name, env string, value time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	*p = value
	// The backquoted word names the value in -h, as flag.Duration's does.
	f.FlagSet.Func(name, usage+fmt.Sprintf(" (a Go `duration`, default %s)", value), func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil {
			return errors.New("not a duration such as 60s or 5m")
		}
		if d < 0 {
			return errors.New("must not be negative")
		}
		*p = d
		return nil
	})
	f.bind(name, env)
	return p
}

// Alias gives a defined flag a second (usually one-letter) name, such as
// "o" for "output". It shares the flag's value and variable.
func (f *FlagSet) Alias(alias, name string) {
	fl := f.Lookup(name)
	f.FlagSet.Var(fl.Value, alias, "short for --"+name)
	f.aliases[alias] = name
}

// Secret defines a secret: --name / env, or --name-file / fileEnv (by
// convention env+"_FILE") naming a file that holds it. After Parse the
// returned string holds the value from whichever was given ("" when none).
func (f *FlagSet) Secret(name, env, fileEnv, usage string) *string {
	s := &secret{name: name, env: env}
	s.value = f.String(name, env, "", usage+"; prefer --"+name+"-file")
	s.file = f.String(name+"-file", fileEnv, "", "file holding the "+usage+" (mode 0600 or 0640)")
	f.secrets = append(f.secrets, s)
	return s.value
}

// Parse parses args, then applies the variables of flags not given, then
// reads secret files. Every problem is reported, joined.
func (f *FlagSet) Parse(args []string) error {
	if err := f.FlagSet.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(f.out, "usage of %s (a flag wins over its variable):\n", f.Name())
			f.PrintDefaults(f.out)
			return err
		}
		return &Error{Setting: "command line", Err: err}
	}
	changed := map[string]bool{}
	f.Visit(func(fl *flag.Flag) {
		changed[fl.Name] = true
		if name, ok := f.aliases[fl.Name]; ok {
			changed[name] = true
		}
	})
	var flags []Flag
	var errs []error
	f.VisitAll(func(fl *flag.Flag) {
		if _, ok := f.aliases[fl.Name]; ok {
			return
		}
		env, ok := f.env[fl.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("settings: flag --%s was registered without an environment variable", fl.Name))
			return
		}
		flags = append(flags, Flag{Name: fl.Name, Env: env, Changed: changed[fl.Name], Set: fl.Value.Set})
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
// variable when the environment set it, else "--name".
func (f *FlagSet) Source(name string) string {
	if f.fromEnv[name] {
		return f.env[name]
	}
	return "--" + name
}

// SetOutput sets where -h prints the flags (default os.Stderr).
func (f *FlagSet) SetOutput(w io.Writer) { f.out = w }

// PrintDefaults writes the flags, each with its variable, to w.
func (f *FlagSet) PrintDefaults(w io.Writer) {
	f.FlagSet.SetOutput(w)
	f.FlagSet.PrintDefaults()
	f.FlagSet.SetOutput(io.Discard)
}

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
	if err := fs.Parse(args); err != nil {
		return err
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
