package main

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"
)

func (c *cli) languageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "language",
		Aliases: []string{"languages", "lang"},
		Short:   "Accepted language ids and what the ready nodes report for them",
		Args:    groupArgs,
		RunE:    groupRun,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List language ids with their pool, ready nodes and reported versions",
		Long: `List every language id a submission may name, its pool and standard, the
ready nodes (enabled, online) that report it and the compiler or runtime
variants they report. MIXED marks a language whose ready nodes disagree.`,
		Args: exactArgs(),
		RunE: c.action(func(*cobra.Command, []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			r, err := api.ListLanguagesWithResponse(c.ctx)
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.emit(r.JSON200, func() error {
				w := c.table()
				row(w, "LANGUAGE", "POOL", "STANDARD", "READY NODES", "VERSIONS", "MIN MEMORY")
				for _, l := range r.JSON200.Languages {
					versions := "-"
					if len(l.Variants) > 0 {
						versions = ""
						for i, v := range l.Variants {
							if i > 0 {
								versions += ", "
							}
							versions += fmt.Sprintf("%s (%d)", orDash(v.Version), v.Nodes)
						}
					}
					if l.Mixed {
						versions += " MIXED"
					}
					row(w, l.Id, l.Pool, orDash(l.Standard), l.ReadyNodes, versions, fmt.Sprintf("%dMiB", l.MinMemoryBytes>>20))
				}
				return w.Flush()
			})
		}),
	})
	return cmd
}
