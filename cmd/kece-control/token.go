package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/kece-oj/kece/control/store"
)

func token(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || (args[0] != "create" && args[0] != "revoke") {
		return usagef("usage: kece-control token create|revoke --kind admin|business --name NAME")
	}
	action := args[0]
	fs := flag.NewFlagSet("token "+action, flag.ContinueOnError)
	dsn := dsnFlag(fs)
	kind := fs.String("kind", "", "admin or business")
	name := fs.String("name", "", "a name for the token's holder (lowercase, digits, . _ -)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	var k store.TokenKind
	switch strings.ToLower(*kind) {
	case "admin":
		k = store.TokenAdmin
	case "business":
		k = store.TokenBusiness
	default:
		return usagef("--kind must be admin or business, got %q", *kind)
	}
	if *name == "" {
		return usagef("--name is required")
	}
	db, err := openDB(ctx, *dsn, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := store.New(db, store.Config{})
	if err != nil {
		return err
	}
	if action == "revoke" {
		live, err := st.RevokeToken(ctx, k, *name)
		if err != nil {
			return err
		}
		if !live {
			return fmt.Errorf("no live %s token named %q", strings.ToLower(*kind), *name)
		}
		fmt.Fprintf(stdout, "revoked %s token %q\n", strings.ToLower(*kind), *name)
		return nil
	}
	tok, err := st.CreateToken(ctx, k, *name)
	if err != nil {
		return err
	}
	// Shown once; only its hash is stored.
	fmt.Fprintln(stdout, tok)
	return nil
}
