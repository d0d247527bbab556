package settingsdoc

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite docs/settings.md")

// docPath is docs/settings.md from this package's directory.
const docPath = "../../../docs/settings.md"

// binaries are the ones whose every command the table lists.
var binaries = []string{"kece-control", "kece-node", "kecectl"}

// setting is one flag of one command, as its --help shows it.
type setting struct {
	flag, short, typ string
	env              string // "" for a command-line-only flag
	def              string // cobra's default; "" for the zero value
	usage            string // without the (env …) and (default …) cobra and the loader append
}

// command is one command with flags of its own.
type command struct {
	path     string // "kece-control serve"
	settings []setting
}

var (
	flagLine = regexp.MustCompile(`^\s+(?:-([a-zA-Z0-9]), )?--([a-zA-Z0-9][\w.-]*)(?:\[=[^\]]*\])?(?: (\S+))?\s{2,}(.*)$`)
	cmdLine  = regexp.MustCompile(`^  ([a-z][a-z0-9-]*) +\S`)
	// The loader appends " (env KECE_X)" to the usage and cobra (pflag)
	// " (default X)" after it, unless the default is the zero value;
	// kecectl names its variables in the usage ("(default
	// $KECE_ADMIN_URL)").
	envDefault    = regexp.MustCompile(`^(.*) \(env (KECE_[A-Z0-9_]+)\)(?: \(default (.*)\))?$`)
	defaultSuffix = regexp.MustCompile(`^(.*) \(default (.*)\)$`)
	envInUsage    = regexp.MustCompile(`\$(KECE_[A-Z0-9_]+)`)
)

// notSettings are cobra's own commands: help, and the completion scripts'
// --no-descriptions.
var notSettings = map[string]bool{"help": true, "completion": true}

// help runs `bin args… --help` without any KECE_ variable (defaults must
// not depend on this machine's) and requires exit 0.
func help(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append(args, "--help")...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s %v --help: %s", filepath.Base(bin), args, stderr.String())
	return string(out)
}

// parseHelp returns the command's own flags (not its parent's "Global
// Flags") and its subcommands, from the sections after "Usage:" (the long
// description before it is free text).
func parseHelp(out string) (flags []setting, subs []string) {
	section, usageSeen := "", false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if line != "" && !strings.HasPrefix(line, " ") {
			// A section's header, or the footer that ends the last one.
			section = ""
			if strings.HasSuffix(line, ":") {
				section = strings.TrimSuffix(line, ":")
				usageSeen = usageSeen || section == "Usage"
			}
			continue
		}
		if !usageSeen || strings.TrimSpace(line) == "" {
			continue
		}
		switch section {
		case "", "Usage", "Aliases", "Examples", "Global Flags", "Additional help topics":
		case "Flags":
			if m := flagLine.FindStringSubmatch(line); m != nil {
				flags = append(flags, setting{short: m[1], flag: m[2], typ: m[3], usage: m[4]})
			} else if len(flags) > 0 && strings.HasPrefix(line, " ") {
				// A usage of several lines.
				flags[len(flags)-1].usage += " " + strings.TrimSpace(line)
			}
		default:
			if m := cmdLine.FindStringSubmatch(line); m != nil {
				subs = append(subs, m[1])
			}
		}
	}
	for i := range flags {
		f := &flags[i]
		switch m := envDefault.FindStringSubmatch(f.usage); {
		case m != nil:
			f.usage, f.env, f.def = m[1], m[2], m[3]
		default:
			if m := defaultSuffix.FindStringSubmatch(f.usage); m != nil && !strings.Contains(m[2], "$") {
				f.usage, f.def = m[1], m[2]
			}
			if m := envInUsage.FindStringSubmatch(f.usage); m != nil {
				f.env = m[1]
			}
		}
		if s, err := strconv.Unquote(f.def); err == nil {
			f.def = s
		}
	}
	return flags, subs
}

// walk lists every command of bin under path with flags of its own,
// depth first in the order --help lists them.
func walk(t *testing.T, bin string, path []string) []command {
	flags, subs := parseHelp(help(t, bin, path...))
	var own []setting
	for _, f := range flags {
		if f.flag != "help" && f.flag != "version" {
			own = append(own, f)
		}
	}
	var cmds []command
	if len(own) > 0 {
		cmds = append(cmds, command{path: strings.Join(append([]string{filepath.Base(bin)}, path...), " "), settings: own})
	}
	for _, s := range subs {
		if !notSettings[s] {
			cmds = append(cmds, walk(t, bin, append(append([]string(nil), path...), s))...)
		}
	}
	return cmds
}

// TestSettingsDoc builds the binaries and requires docs/settings.md to be
// the table their --help makes.
func TestSettingsDoc(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + "/"}
	for _, b := range binaries {
		args = append(args, "../../"+b)
	}
	out, err := exec.Command("go", args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	all := map[string][]command{}
	for _, b := range binaries {
		all[b] = walk(t, filepath.Join(dir, b), nil)
		require.NotEmpty(t, all[b], b)
	}
	got := render(all)
	if *update {
		require.NoError(t, os.WriteFile(docPath, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(docPath)
	require.NoError(t, err, "docs/settings.md is missing; run: go test ./cmd/internal/settingsdoc -update")
	if string(want) != got {
		have, now := strings.Split(string(want), "\n"), strings.Split(got, "\n")
		i := 0
		for i < len(have) && i < len(now) && have[i] == now[i] {
			i++
		}
		line := func(l []string) string {
			if i < len(l) {
				return l[i]
			}
			return "(end of file)"
		}
		t.Fatalf("docs/settings.md is out of date; run: go test ./cmd/internal/settingsdoc -update\nline %d is\n  %q\nand should be\n  %q", i+1, line(have), line(now))
	}
}

func render(all map[string][]command) string {
	var b strings.Builder
	b.WriteString(`# Settings

<!-- Generated from the binaries' --help by
     go test ./cmd/internal/settingsdoc -update
     Do not edit: the test fails when this file differs. -->

Every flag of every command of ` + "`kece-control`, `kece-node` and `kecectl`" + `,
with the environment variable that sets it and its default. A flag on the
command line wins over its variable, which wins over the default; a secret
` + "`--x`" + ` also has ` + "`--x-file`" + ` (variable ` + "`KECE_X_FILE`" + `) naming a file that holds
it (docs/operations.md, "Settings"). An empty default is the type's zero
(empty, 0, false, 0s) unless the description says otherwise. A flag
without a variable is an argument of that one command, not a setting.
` + "`kecectl`" + `'s root flags apply to every kecectl command. Commands without
flags of their own (` + "`version`" + `, the groups) are not listed, nor cobra's
` + "`help` and `completion`" + `.

` + "`kece-bench` and `kece-demo`" + ` take every flag from
` + "`KECE_BENCH_<BENCHMARK>_<FLAG>` and `KECE_DEMO_<FLAG>`" + ` (` + "`kece-bench <benchmark> -h`" + `,
` + "`kece-demo -h`" + `; their help is pinned in ` + "`cmd/kece-bench/testdata/help/`" + `
and ` + "`cmd/kece-demo/testdata/help/`" + `).

`)
	b.WriteString("| binary | commands with flags | rows | rows with a variable | distinct variables |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, bin := range binaries {
		n, withEnv, vars := 0, 0, map[string]bool{}
		for _, c := range all[bin] {
			n += len(c.settings)
			for _, s := range c.settings {
				if s.env != "" {
					withEnv++
					vars[s.env] = true
				}
			}
		}
		fmt.Fprintf(&b, "| `%s` | %d | %d | %d | %d |\n", bin, len(all[bin]), n, withEnv, len(vars))
	}
	renderShared(&b, all)
	for _, bin := range binaries {
		fmt.Fprintf(&b, "\n## %s\n", bin)
		for _, c := range all[bin] {
			fmt.Fprintf(&b, "\n### `%s`\n\n| flag | variable | default | description |\n| --- | --- | --- | --- |\n", c.path)
			for _, s := range c.settings {
				name := "`--" + s.flag + "`"
				if s.short != "" {
					name = "`-" + s.short + "`, " + name
				}
				if s.typ != "" {
					name += " " + s.typ
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, code(s.env), code(s.def), cell(s.usage))
			}
		}
	}
	return b.String()
}

// renderShared lists the settings (flag and variable) of more than one
// binary, then the names that do not mean one setting everywhere: a flag
// with another variable in another command, a variable with another flag.
func renderShared(b *strings.Builder, all map[string][]command) {
	type key struct{ flag, env string }
	in := map[key][]string{}
	bins := map[key]map[string]bool{}
	envs, flags := map[string]map[string]bool{}, map[string]map[string]bool{}
	var keys []key
	for _, bin := range binaries {
		for _, c := range all[bin] {
			for _, s := range c.settings {
				if s.env == "" {
					continue
				}
				k := key{s.flag, s.env}
				if bins[k] == nil {
					bins[k] = map[string]bool{}
					keys = append(keys, k)
				}
				bins[k][bin] = true
				in[k] = append(in[k], "`"+c.path+"`")
				if envs[s.flag] == nil {
					envs[s.flag] = map[string]bool{}
				}
				envs[s.flag][s.env] = true
				if flags[s.env] == nil {
					flags[s.env] = map[string]bool{}
				}
				flags[s.env][s.flag] = true
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].flag != keys[j].flag {
			return keys[i].flag < keys[j].flag
		}
		return keys[i].env < keys[j].env
	})
	b.WriteString("\n## Names shared by several binaries\n\n" +
		"The same flag with the same variable, meaning the same, in every command listed.\n\n" +
		"| flag | variable | commands |\n| --- | --- | --- |\n")
	for _, k := range keys {
		if len(bins[k]) > 1 {
			fmt.Fprintf(b, "| `--%s` | `%s` | %s |\n", k.flag, k.env, strings.Join(in[k], ", "))
		}
	}
	b.WriteString("\n## One name, several settings\n\n" +
		"A flag that sets another variable in another command (or a variable set by\n" +
		"another flag) is a different setting under the same name.\n\n" +
		"| flag | variable | commands |\n| --- | --- | --- |\n")
	n := 0
	for _, k := range keys {
		if len(envs[k.flag]) > 1 || len(flags[k.env]) > 1 {
			n++
			fmt.Fprintf(b, "| `--%s` | `%s` | %s |\n", k.flag, k.env, strings.Join(in[k], ", "))
		}
	}
	if n == 0 {
		b.WriteString("| (none) | | |\n")
	}
}

// code is s as inline code, or empty.
func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}

// cell escapes what would end a table cell or start emphasis.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "*", `\*`, "<", `\<`).Replace(s)
}
