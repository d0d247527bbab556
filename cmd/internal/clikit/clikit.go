// Package clikit is what every KECE daemon's command line has in common,
// on cobra as kecectl is: the root command with --version and `version`,
// `completion` and `man`, help that exits 0, and one mapping from errors to
// the exit status shared by the binaries (docs/operations.md): 0 ok, 1 a
// runtime failure, 2 a usage or settings error (cmd/internal/settings), 3
// and up as the binary defines them (Exit).
//
// It owns no settings: flags are built by cmd/internal/settings and added
// to the commands by the binaries.
package clikit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/internal/buildinfo"
)

// Exit is an error that ends the process with Code after its message (if
// Err is not nil) is printed.
type Exit struct {
	Code int
	Err  error
}

func (e *Exit) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

// Unwrap returns the cause.
func (e *Exit) Unwrap() error { return e.Err }

// ran marks that a command's own code started: an error before that (an
// unknown command, a bad flag, a wrong argument count) is a usage error.
type ranKey struct{}

// Root returns the root command of binary name with version, completion
// and man commands. Add the binary's commands to it, then Run it.
func Root(name, short, long string) *cobra.Command {
	root := &cobra.Command{
		Use:               name,
		Short:             short,
		Long:              long,
		Version:           buildinfo.String(name),
		SilenceErrors:     true,
		SilenceUsage:      true,
		DisableAutoGenTag: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return settings.Errorf("command line", "%v", err) })
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		// cobra checks required flags after this hook: check them here so
		// a missing one is a usage error like any other.
		if err := cmd.ValidateRequiredFlags(); err != nil {
			return settings.Errorf("command line", "%v", err)
		}
		if r, ok := cmd.Context().Value(ranKey{}).(*bool); ok {
			*r = true
		}
		return nil
	}
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the build version (also --version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), buildinfo.String(name))
			return err
		},
	}, manCommand(name))
	return root
}

func manCommand(name string) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:     "man --dir DIR",
		Short:   "Write man pages for every command into DIR",
		Example: fmt.Sprintf("  %s man --dir /usr/local/share/man/man1 && man %s", name, name),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return settings.Errorf("--dir", "%v", err)
			}
			hdr := &doc.GenManHeader{Title: strings.ToUpper(name), Section: "1", Source: buildinfo.String(name), Manual: "KECE judge pool"}
			if err := doc.GenManTree(cmd.Root(), hdr, dir); err != nil {
				return fmt.Errorf("man pages: %w", err)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "man pages written to %s\n", dir)
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write the pages to (created if missing)")
	_ = cmd.MarkFlagRequired("dir")
	_ = cmd.MarkFlagDirname("dir")
	return cmd
}

// Group makes cmd a group of subcommands: given without one, or with an
// unknown one, it is a usage error that lists them (not help and exit 0).
func Group(cmd *cobra.Command, subs ...*cobra.Command) *cobra.Command {
	cmd.AddCommand(subs...)
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return settings.Errorf("command line", "%s\n%s", msg, available(cmd))
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return settings.Errorf("command line", "%q needs a command\n%s", cmd.CommandPath(), available(cmd))
	}
	return cmd
}

func available(cmd *cobra.Command) string {
	var names []string
	for _, s := range cmd.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	return "available: " + strings.Join(names, ", ")
}

// Run executes root with args and returns the exit status, printing the
// error (prefixed by the command's path) to stderr.
func Run(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	var ran bool
	root.SetArgs(longFlags(args))
	root.SetOut(stdout)
	root.SetErr(stderr)
	// After SetOut: the completion commands keep the writer they see now.
	root.InitDefaultCompletionCmd()
	cmd, err := root.ExecuteContextC(context.WithValue(ctx, ranKey{}, &ran))
	if err == nil {
		return 0
	}
	path := root.Name()
	if cmd != nil {
		path = cmd.CommandPath()
	}
	code := 1
	var ex *Exit
	switch {
	case errors.As(err, &ex):
		code = ex.Code
		if ex.Err == nil {
			return code
		}
	case settings.IsConfigError(err) || !ran:
		code = settings.ExitConfig
	}
	fmt.Fprintf(stderr, "%s: %s\n", path, strings.TrimRight(err.Error(), "\n"))
	if code == settings.ExitConfig && !ran && cmd != nil {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// longFlags turns -name into --name: the standard library's flag package,
// which the daemons used before cobra, took long names with one dash, and
// units and scripts written for it keep working for one release
// (CHANGELOG.md). One-letter flags (-o, -h, -v), negative numbers and
// everything after "--" are left alone.
func longFlags(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(name) > 1 && name[0] >= 'a' && name[0] <= 'z' {
			a = "-" + a
		}
		out = append(out, a)
	}
	return out
}

// Bind adds fs's flags to cmd and applies the settings (variables, secret
// files, every bad value at once) before run.
func Bind(cmd *cobra.Command, fs *settings.FlagSet, run func(cmd *cobra.Command, args []string) error) *cobra.Command {
	cmd.Flags().AddFlagSet(fs.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		fs.WarnTo(cmd.ErrOrStderr())
		if err := fs.Apply(); err != nil {
			return err
		}
		return run(cmd, args)
	}
	return cmd
}
