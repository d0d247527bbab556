package main

import (
	"fmt"

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

// webhookSecret prints a new whsec_ secret, or the whsec_ form of the
// configured one(s): what a receiver's Standard Webhooks verifier needs,
// also for a raw secret file written before the standard.
func webhookSecret(args []string, cio cmdIO) error {
	if len(args) == 0 || (args[0] != "new" && args[0] != "show") {
		return usagef("say new (print a fresh whsec_ secret) or show (print the whsec_ form of KECE_WEBHOOK_SECRET_FILE)")
	}
	fs := settings.NewFlagSet("webhook-secret "+args[0], cio.getenv)
	fs.SetOutput(cio.stdout)
	text := webhookSecretFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if args[0] == "new" {
		fmt.Fprintln(cio.stdout, webhook.NewSecret().String())
		return nil
	}
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
}
