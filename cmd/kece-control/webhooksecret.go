package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/cmd/internal/clikit"
	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/control/webhook"
)

// webhookSecretFlags registers the webhook secret: KECE_WEBHOOK_SECRET_FILE
// (a file, the form to use) or KECE_WEBHOOK_SECRET.
func webhookSecretFlags(fs *settings.FlagSet) *string {
	return fs.Secret("webhook-secret", "KECE_WEBHOOK_SECRET", "KECE_WEBHOOK_SECRET_FILE", "webhook signing secret(s): whsec_… or an older raw secret, one per line")
}

// parseWebhookSecrets reads the configured secrets, naming the setting on
// error.
func parseWebhookSecrets(fs *settings.FlagSet, text string) ([]webhook.Secret, error) {
	src := fs.Source("webhook-secret")
	if fs.Lookup("webhook-secret-file").Value.String() != "" {
		src = fs.Source("webhook-secret-file")
	}
	secrets, err := webhook.ParseSecrets(text)
	if err != nil {
		return nil, &settings.Error{Setting: src, Err: err}
	}
	return secrets, nil
}

// webhookSecretCommand prints a new whsec_ secret, or the whsec_ form of
// the configured one(s): what a receiver's Standard Webhooks verifier
// needs, also for a raw secret file written before the standard.
func webhookSecretCommand(cio cmdIO) *cobra.Command {
	newCmd := &cobra.Command{
		Use: "new", Short: "Print a fresh whsec_ secret", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(cio.stdout, webhook.NewSecret().String())
			return err
		},
	}
	fs := settings.NewFlagSet("webhook-secret show", cio.getenv)
	text := webhookSecretFlags(fs)
	show := clikit.Bind(&cobra.Command{Use: "show", Short: "Print the whsec_ form of the configured secret(s) (KECE_WEBHOOK_SECRET_FILE)", Args: cobra.NoArgs}, fs,
		func(*cobra.Command, []string) error {
			if *text == "" {
				return settings.Errorf("KECE_WEBHOOK_SECRET_FILE", "no secret configured: set KECE_WEBHOOK_SECRET_FILE or --webhook-secret-file")
			}
			secrets, err := parseWebhookSecrets(fs, *text)
			if err != nil {
				return err
			}
			for _, s := range secrets {
				fmt.Fprintln(cio.stdout, s.String())
			}
			return nil
		})
	return clikit.Group(&cobra.Command{Use: "webhook-secret", Short: "Make or show the webhook signing secret in its whsec_ form"}, newCmd, show)
}
