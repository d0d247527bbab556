// Command kece-control is the control plane: one binary with subcommands.
//
//	kece-control serve          run the HTTP server (machine, admin, business APIs, API docs) and the reaper
//	kece-control migrate        up | down | status of the schema
//	kece-control token          create | list | rotate | revoke admin and business API tokens
//	kece-control reconcile      check invariants; -o json|yaml|table|csv; exit 3 when violated
//	kece-control webhook-secret new | show: the whsec_ form of the webhook secret
//	kece-control version        print the build version (also --version)
//
// Every flag has an environment variable (shown by -h; a flag wins over its
// variable), and the database DSN and the webhook secret may come from a
// file (KECE_MYSQL_DSN_FILE, KECE_WEBHOOK_SECRET_FILE). Settings are read by
// cmd/internal/settings. Exit status (the scheme shared by every KECE
// binary, docs/operations.md): 0 ok; 1 runtime failure (database
// unreachable, listen failed); 2 a bad setting or command line, named —
// systemd does not restart it; 3 reconcile found violations (as kecectl).
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

	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/internal/buildinfo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// io bundles what a subcommand reads and writes, so tests run it in-process
// with their own environment.
type cmdIO struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

// run executes one subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		usage(stderr)
		return settings.ExitConfig
	}
	cio := cmdIO{stdout: stdout, stderr: stderr, getenv: getenv}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], cio)
	case "migrate":
		err = migrate(ctx, args[1:], cio)
	case "token":
		err = token(ctx, args[1:], cio)
	case "webhook-secret":
		err = webhookSecret(args[1:], cio)
	case "healthcheck":
		err = healthcheck(ctx, args[1:], cio)
		if errors.Is(err, errUnhealthy) {
			fmt.Fprintf(stderr, "kece-control healthcheck: %v\n", err)
			return 1
		}
	case "reconcile":
		var violated bool
		violated, err = reconcile(ctx, args[1:], cio)
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
		return settings.ExitConfig
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "kece-control %s: %v\n", args[0], err)
		if settings.IsConfigError(err) {
			return settings.ExitConfig
		}
		return 1
	}
	return 0
}

// usagef is a mistake on the command line (exit 2).
func usagef(format string, args ...any) error {
	return settings.Errorf("command line", format, args...)
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: kece-control <command> [flags]   (kece-control <command> -h lists the flags)

commands:
  serve           run the control plane HTTP server, reaper and webhook sender
  migrate         up | down | status
  token           create | list | rotate | revoke --kind admin|business --name NAME
  reconcile       check scheduling invariants (-o json|yaml|table|csv); exit 3 on violation
  webhook-secret  new (print a fresh whsec_ secret) | show (the whsec_ form of KECE_WEBHOOK_SECRET_FILE)
  healthcheck     exit 0 if the replica on KECE_LISTEN answers /healthz with 200, else 1
  version         print the build version (also --version)

Every flag has an environment variable, e.g. --mysql-dsn is KECE_MYSQL_DSN and
--mysql-dsn-file is KECE_MYSQL_DSN_FILE (a file holding the DSN, mode 0600 or
0640). A flag wins over its variable. Exit status: 0 ok, 1 failure, 2 bad
setting or command line (named), 3 reconcile found violations.
`)
}
