package main

import (
	"cmp"
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
)

// Defaults of `kece-control healthcheck`.
const (
	HealthcheckListenDefault  = "127.0.0.1:8080" // serve's --listen default
	HealthcheckTimeoutDefault = 5 * time.Second
)

// HealthcheckOptions is what `kece-control healthcheck` needs; the command
// line binds to it, whatever parses the flags.
type HealthcheckOptions struct {
	// Listen is the running replica's KECE_LISTEN; a wildcard host is
	// reached on loopback.
	Listen  string
	Timeout time.Duration
	// Quiet prints nothing on success.
	Quiet bool
}

// errUnhealthy: the replica did not answer 200 (exit 1).
var errUnhealthy = errors.New("unhealthy")

// checkHealth GETs the replica's /healthz and returns nil on 200. It is the
// image's HEALTHCHECK, since the images carry no curl or wget. A bad
// listen address is a configuration error (exit 2), anything else
// errUnhealthy (exit 1).
func checkHealth(ctx context.Context, o HealthcheckOptions, stdout io.Writer) error {
	url, err := loopbackHealthURL(o.Listen)
	if err != nil {
		return settings.Errorf("KECE_LISTEN", "%v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(o.Timeout, HealthcheckTimeoutDefault))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return settings.Errorf("KECE_LISTEN", "%v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errUnhealthy, url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s answered %s: %s", errUnhealthy, url, resp.Status, body)
	}
	if !o.Quiet {
		_, _ = stdout.Write(body)
	}
	return nil
}

// loopbackHealthURL is the URL of /healthz for a listen address.
func loopbackHealthURL(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("%q is not host:port (e.g. 0.0.0.0:8080): %v", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}

// healthcheckCommand is `kece-control healthcheck [--listen A] [--timeout D]
// [--quiet]`: exit 0 on 200, 1 when unhealthy, 2 for a bad address.
func healthcheckCommand(cio cmdIO) *cobra.Command {
	fs := settings.NewFlagSet("healthcheck", cio.getenv)
	listen := fs.String("listen", "KECE_LISTEN", HealthcheckListenDefault, "address the replica serves on (serve's --listen)")
	timeout := fs.Duration("timeout", "KECE_HEALTHCHECK_TIMEOUT", HealthcheckTimeoutDefault, "give up after this long")
	quiet := fs.Bool("quiet", "KECE_HEALTHCHECK_QUIET", false, "print nothing, only set the exit status")
	cmd := &cobra.Command{Use: "healthcheck", Args: cobra.NoArgs,
		Short: "Exit 0 if the replica on KECE_LISTEN answers /healthz with 200, else 1 (the image's HEALTHCHECK)"}
	return clikit.Bind(cmd, fs, func(cmd *cobra.Command, _ []string) error {
		err := checkHealth(cmd.Context(), HealthcheckOptions{Listen: *listen, Timeout: *timeout, Quiet: *quiet}, cio.stdout)
		if errors.Is(err, errUnhealthy) {
			return &clikit.Exit{Code: 1, Err: err}
		}
		return err
	})
}
