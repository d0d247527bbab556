// Command kece-control is the control plane: one binary with subcommands.
//
//	kece-control serve          run the HTTP server (machine, admin, business APIs, API docs) and the reaper
//	kece-control migrate        up | down | status of the schema
//	kece-control token          create | list | rotate | revoke admin and business API tokens
//	kece-control reconcile      check invariants; -o json|yaml|table|csv; exit 3 when violated
//	kece-control webhook-secret new | show: the whsec_ form of the webhook secret
//	kece-control webhook-key    new | id | reencrypt: the key that encrypts webhook secrets in the database
//	kece-control healthcheck    exit 0 if the replica's /healthz answers 200, else 1
//	kece-control version        print the build version (also --version)
//	kece-control completion     shell completion; man --dir DIR writes man pages
//
// The command line is cobra's, as kecectl's (cmd/internal/clikit). Every
// flag has an environment variable (shown by --help; a flag wins over its
// variable), and the database DSN and the webhook secret may come from a
// file (KECE_MYSQL_DSN_FILE, KECE_WEBHOOK_SECRET_FILE). Settings are read by
// cmd/internal/settings. Exit status (the scheme shared by every KECE
// binary, docs/operations.md): 0 ok; 1 runtime failure (database
// unreachable, listen failed); 2 a bad setting or command line, named —
// systemd does not restart it; 3 reconcile found violations (as kecectl).
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/cmd/internal/clikit"
	"github.com/kece-oj/kece/cmd/internal/settings"
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

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	cio := cmdIO{stdout: stdout, stderr: stderr, getenv: getenv}
	root := clikit.Root("kece-control", "Control plane of the KECE judge pool",
		`kece-control is the control plane: the HTTP server (machine, admin and
business APIs, console, API docs), the reaper and the webhook sender, plus the
commands that manage its database and tokens.

Every flag has an environment variable (shown after it; a flag wins), e.g.
--mysql-dsn is KECE_MYSQL_DSN and --mysql-dsn-file is KECE_MYSQL_DSN_FILE (a
file holding the DSN, mode 0600 or 0640). Durations take s, m, h and d
(90s, 15m, 7d).

Exit status: 0 ok; 1 a runtime failure (database unreachable, listen
failed); 2 a bad setting or command line, named (systemd does not restart
it); 3 reconcile found violations (as kecectl).`)
	root.AddCommand(serveCommand(cio), migrateCommand(cio), tokenCommand(cio), reconcileCommand(cio), webhookSecretCommand(cio), webhookKeyCommand(cio),
		healthcheckCommand(cio))
	// Without a command: a usage error that lists them, as before.
	root.Args = cobra.NoArgs
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		return usagef("say which command\n%s", cmd.UsageString())
	}
	return clikit.Run(ctx, root, args, stdout, stderr)
}

// usagef is a mistake on the command line (exit 2).
func usagef(format string, args ...any) error {
	return settings.Errorf("command line", format, args...)
}
