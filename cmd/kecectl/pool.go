package main

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/contracts/adminapi"
)

func (c *cli) poolCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "pool",
		Aliases: []string{"pools"},
		Short:   "Judge pools: how their recent submissions ended",
		Args:    groupArgs,
		RunE:    groupRun,
	}
	cmd.AddCommand(c.poolVerdicts())
	return cmd
}

func (c *cli) poolVerdicts() *cobra.Command {
	var minutes int
	cmd := &cobra.Command{
		Use:   "verdicts [--minutes N]",
		Short: "Per pool, the submissions finished in the last minutes, by outcome",
		Args:  exactArgs(),
		RunE: c.action(func(*cobra.Command, []string) error {
			if minutes < 1 || minutes > 1440 {
				return usagef("--minutes must be 1..1440")
			}
			m := int32(minutes)
			api, err := c.api()
			if err != nil {
				return err
			}
			r, err := api.GetVerdictMixWithResponse(c.ctx, &adminapi.GetVerdictMixParams{Minutes: &m})
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			mix := r.JSON200
			return c.emit(mix, func() error {
				fmt.Fprintf(c.out, "last %d minutes, as of %s\n", mix.Minutes, stamp(mix.AsOf))
				w := c.table()
				row(w, "POOL", "FINISHED", "PER MINUTE", "OUTCOMES")
				for _, p := range mix.Pools {
					var parts []string
					for _, o := range p.Outcomes {
						parts = append(parts, fmt.Sprintf("%s %d", o.Outcome, o.Count))
					}
					row(w, p.Pool, p.Finished, fmt.Sprintf("%.1f", float64(p.Finished)/float64(mix.Minutes)), orDash(strings.Join(parts, ", ")))
				}
				return w.Flush()
			})
		}),
	}
	cmd.Flags().IntVar(&minutes, "minutes", 15, "window length in minutes (1..1440)")
	return cmd
}
