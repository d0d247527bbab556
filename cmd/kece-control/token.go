package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/cmd/internal/clikit"
	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/control/ratelimit"
	"github.com/kece-oj/kece/control/store"
)

var tokenFormats = []string{"table", "json", "yaml"}

// tokenFlags are one token command's settings; the ones it does not take
// stay nil.
type tokenFlags struct {
	fs                      *settings.FlagSet
	dsn, kind               *string
	name, out, types, group *string
	expiresIn, overlap      *time.Duration
	rate                    *float64
	burst                   *int
}

func tokenCommand(cio cmdIO) *cobra.Command {
	var subs []*cobra.Command
	for _, a := range []struct{ use, short string }{
		{"create", "Create a token and print its secret once (only its hash is stored)"},
		{"list", "List the tokens (never their secrets)"},
		{"rotate", "Issue a new secret for a token; the old one stays valid for --overlap"},
		{"revoke", "Revoke a token now"},
	} {
		action := a.use
		tf := newTokenFlags(action, cio.getenv)
		use := action + " --kind admin|business --name NAME"
		if action == "list" {
			use = "list [--kind admin|business]"
		}
		subs = append(subs, clikit.Bind(&cobra.Command{Use: use, Short: a.short, Args: cobra.NoArgs}, tf.fs,
			func(cmd *cobra.Command, _ []string) error { return token(cmd.Context(), action, tf, cio) }))
	}
	return clikit.Group(&cobra.Command{Use: "token", Short: "Create, list, rotate or revoke admin and business API tokens"}, subs...)
}

func newTokenFlags(action string, getenv func(string) string) *tokenFlags {
	fs := settings.NewFlagSet("token "+action, getenv)
	tf := &tokenFlags{fs: fs, dsn: dbFlags(fs)}
	tf.kind = fs.String("kind", "KECE_TOKEN_KIND", "", "admin or business")
	if action != "list" {
		tf.name = fs.String("name", "KECE_TOKEN_NAME", "", "the token's holder (lowercase, digits, . _ -)")
	}
	if action == "create" || action == "rotate" {
		tf.expiresIn = fs.Duration("expires-in", "KECE_TOKEN_EXPIRES_IN", 0, "the token expires this long from now (e.g. 90d); 0: no expiry (rotate: keep the current one)")
	}
	if action == "create" {
		tf.types = fs.String("submission-types", "KECE_TOKEN_SUBMISSION_TYPES", "", "business: comma-separated submission types the token may use (empty: every type)")
		tf.group = fs.String("consumer-group", "KECE_TOKEN_CONSUMER_GROUP", "", "business: the settlement-event consumer group (empty: "+store.DefaultConsumerGroup+")")
		tf.rate = fs.Float("rate", "KECE_TOKEN_RATE", 0, "business: requests per second on each replica, with --burst (not given: serve's --business-rate; 0 with --burst 0: unlimited)")
		tf.burst = fs.Int("burst", "KECE_TOKEN_BURST", 0, "business: requests at once, with --rate (at least 1 with a positive rate)")
	}
	if action == "rotate" {
		tf.overlap = fs.Duration("overlap", "KECE_TOKEN_OVERLAP", store.TokenOverlapDefault, "how long the old secret stays valid next to the new one (0: stops now)")
	}
	if action == "list" {
		tf.out = outputFlag(fs, "table", tokenFormats...)
	}
	return tf
}

func token(ctx context.Context, action string, tf *tokenFlags, cio cmdIO) error {
	fs, kind, name, out, expiresIn, overlap := tf.fs, tf.kind, tf.name, tf.out, tf.expiresIn, tf.overlap
	var k store.TokenKind
	switch strings.ToLower(*kind) {
	case "admin":
		k = store.TokenAdmin
	case "business":
		k = store.TokenBusiness
	case "":
		if action != "list" {
			return settings.Errorf(fs.Source("kind"), "--kind must be admin or business")
		}
	default:
		return settings.Errorf(fs.Source("kind"), "--kind must be admin or business, got %q", *kind)
	}
	if name != nil && *name == "" {
		return settings.Errorf(fs.Source("name"), "--name is required")
	}
	if out != nil {
		if err := checkOutput(fs, *out, tokenFormats...); err != nil {
			return err
		}
	}
	if expiresIn != nil && *expiresIn > store.TokenMaxLifetime {
		return settings.Errorf(fs.Source("expires-in"), "at most %s", store.TokenMaxLifetime)
	}
	if overlap != nil && *overlap > store.TokenMaxOverlap {
		return settings.Errorf(fs.Source("overlap"), "at most %s", store.TokenMaxOverlap)
	}
	db, err := openDB(ctx, fs, *tf.dsn, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := store.New(db, store.Config{})
	if err != nil {
		return err
	}
	switch action {
	case "list":
		return listTokens(ctx, st, k, *out, cio)
	case "revoke":
		live, err := st.RevokeToken(ctx, k, *name)
		if err != nil {
			return err
		}
		if !live {
			return fmt.Errorf("no live %s token named %q", strings.ToLower(*kind), *name)
		}
		fmt.Fprintf(cio.stdout, "revoked %s token %q\n", strings.ToLower(*kind), *name)
		return nil
	case "rotate":
		tok, err := st.RotateToken(ctx, store.RotateSpec{Kind: k, Name: *name, Overlap: *overlap, ExpiresIn: *expiresIn})
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no live %s token named %q (a revoked token cannot be rotated; create a new one)", strings.ToLower(*kind), *name)
		}
		if err != nil {
			return err
		}
		// Shown once; only its hash is stored. The old secret's end goes to
		// stderr so `tok=$(kece-control token rotate …)` captures the token only.
		fmt.Fprintln(cio.stdout, tok)
		fmt.Fprintf(cio.stderr, "the previous secret of %s token %q stays valid for %s\n", strings.ToLower(*kind), *name, *overlap)
		return nil
	}
	spec := store.TokenSpec{Kind: k, Name: *name, ExpiresIn: *expiresIn, SubmissionTypes: splitList(*tf.types), ConsumerGroup: *tf.group}
	if k == store.TokenAdmin && (len(spec.SubmissionTypes) > 0 || spec.ConsumerGroup != "" || fs.Given("rate") || fs.Given("burst")) {
		return settings.Errorf(fs.Source("submission-types"), "--submission-types, --consumer-group, --rate and --burst are for business tokens only")
	}
	switch {
	case fs.Given("rate") != fs.Given("burst"):
		return settings.Errorf(fs.Source("rate")+"/"+fs.Source("burst"), "--rate and --burst go together, e.g. --rate 5 --burst 20 (--rate 0 --burst 0: unlimited)")
	case fs.Given("rate"):
		spec.RateLimit = &ratelimit.Limit{Rate: *tf.rate, Burst: *tf.burst}
	}
	tok, err := st.IssueToken(ctx, spec)
	var ve *store.ValidationError
	if errors.As(err, &ve) {
		if flag, ok := map[string]string{"submissionTypes": "submission-types", "consumerGroup": "consumer-group",
			"rateLimit.rate": "rate", "rateLimit.burst": "burst"}[ve.Field]; ok {
			return settings.Errorf(fs.Source(flag), "%s", ve.Problem)
		}
	}
	if err != nil {
		return err
	}
	// Shown once; only its hash is stored.
	fmt.Fprintln(cio.stdout, tok)
	return nil
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func listTokens(ctx context.Context, st *store.Store, kind store.TokenKind, out string, cio cmdIO) error {
	toks, err := st.ListTokens(ctx, kind)
	if err != nil {
		return err
	}
	if toks == nil {
		toks = []store.TokenInfo{}
	}
	switch out {
	case "json":
		return writeJSON(cio.stdout, toks)
	case "yaml":
		return writeYAML(cio.stdout, toks)
	}
	ts := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	}
	rows := make([][]string, 0, len(toks))
	for _, t := range toks {
		types, group, limit := "-", "-", "-"
		if t.Kind == store.TokenBusiness {
			types, group, limit = "*", t.ConsumerGroup, "default"
			if t.SubmissionTypes != nil {
				types = strings.Join(t.SubmissionTypes, ",")
			}
			if t.RateLimit != nil {
				limit = t.RateLimit.String()
			}
		}
		rows = append(rows, []string{strings.ToLower(string(t.Kind)), t.Name, t.State, ts(&t.CreatedAt), ts(t.LastUsedAt), ts(t.ExpiresAt), ts(t.PreviousValidUntil),
			types, group, limit})
	}
	return writeTable(cio.stdout, []string{"KIND", "NAME", "STATE", "CREATED", "LAST USED", "EXPIRES", "OLD SECRET UNTIL", "TYPES", "GROUP", "RATE LIMIT"}, rows)
}
