package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/cmd/internal/clikit"
	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/worker"
)

// HealthcheckTimeoutDefault bounds `kece-node healthcheck`.
const HealthcheckTimeoutDefault = 5 * time.Second

// runHealthcheck is `kece-node healthcheck`: GET the running node's /healthz
// on KECE_LISTEN and exit 0 on 200, 1 otherwise (unreachable, or 503 for an
// unhealthy dependency). It is the Compose healthcheck: the node images have
// no curl or wget.
func healthcheckCommand(getenv func(string) string) *cobra.Command {
	st := settings.NewFlagSet("kece-node healthcheck", getenv)
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 if the running node's /healthz answers 200, else 1",
		Args:  cobra.NoArgs,
	}
	listen := st.String("listen", "KECE_LISTEN", worker.ListenDefault, "address the node serves /healthz on")
	timeout := st.Duration("timeout", "KECE_HEALTHCHECK_TIMEOUT", HealthcheckTimeoutDefault, "give up after this long")
	quiet := st.Bool("quiet", "KECE_HEALTHCHECK_QUIET", false, "print nothing, only set the exit status")
	return clikit.Bind(cmd, st, func(cmd *cobra.Command, _ []string) error {
		if code := runHealthcheck(*listen, *timeout, *quiet, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != exitOK {
			return &clikit.Exit{Code: code}
		}
		return nil
	})
}

func runHealthcheck(listen string, timeout time.Duration, quiet bool, stdout, stderr io.Writer) int {
	url, err := healthURL(listen)
	if err != nil {
		fmt.Fprintf(stderr, "kece-node healthcheck: %v\n", err)
		return exitConfig
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "kece-node healthcheck: %v\n", err)
		return exitConfig
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "kece-node healthcheck: %s: %v\n", url, err)
		return exitFailure
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if !quiet {
		_, _ = stdout.Write(body)
	}
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "kece-node healthcheck: %s answered %s\n", url, resp.Status)
		return exitFailure
	}
	return exitOK
}

// healthURL is the loopback URL of /healthz for a listen address; a
// wildcard host (":9464", "0.0.0.0:9464") is reached on loopback.
func healthURL(listen string) (string, error) {
	if listen == "" || listen == "off" {
		return "", errors.New("KECE_LISTEN is off: the node serves no /healthz to check (set KECE_LISTEN, e.g. 127.0.0.1:9464)")
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("KECE_LISTEN %q is not host:port: %v", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}
