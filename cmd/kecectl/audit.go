package main

import (
	"fmt"
	"net/http"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/contracts/adminapi"
)

func (c *cli) auditCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "The audit log: who did what, when, from where",
		Args:  groupArgs,
		RunE:  groupRun,
	}
	cmd.AddCommand(c.auditList())
	return cmd
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// auditRows writes audit entries, each line prefixed with indent, and flushes.
func auditRows(w *tabwriter.Writer, es []adminapi.AuditEntry, indent string) {
	row(w, indent+"ID", "AT", "ACTOR", "FROM", "ACTION", "NODE", "JOB", "REASON")
	for _, e := range es {
		row(w, indent+e.AuditId, stamp(e.At), e.Actor, deref(e.RemoteAddr, "-"), e.Action, deref(e.NodeId, "-"), deref(e.JobId, "-"), e.Reason)
	}
}

func (c *cli) auditList() *cobra.Command {
	var actor, action, node, job, since, until, before string
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--actor A] [--action A] [--node NODE] [--job ID] [--since T] [--until T] [--limit N] [--before ID]",
		Short: "List audit entries, newest first",
		Args:  exactArgs(),
		RunE: c.action(func(*cobra.Command, []string) error {
			if limit < 1 || limit > 500 {
				return usagef("--limit must be 1..500")
			}
			if job != "" && !validID(job) {
				return usagef("--job %q is not a job id (a positive decimal number)", job)
			}
			l := int32(limit)
			p := adminapi.ListAuditParams{Limit: &l}
			var err error
			if p.After, err = timeFlag("--since", since); err != nil {
				return err
			}
			if p.Before, err = timeFlag("--until", until); err != nil {
				return err
			}
			if actor != "" {
				p.Actor = &actor
			}
			if action != "" {
				p.Action = &action
			}
			if job != "" {
				p.JobId = &job
			}
			if before != "" {
				p.BeforeId = &before
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			if node != "" {
				id, err := c.nodeRef(node)
				if err != nil {
					return err
				}
				p.NodeId = &id
			}
			r, err := api.ListAuditWithResponse(c.ctx, &p)
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.emit(r.JSON200, func() error {
				w := c.table()
				auditRows(w, r.JSON200.Entries, "")
				if err := w.Flush(); err != nil {
					return err
				}
				if r.JSON200.NextBeforeId != nil {
					fmt.Fprintf(c.out, "more: --before %s\n", *r.JSON200.NextBeforeId)
				}
				return nil
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&actor, "actor", "", "only this actor, e.g. ADMIN:alice#3 or control-plane")
	f.StringVar(&action, "action", "", "only this action, e.g. node.drain, job.cancel")
	f.StringVar(&node, "node", "", "only entries about this node (name or id)")
	f.StringVar(&job, "job", "", "only entries about this job")
	f.StringVar(&since, "since", "", "only entries at or after: RFC 3339 time, or a duration ago (90m)")
	f.StringVar(&until, "until", "", "only entries before: RFC 3339 time, or a duration ago")
	f.IntVar(&limit, "limit", 50, "page size (1..500)")
	f.StringVar(&before, "before", "", "only entries with a smaller id (the previous page's 'more: --before')")
	return cmd
}
