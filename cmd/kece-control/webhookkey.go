package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/cmd/internal/clikit"
	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/control/atrest"
	"github.com/kece-oj/kece/control/store"
)

// webhookKeyFlags registers the key that encrypts the webhook groups'
// secrets in the database (KECE_WEBHOOK_KEY_FILE) and, during a key
// rotation, the previous one (KECE_WEBHOOK_OLD_KEY_FILE), which only
// decrypts.
func webhookKeyFlags(fs *settings.FlagSet) (key, old *string) {
	key = fs.Secret("webhook-key", "KECE_WEBHOOK_KEY", "KECE_WEBHOOK_KEY_FILE",
		"key that encrypts the webhook groups' signing secrets in the database (kecekey_…; kece-control webhook-key new)")
	old = fs.Secret("webhook-old-key", "KECE_WEBHOOK_OLD_KEY", "KECE_WEBHOOK_OLD_KEY_FILE",
		"previous webhook key, still accepted to decrypt during a key rotation (then: kece-control webhook-key reencrypt)")
	return key, old
}

// webhookKeyring reads the configured keys; nil without a key (webhook
// groups then cannot store secrets, and stored ones do not open).
func webhookKeyring(fs *settings.FlagSet, keyText, oldText string) (*atrest.Keyring, error) {
	src := func(name string) string {
		if fs.Lookup(name+"-file").Value.String() != "" {
			return fs.Source(name + "-file")
		}
		return fs.Source(name)
	}
	var errs []error
	if keyText == "" {
		if oldText != "" {
			errs = append(errs, settings.Errorf(src("webhook-old-key"), "an old key needs the new one: set KECE_WEBHOOK_KEY_FILE too"))
		}
		return nil, errors.Join(errs...)
	}
	key, err := atrest.ParseKey(keyText)
	if err != nil {
		errs = append(errs, settings.Errorf(src("webhook-key"), "%v", err))
	}
	var old []atrest.Key
	if oldText != "" {
		k, err := atrest.ParseKey(oldText)
		if err != nil {
			errs = append(errs, settings.Errorf(src("webhook-old-key"), "%v", err))
		}
		old = append(old, k)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return atrest.NewKeyring(key, old...), nil
}

// webhookKeyCommand makes a key, prints a key's id, and re-encrypts the
// stored secrets with the current key after a key rotation.
func webhookKeyCommand(cio cmdIO) *cobra.Command {
	newCmd := &cobra.Command{
		Use: "new", Short: "Print a fresh webhook encryption key (write it to the file KECE_WEBHOOK_KEY_FILE names, mode 0600)", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(cio.stdout, atrest.NewKeyText())
			return err
		},
	}
	idFS := settings.NewFlagSet("webhook-key id", cio.getenv)
	idKey, idOld := webhookKeyFlags(idFS)
	id := clikit.Bind(&cobra.Command{Use: "id", Short: "Print the id of the configured key(s): what the admin API shows as a secret's keyId", Args: cobra.NoArgs}, idFS,
		func(*cobra.Command, []string) error {
			for _, text := range []string{*idKey, *idOld} {
				if text == "" {
					continue
				}
				k, err := atrest.ParseKey(text)
				if err != nil {
					return settings.Errorf("KECE_WEBHOOK_KEY_FILE", "%v", err)
				}
				fmt.Fprintln(cio.stdout, k.ID())
			}
			if *idKey == "" {
				return settings.Errorf("KECE_WEBHOOK_KEY_FILE", "no key configured: set KECE_WEBHOOK_KEY_FILE or --webhook-key-file")
			}
			return nil
		})
	fs := settings.NewFlagSet("webhook-key reencrypt", cio.getenv)
	dsn := dbFlags(fs)
	key, old := webhookKeyFlags(fs)
	reencrypt := clikit.Bind(&cobra.Command{Use: "reencrypt",
		Short: "Encrypt every stored webhook secret again with KECE_WEBHOOK_KEY_FILE (after a key rotation; KECE_WEBHOOK_OLD_KEY_FILE opens the old ones)",
		Args:  cobra.NoArgs}, fs,
		func(cmd *cobra.Command, _ []string) error {
			keys, err := webhookKeyring(fs, *key, *old)
			if err != nil {
				return err
			}
			if keys == nil {
				return settings.Errorf("KECE_WEBHOOK_KEY_FILE", "no key configured: set KECE_WEBHOOK_KEY_FILE (the new key) and KECE_WEBHOOK_OLD_KEY_FILE (the old one)")
			}
			db, err := openDB(cmd.Context(), fs, *dsn, 2)
			if err != nil {
				return err
			}
			defer db.Close()
			n, unreadable, err := store.NewWebhookGroups(db, keys).Reencrypt(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(cio.stdout, "re-encrypted %d secret(s) with key %s\n", n, keys.CurrentID())
			if len(unreadable) > 0 {
				fmt.Fprintf(cio.stdout, "cannot open the secrets of %d group(s), sealed with a key not given here: %v\n"+
					"give that key as KECE_WEBHOOK_OLD_KEY_FILE, or if it is lost set new secrets: kecectl webhook rotate GROUP --overlap 0\n",
					len(unreadable), unreadable)
				return fmt.Errorf("%d group(s) left unreadable", len(unreadable))
			}
			return nil
		})
	return clikit.Group(&cobra.Command{Use: "webhook-key", Short: "Make, identify or rotate the key that encrypts webhook secrets in the database"}, newCmd, id, reencrypt)
}
