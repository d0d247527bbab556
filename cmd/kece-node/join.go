package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/cmd/internal/clikit"
	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/worker"
)

// joinCommand is `kece-node join`: the flags bind a JoinOptions.
func joinCommand(getenv func(string) string) *cobra.Command {
	st := settings.NewFlagSet("kece-node join", getenv)
	cmd := &cobra.Command{
		Use:   "join --control-url URL --pool POOL --join-code-file FILE [--credential-file PATH | --env-file /etc/kece/node-NAME.env]",
		Short: "Exchange a one-time join code for the node credential, then exit",
		Long: `Exchange the one-time join code from 'kecectl node create' for the node
credential, store it (mode 0600, atomically) and exit, so the code never has to
be written into the node's configuration.

Where the credential goes: --credential-file, else KECE_CREDENTIAL_FILE from
the environment or from --env-file (the unit's EnvironmentFile), else
$STATE_DIRECTORY/credential. --control-url and --pool may come from the env
file too. Run as root, join gives the credential's directory (0700) and file
(0600) to --owner (default kece-node, the units' user, when that account
exists).`,
		Args: cobra.NoArgs,
	}
	controlURL := st.String("control-url", "KECE_CONTROL_URL", "", "control plane base URL")
	pool := st.String("pool", "KECE_POOL", "", "pool this node serves: cpp, java, python, arkts or mysql; a code of another pool's node is refused and stays usable")
	code := st.Secret("join-code", "KECE_JOIN_CODE", "KECE_JOIN_CODE_FILE", "one-time join code from 'kecectl node create'")
	credFile := st.String("credential-file", "KECE_CREDENTIAL_FILE", "", "where to store the credential (absolute path; must not exist); default from --env-file or $STATE_DIRECTORY")
	envFile := st.String("env-file", "KECE_JOIN_ENV_FILE", "", "the node's env file (systemd EnvironmentFile format) to read KECE_CREDENTIAL_FILE, KECE_CONTROL_URL and KECE_POOL from")
	owner := st.String("owner", "KECE_JOIN_OWNER", "", "when run as root: USER, USER:GROUP or UID:GID to own the credential (default kece-node if that account exists)")
	timeout := st.Duration("timeout", "KECE_REQUEST_TIMEOUT", worker.RequestTimeoutDefault, "bound of the join call")
	// The names before one name per setting across binaries (CHANGELOG.md).
	st.Deprecated("code", "join-code")
	st.Deprecated("code-file", "join-code-file")
	return clikit.Bind(cmd, st, func(cmd *cobra.Command, _ []string) error {
		o := JoinOptions{ControlURL: *controlURL, Pool: *pool, Code: *code, CredentialFile: *credFile, EnvFile: *envFile,
			Owner: *owner, Timeout: *timeout, Getenv: getenv}
		if code := runJoin(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != exitOK {
			return &clikit.Exit{Code: code}
		}
		return nil
	})
}

// runJoin is `kece-node join`: resolve the options, exchange the one-time
// join code for the node credential, store it (0600, atomically) and exit,
// so the code never has to be written into the node's configuration.
func runJoin(ctx context.Context, o JoinOptions, stdout, stderr io.Writer) int {
	cfg, notes, err := o.resolve(os.Geteuid())
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Fprintf(stderr, "kece-node join: %v\n", err)
		return exitConfig
	}
	for _, n := range notes {
		fmt.Fprintf(stderr, "kece-node join: %s\n", n)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cred, err := worker.Join(ctx, cfg)
	switch {
	case err == nil:
		owned := ""
		if cfg.Owner != nil {
			owned = fmt.Sprintf(", owner %d:%d", cfg.Owner.UID, cfg.Owner.GID)
		}
		fmt.Fprintf(stdout, "joined: %s; credential stored in %s (mode 0600%s)\n", cred, cfg.CredentialFile, owned)
		fmt.Fprintln(stdout, "next: start the node (systemctl start / docker compose up); it needs no join code any more")
		return exitOK
	case errors.Is(err, worker.ErrAlreadyJoined):
		fmt.Fprintf(stderr, "kece-node join: %v\n", err)
		return exitConfig
	case refused(err):
		fmt.Fprintf(stderr, "kece-node join: refused: %v\n", describeJoinRefusal(err))
		return exitRefused
	}
	fmt.Fprintf(stderr, "kece-node join: %v\n", err)
	return exitFailure
}

func describeJoinRefusal(err error) string {
	switch {
	case errors.Is(err, worker.ErrPoolMismatch):
		return fmt.Sprintf("%v; the code is still valid: use it with the --pool of its node (see 'kecectl node show')", err)
	case errors.Is(err, worker.ErrJoinCodeSpent):
		return fmt.Sprintf("%v ('kecectl node join-code NODE' issues a new one)", err)
	case errors.Is(err, worker.ErrJoinCodeInvalid):
		return fmt.Sprintf("%v (check for a typo, or that --control-url is the control plane that issued it)", err)
	}
	return err.Error()
}
