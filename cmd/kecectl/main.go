// Command kecectl is the admin CLI of the KECE judge pool, over the generated
// admin API client. Verbs mirror the API's resources:
//
//	kecectl host-group list | create --name N --slots S | resize ID --slots S [--revision R]
//	kecectl node list [--pool P] [--state S] | show ID
//	kecectl node create --name N --pool P --group ID --slots S [--address URL]
//	kecectl node verify|enable|drain|revoke|rotate ID --reason TEXT
//	kecectl node disable ID --reason TEXT [--force]
//	kecectl node resize ID --slots S --reason TEXT [--revision R]
//	kecectl node join-code ID | probe ID
//	kecectl job list [--state S] [--pool P] [--kind K] [--type T] [--limit N] [--before ID]
//	kecectl job show ID | rejudge ID --reason TEXT | cancel ID --reason TEXT
//	kecectl events dead [--limit N] | redeliver ID --reason TEXT
//	kecectl reconcile
//
// The control plane is KECE_ADMIN_URL or --url; the admin token is
// KECE_ADMIN_TOKEN or the file named by --token-file. Output is a table;
// --json prints the API's JSON. Exit codes: 0 ok, 1 the API or network
// refused, 2 usage, 3 reconcile found violations.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// Exit codes.
const (
	exitOK        = 0
	exitFailed    = 1
	exitUsage     = 2
	exitViolation = 3
)

// run executes one command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	cli, rest, err := parseGlobal(args, getenv)
	if err == nil {
		cli.out, cli.ctx = stdout, ctx
		err = cli.dispatch(rest)
	}
	var ue *usageError
	var ve violationsFound
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errHelp):
		fmt.Fprint(stdout, usageText)
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "kecectl: %s\n", ue.msg)
		if ue.hint != "" {
			fmt.Fprintf(stderr, "usage: %s\n", ue.hint)
		} else {
			fmt.Fprint(stderr, "run 'kecectl help' for the commands\n")
		}
		return exitUsage
	case errors.As(err, &ve):
		return exitViolation
	}
	fmt.Fprintf(stderr, "kecectl: %v\n", err)
	return exitFailed
}

const usageText = `kecectl — admin CLI of the KECE judge pool

Connection: KECE_ADMIN_URL or --url URL; admin token: KECE_ADMIN_TOKEN or --token-file FILE.
Output: a table; --json prints the API's JSON.

  host-group list
  host-group create --name NAME --slots N
  host-group resize ID --slots N [--revision R]
  node list [--pool POOL] [--state STATE]
  node show ID
  node create --name NAME --pool POOL --group HOST_GROUP_ID --slots N [--address URL]
  node verify|enable|drain|revoke|rotate ID --reason TEXT
  node disable ID --reason TEXT [--force]
  node resize ID --slots N --reason TEXT [--revision R]
  node join-code ID
  node probe ID
  job list [--state S] [--pool P] [--kind K] [--type T] [--limit N] [--before ID]
  job show ID
  job rejudge ID --reason TEXT
  job cancel ID --reason TEXT
  events dead [--limit N] [--before ID]
  events redeliver ID --reason TEXT
  reconcile            (exit 3 when an invariant is violated)
`
