package main

import (
	"fmt"
	"net/http"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/kece-oj/kece/internal/buildinfo"
)

func (c *cli) reconcileCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "reconcile",
		Short: "Check the scheduling invariants (exit 3 when one is violated)",
		Args:  exactArgs(),
		RunE: c.action(func(*cobra.Command, []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			r, err := api.ReconcileWithResponse(c.ctx)
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			rep := r.JSON200
			err = c.emit(rep, func() error {
				fmt.Fprintf(c.out, "as of %s: %d rules checked, %d violations\n", stamp(rep.AsOf), len(rep.RulesChecked), len(rep.Violations))
				if len(rep.Violations) == 0 {
					return nil
				}
				w := c.table()
				row(w, "RULE", "SUBJECT", "ID", "MESSAGE")
				for _, v := range rep.Violations {
					row(w, v.Rule, v.SubjectType, v.SubjectId, v.Message)
				}
				return w.Flush()
			})
			if err != nil {
				return err
			}
			if !rep.Ok {
				return violationsFound(len(rep.Violations))
			}
			return nil
		}),
	}
}

func (c *cli) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kecectl's build version",
		Args:  exactArgs(),
		RunE: c.action(func(*cobra.Command, []string) error {
			i := buildinfo.Read()
			return c.emit(i, func() error {
				_, err := fmt.Fprintln(c.out, buildinfo.String("kecectl"))
				return err
			})
		}),
	}
}

func (c *cli) manCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:     "man --dir DIR",
		Short:   "Write man pages for every command into DIR",
		Example: "  kecectl man --dir /usr/local/share/man/man1 && man kecectl-node-drain",
		Args:    exactArgs(),
		RunE: c.action(func(cmd *cobra.Command, _ []string) error {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return usagef("--dir %s: %v", dir, err)
			}
			hdr := &doc.GenManHeader{Title: "KECECTL", Section: "1", Source: "kecectl " + buildinfo.Version(), Manual: "KECE judge pool"}
			if err := doc.GenManTree(cmd.Root(), hdr, dir); err != nil {
				return fmt.Errorf("man pages: %w", err)
			}
			_, err := fmt.Fprintf(c.out, "man pages written to %s\n", dir)
			return err
		}),
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write the pages to (created if missing)")
	_ = cmd.MarkFlagRequired("dir")
	_ = cmd.MarkFlagDirname("dir")
	return cmd
}
