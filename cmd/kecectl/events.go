package main

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/contracts/adminapi"
)

func (c *cli) eventsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "events",
		Aliases: []string{"event"},
		Short:   "Settlement events: dead letters and redelivery",
		Args:    groupArgs,
		RunE:    groupRun,
	}
	cmd.AddCommand(c.eventsDead(), c.eventsRedeliver())
	return cmd
}

func (c *cli) eventsDead() *cobra.Command {
	var limit int
	var before, group string
	cmd := &cobra.Command{
		Use:   "dead [--limit N] [--before ID] [--consumer-group G]",
		Short: "List settlement events whose delivery gave up",
		Args:  exactArgs(),
		RunE: c.action(func(*cobra.Command, []string) error {
			if limit < 1 || limit > 500 {
				return usagef("--limit must be 1..500")
			}
			l, st := int32(limit), adminapi.DeliveryStateDead
			p := adminapi.ListSettlementEventsParams{State: &st, Limit: &l}
			if before != "" {
				p.BeforeId = &before
			}
			if group != "" {
				p.ConsumerGroup = &group
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			r, err := api.ListSettlementEventsWithResponse(c.ctx, &p)
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.emit(r.JSON200, func() error {
				w := c.table()
				row(w, "EVENT", "GROUP", "JOB", "SUBMISSION", "GEN", "ATTEMPTS", "LAST ERROR", "CREATED")
				for _, e := range r.JSON200.Events {
					row(w, e.EventId, e.ConsumerGroup, e.JobId, e.SubmissionType+"/"+e.SubmissionId, e.Generation, e.DeliveryAttempts,
						deref(e.LastError, ""), stamp(e.CreatedAt))
				}
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
	cmd.Flags().IntVar(&limit, "limit", 100, "page size (1..500)")
	cmd.Flags().StringVar(&before, "before", "", "only events with a smaller id")
	cmd.Flags().StringVar(&group, "consumer-group", "", "only this consumer group's events (each group has its own copy of a settlement)")
	return cmd
}

func (c *cli) eventsRedeliver() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "redeliver EVENT_ID --reason TEXT",
		Short: "Deliver a dead settlement event again",
		Args:  exactArgs("EVENT_ID"),
		RunE: c.action(func(_ *cobra.Command, args []string) error {
			if !validID(args[0]) {
				return usagef("%q is not an event id (a positive decimal number)", args[0])
			}
			if err := needReason(reason); err != nil {
				return err
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			r, err := api.RedeliverSettlementEventWithResponse(c.ctx, args[0], adminapi.ReasonRequest{Reason: reason})
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.emit(r.JSON200, func() error {
				_, err := fmt.Fprintf(c.out, "event %s of job %s is %s again\n", r.JSON200.EventId, r.JSON200.JobId, r.JSON200.State)
				return err
			})
		}),
	}
	reasonFlag(cmd, &reason)
	return cmd
}
