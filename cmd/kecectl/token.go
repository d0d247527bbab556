package main

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/internal/duration"
)

func (c *cli) tokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "token",
		Aliases: []string{"tokens"},
		Short:   "Business client tokens: submission-type scope and consumer group",
		Long: `A business token may be scoped to submission types (it then enqueues, reads,
rejudges, cancels and receives settlement events of those types only) and
belongs to one settlement-event consumer group (default: "default"); every
group receives each settlement of its tokens' types once, with its own
delivery state. Each business token has a request budget: its own rate
and burst, or the control plane's default (--business-rate, --business-burst);
over it, requests answer 429 RATE_LIMITED. Admin tokens are made with
kece-control token create.`,
		Args: groupArgs,
		RunE: groupRun,
	}
	cmd.AddCommand(c.tokenList(), c.tokenCreate(), c.tokenUpdate(), c.tokenRevoke())
	return cmd
}

func (c *cli) tokenList() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List business tokens with their types and consumer group (never a secret)",
		Args:  exactArgs(),
		RunE: c.action(func(*cobra.Command, []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			r, err := api.ListBusinessTokensWithResponse(c.ctx)
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.emit(r.JSON200, func() error {
				w := c.table()
				row(w, "NAME", "STATE", "TYPES", "GROUP", "RATE LIMIT", "CREATED", "LAST USED", "EXPIRES")
				for _, t := range r.JSON200.Tokens {
					row(w, t.Name, t.State, typesText(t.SubmissionTypes), t.ConsumerGroup, rateLimitText(t.RateLimit), stamp(t.CreatedAt),
						stampOr(t.LastUsedAt), stampOr(t.ExpiresAt))
				}
				return w.Flush()
			})
		}),
	}
}

func (c *cli) tokenCreate() *cobra.Command {
	var name, group string
	var types []string
	var expiresIn time.Duration
	var lim rateLimitFlags
	cmd := &cobra.Command{
		Use:   "create --name NAME [--submission-types T,...] [--consumer-group G] [--expires-in D] [--rate R --burst B]",
		Short: "Issue a business token; the secret is printed once",
		Example: `  kecectl token create --name algo-backend --submission-types ALGO --consumer-group algo
  tok=$(kecectl token create --name grader)   # every type, the default group
  kecectl token create --name batch-importer --rate 5 --burst 20`,
		Args: exactArgs(),
		RunE: c.action(func(cmd *cobra.Command, _ []string) error {
			if expiresIn < 0 {
				return usagef("--expires-in must not be negative")
			}
			own, err := lim.limit(cmd, false)
			if err != nil {
				return err
			}
			body := adminapi.BusinessTokenCreate{Name: name, RateLimit: own}
			if len(types) > 0 {
				for i, t := range types {
					types[i] = strings.TrimSpace(t)
				}
				body.SubmissionTypes = &types
			}
			if group != "" {
				body.ConsumerGroup = &group
			}
			if expiresIn > 0 {
				ms := expiresIn.Milliseconds()
				body.ExpiresInMs = &ms
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			r, err := api.CreateBusinessTokenWithResponse(c.ctx, body)
			if err := c.result(r, err, http.StatusCreated); err != nil {
				return err
			}
			return c.emit(r.JSON201, func() error {
				// The secret alone on stdout, so tok=$(kecectl token create …)
				// captures it; what it may do goes to stderr.
				t := r.JSON201.BusinessToken
				fmt.Fprintf(c.errOut, "business token %s: types %s, consumer group %s (the secret is shown once)\n",
					t.Name, typesText(t.SubmissionTypes), t.ConsumerGroup)
				_, err := fmt.Fprintln(c.out, r.JSON201.Token)
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "unique token name (lower case): the business backend it is for")
	cmd.Flags().StringSliceVar(&types, "submission-types", nil, "submission types the token may use, e.g. ALGO,DATABASE (default: every type)")
	cmd.Flags().StringVar(&group, "consumer-group", "", `settlement-event consumer group (default "default")`)
	cmd.Flags().Var(duration.Value{D: &expiresIn}, "expires-in", "the token expires this long from now, e.g. 90d (default: no expiry)")
	lim.add(cmd, false)
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func (c *cli) tokenUpdate() *cobra.Command {
	var lim rateLimitFlags
	cmd := &cobra.Command{
		Use:   "update NAME (--rate R --burst B | --default-rate-limit)",
		Short: "Change a business token's request budget; every replica applies it at the token's next request",
		Example: `  kecectl token update batch-importer --rate 2 --burst 10
  kecectl token update trusted-backend --rate 0 --burst 0   # unlimited
  kecectl token update batch-importer --default-rate-limit`,
		Args: exactArgs("NAME"),
		RunE: c.action(func(cmd *cobra.Command, args []string) error {
			own, err := lim.limit(cmd, true)
			if err != nil {
				return err
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			r, err := api.SetBusinessTokenRateLimitWithResponse(c.ctx, args[0], adminapi.RateLimitUpdate{RateLimit: own})
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.emit(r.JSON200, func() error {
				_, err := fmt.Fprintf(c.out, "business token %s: rate limit %s\n", r.JSON200.Name, rateLimitText(r.JSON200.RateLimit))
				return err
			})
		}),
	}
	lim.add(cmd, true)
	return cmd
}

// rateLimitFlags are a token's budget on the command line.
type rateLimitFlags struct {
	rate  float64
	burst int
	def   bool
}

func (f *rateLimitFlags) add(cmd *cobra.Command, update bool) {
	cmd.Flags().Float64Var(&f.rate, "rate", 0, "requests per second the token may make on each replica (0 with --burst 0: unlimited; default: the control plane's --business-rate)")
	cmd.Flags().IntVar(&f.burst, "burst", 0, "requests the token may make at once (at least 1 with a positive --rate)")
	if update {
		cmd.Flags().BoolVar(&f.def, "default-rate-limit", false, "return the token to the control plane's default budget")
	}
}

// limit is the budget the flags name: nil for the default. --rate and
// --burst go together (the server checks the values and names the field).
func (f *rateLimitFlags) limit(cmd *cobra.Command, update bool) (*adminapi.RateLimit, error) {
	rate, burst := cmd.Flags().Changed("rate"), cmd.Flags().Changed("burst")
	switch {
	case f.def && (rate || burst):
		return nil, usagef("--default-rate-limit takes no --rate or --burst")
	case f.def:
		return nil, nil
	case rate != burst:
		return nil, usagef("--rate and --burst go together, e.g. --rate 5 --burst 20 (--rate 0 --burst 0: unlimited)")
	case rate:
		return &adminapi.RateLimit{Rate: f.rate, Burst: f.burst}, nil
	case update:
		return nil, usagef("say the new budget: --rate R --burst B, or --default-rate-limit")
	}
	return nil, nil
}

// rateLimitText renders a token's budget.
func rateLimitText(l *adminapi.RateLimit) string {
	switch {
	case l == nil:
		return "default"
	case l.Rate == 0:
		return "unlimited"
	}
	return fmt.Sprintf("%g/s burst %d", l.Rate, l.Burst)
}

func (c *cli) tokenRevoke() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "revoke NAME --reason TEXT",
		Short: "Refuse a business token from now on",
		Args:  exactArgs("NAME"),
		RunE: c.action(func(_ *cobra.Command, args []string) error {
			if err := needReason(reason); err != nil {
				return err
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			r, err := api.RevokeBusinessTokenWithResponse(c.ctx, args[0], adminapi.ReasonRequest{Reason: reason})
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.emit(r.JSON200, func() error {
				_, err := fmt.Fprintf(c.out, "business token %s is %s\n", r.JSON200.Name, r.JSON200.State)
				return err
			})
		}),
	}
	reasonFlag(cmd, &reason)
	return cmd
}

// typesText renders a token's scope: "*" for every type.
func typesText(types *[]string) string {
	if types == nil {
		return "*"
	}
	return strings.Join(*types, ",")
}

func stampOr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return stamp(*t)
}
