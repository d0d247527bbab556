package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/internal/duration"
)

func (c *cli) webhookCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "webhook",
		Aliases: []string{"webhooks"},
		Short:   "Webhooks per consumer group: endpoint, delivery settings, signing secrets",
		Long: `Each settlement-event consumer group may push its events to an endpoint of
its own, signed as in Standard Webhooks with the group's secrets; a group
without a webhook is pulled. Every control replica delivers every group, each
with its own concurrency and backoff, so one slow endpoint delays only its
group. Secrets are stored encrypted with the control plane's key
(KECE_WEBHOOK_KEY_FILE) and never shown again after they are set.`,
		Args: groupArgs,
		RunE: groupRun,
	}
	cmd.AddCommand(c.webhookList(), c.webhookSet(), c.webhookRotate(), c.webhookDelete())
	return cmd
}

func (c *cli) webhookList() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the groups with a webhook (never a secret)",
		Args:  exactArgs(),
		RunE: c.action(func(*cobra.Command, []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			r, err := api.ListWebhookGroupsWithResponse(c.ctx)
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.emit(r.JSON200, func() error {
				w := c.table()
				row(w, "GROUP", "URL", "ENABLED", "CONCURRENCY", "TIMEOUT", "ATTEMPTS", "SECRETS", "UPDATED")
				for _, g := range r.JSON200.Groups {
					row(w, g.ConsumerGroup, g.Url, g.Enabled, g.Concurrency, time.Duration(g.TimeoutMs)*time.Millisecond, g.MaxAttempts,
						secretsText(g.Secrets), stamp(g.UpdatedAt))
				}
				return w.Flush()
			})
		}),
	}
}

// secretsText summarizes a group's secrets: how many sign, and a warning
// when one does not open on the server (its key is lost).
func secretsText(ss []adminapi.WebhookSecretInfo) string {
	out := fmt.Sprint(len(ss))
	for _, s := range ss {
		if !s.Readable {
			return out + " (UNREADABLE: key " + s.KeyId + " missing)"
		}
	}
	if len(ss) > 1 {
		out += " (rotating)"
	}
	return out
}

func (c *cli) webhookSet() *cobra.Command {
	var url, secretFile, reason string
	var concurrency, attempts int
	var timeout time.Duration
	var disable, enable bool
	cmd := &cobra.Command{
		Use:   "set GROUP --endpoint URL [--concurrency N] [--timeout D] [--max-attempts N] [--disable] [--secret-file F]",
		Short: "Give a consumer group a webhook, or change its endpoint and settings",
		Long: `Creates the group's webhook or updates it. A new webhook gets the secret in
--secret-file (whsec_…) or a fresh one, printed once on stdout: give it to the
receiver. An update changes only what is given; its secrets change with
rotate.`,
		Example: `  kecectl webhook set default --endpoint https://oj.example/kece/events
  kecectl webhook set algo --endpoint https://algo.example/hook --concurrency 8 --timeout 5s
  kecectl webhook set algo --endpoint https://algo.example/hook --disable   # keep it, stop pushing`,
		Args: exactArgs("GROUP"),
		RunE: c.action(func(cmd *cobra.Command, args []string) error {
			if url == "" {
				return usagef("--endpoint is required: the absolute http(s) URL that receives the events")
			}
			body := adminapi.WebhookGroupPut{Url: url}
			if disable && enable {
				return usagef("give --disable or --enable, not both")
			}
			if disable || enable {
				body.Enabled = &enable
			}
			if cmd.Flags().Changed("concurrency") {
				if concurrency < 1 || concurrency > 32 {
					return usagef("--concurrency must be 1..32")
				}
				body.Concurrency = &concurrency
			}
			if cmd.Flags().Changed("timeout") {
				if timeout < 10*time.Millisecond || timeout > 5*time.Minute {
					return usagef("--timeout must be 10ms..5m")
				}
				ms := timeout.Milliseconds()
				body.TimeoutMs = &ms
			}
			if cmd.Flags().Changed("max-attempts") {
				if attempts < 1 || attempts > 100 {
					return usagef("--max-attempts must be 1..100")
				}
				body.MaxAttempts = &attempts
			}
			var err error
			if body.Secret, body.Reason, err = secretAndReason(secretFile, reason); err != nil {
				return err
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			r, err := api.PutWebhookGroupWithResponse(c.ctx, args[0], body)
			if err == nil && r.StatusCode() == http.StatusOK {
				return c.webhookWritten(r.JSON200, "updated")
			}
			if err := c.result(r, err, http.StatusCreated); err != nil {
				return err
			}
			return c.webhookWritten(r.JSON201, "created")
		}),
	}
	cmd.Flags().StringVar(&url, "endpoint", "", "absolute http(s) URL that receives a signed POST per settlement event (--url is the control plane)")
	cmd.Flags().IntVar(&concurrency, "concurrency", 0, "deliveries in flight at once for this group (new webhook: 4)")
	cmd.Flags().Var(duration.Value{D: &timeout}, "timeout", "bound on one delivery, e.g. 10s (new webhook: 10s)")
	cmd.Flags().IntVar(&attempts, "max-attempts", 0, "failed deliveries before an event is DEAD (new webhook: 8)")
	cmd.Flags().BoolVar(&disable, "disable", false, "keep the webhook but stop pushing (events wait, or are pulled)")
	cmd.Flags().BoolVar(&enable, "enable", false, "push again after --disable")
	cmd.Flags().StringVar(&secretFile, "secret-file", "", "file holding the first secret of a new webhook (whsec_…; default: a fresh one, printed)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (audit log)")
	return cmd
}

func (c *cli) webhookRotate() *cobra.Command {
	var secretFile, reason string
	var overlap time.Duration
	cmd := &cobra.Command{
		Use:   "rotate GROUP [--overlap D] [--secret-file F]",
		Short: "Sign with a new secret; the current ones keep signing for the overlap",
		Long: `Every delivery carries one v1 signature per secret (Standard Webhooks), so
during --overlap the receiver accepts either while it moves to the new secret.
--overlap 0 drops the old secrets at once: for a leaked secret, or when the
control plane's key was lost and the stored secrets no longer open. The new
secret (from --secret-file, or fresh) is printed once on stdout.`,
		Example: `  kecectl webhook rotate algo                 # a fresh secret, the old one signs for 1d more
  kecectl webhook rotate algo --overlap 0     # key lost or secret leaked: replace now`,
		Args: exactArgs("GROUP"),
	}
	cmd.RunE = c.action(func(_ *cobra.Command, args []string) error {
		if overlap < 0 || overlap > 30*24*time.Hour {
			return usagef("--overlap must be 0..30d")
		}
		ms := overlap.Milliseconds()
		body := adminapi.WebhookSecretRotate{OverlapMs: &ms}
		var err error
		if body.Secret, body.Reason, err = secretAndReason(secretFile, reason); err != nil {
			return err
		}
		api, err := c.api()
		if err != nil {
			return err
		}
		r, err := api.RotateWebhookSecretWithResponse(c.ctx, args[0], body)
		if err := c.result(r, err, http.StatusOK); err != nil {
			return err
		}
		return c.webhookWritten(r.JSON200, "rotated")
	})
	overlap = 24 * time.Hour
	cmd.Flags().Var(duration.Value{D: &overlap}, "overlap", "how long the current secrets keep signing, e.g. 7d; 0 drops them now (default 1d)")
	cmd.Flags().StringVar(&secretFile, "secret-file", "", "file holding the new secret (whsec_…; default: a fresh one, printed)")
	cmd.Flags().StringVar(&reason, "reason", "", "why (audit log)")
	return cmd
}

func (c *cli) webhookDelete() *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP",
		Short: "Stop pushing a group's events and delete its secrets (the group is pulled again)",
		Args:  exactArgs("GROUP"),
		RunE: c.action(func(_ *cobra.Command, args []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			r, err := api.DeleteWebhookGroupWithResponse(c.ctx, args[0])
			if err := c.result(r, err, http.StatusNoContent); err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.out, "webhook of group %s deleted\n", args[0])
			return err
		}),
	}
}

// webhookWritten prints a written webhook: a generated secret alone on
// stdout (secret=$(kecectl webhook rotate g) captures it), the rest on
// stderr; or the whole answer with -o json|yaml.
func (c *cli) webhookWritten(w *adminapi.WebhookGroupWritten, what string) error {
	return c.emit(w, func() error {
		g := w.WebhookGroup
		fmt.Fprintf(c.errOut, "webhook of group %s %s: %s, enabled %t, concurrency %d, %d secret(s) signing\n",
			g.ConsumerGroup, what, g.Url, g.Enabled, g.Concurrency, len(g.Secrets))
		if w.Secret != nil {
			fmt.Fprintln(c.errOut, "new secret (shown once; configure it in the receiver's verifier):")
			_, err := fmt.Fprintln(c.out, *w.Secret)
			return err
		}
		return nil
	})
}

// secretAndReason reads a webhook write's --secret-file (when given) and
// takes its --reason (when given), as the admin API's optional fields.
func secretAndReason(secretFile, reason string) (secret, why *string, err error) {
	if secretFile != "" {
		s, err := settings.ReadSecretFile("--secret-file", secretFile)
		if err != nil {
			return nil, nil, usagef("%v", err)
		}
		secret = &s
	}
	if reason != "" {
		why = &reason
	}
	return secret, why, nil
}
