// Command kecectl is the admin CLI of the KECE judge pool, over the generated
// admin API client. Verbs mirror the API's resources, Nomad-style:
//
//	kecectl host-group list | create | resize
//	kecectl node list | show | create | verify | enable | drain | disable | resize | join-code | rotate | revoke | probe
//	kecectl job list | show | rejudge | cancel
//	kecectl events dead | redeliver
//	kecectl language list
//	kecectl reconcile
//	kecectl version | completion bash|zsh|fish | man --dir DIR
//
// Nodes and host groups are addressed by name or id (names are unique).
// Every command takes -o table|json|yaml. `kecectl COMMAND --help` works with
// no server and no token. The control plane is KECE_ADMIN_URL or --url; the
// admin token is KECE_ADMIN_TOKEN, or the file named by KECE_ADMIN_TOKEN_FILE
// or --token-file.
//
// Exit codes (the same across KECE's binaries, see docs/operations.md):
// 0 ok; 1 the API, the network or a waited-for outcome failed; 2 usage or
// configuration error; 3 reconcile found violations.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
