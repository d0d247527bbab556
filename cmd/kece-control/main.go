// Command kece-control is the control plane: one binary with subcommands.
//
//	kece-control serve      run the HTTP server (machine, admin, business APIs) and the reaper
//	kece-control migrate    up | down | status of the schema
//	kece-control token      create|revoke --kind admin|business --name NAME (create prints the token once)
//	kece-control reconcile  check invariants; -o json|csv; exit 3 when violated
//	kece-control version    print the build version (also --version)
//
// Exit codes (the same across KECE's binaries, docs/operations.md): 0 ok;
// 1 runtime failure; 2 usage or configuration error; 3 reconcile found
// violations.
//
// Settings come from flags or environment (flags win). It refuses to start on
// bad settings and says which one and what would be right.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/kece-oj/kece/internal/buildinfo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], stderr)
	case "migrate":
		err = migrate(ctx, args[1:], stdout)
	case "token":
		err = token(ctx, args[1:], stdout)
	case "reconcile":
		var violated bool
		violated, err = reconcile(ctx, args[1:], stdout)
		if err == nil && violated {
			return 3 // as kecectl reconcile: ran fine, found violations
		}
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, buildinfo.String("kece-control"))
		return 0
	default:
		fmt.Fprintf(stderr, "kece-control: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "kece-control %s: %v\n", args[0], err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError is a mistake in the command line or settings (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: kece-control <command> [flags]

commands:
  serve       run the control plane HTTP server and reaper
  migrate     up | down | status
  token       create|revoke --kind admin|business --name NAME
  reconcile   check scheduling invariants (-o json|csv); exit 3 on violation
  version     print the build version (also --version)

Every command reads the database from --mysql-dsn or KECE_MYSQL_DSN
(go-sql-driver form, e.g. kece:secret@tcp(127.0.0.1:3306)/kece).
`)
}
