package main

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/contracts/adminapi"
)

func (c *cli) hostGroupCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "host-group",
		Aliases: []string{"host-groups", "hg"},
		Short:   "Physical hosts and their slot capacity",
		Long: `A host group is one physical host: its slot capacity bounds the jobs all
its nodes run at once. Address it by name or id.`,
		Args: groupArgs,
		RunE: groupRun,
	}
	cmd.AddCommand(c.hostGroupList(), c.hostGroupCreate(), c.hostGroupResize())
	return cmd
}

func (c *cli) hostGroupList() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List host groups with capacity, slots in flight and node count",
		Args:  exactArgs(),
		RunE: c.action(func(*cobra.Command, []string) error {
			api, err := c.api()
			if err != nil {
				return err
			}
			r, err := api.ListHostGroupsWithResponse(c.ctx)
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.emit(r.JSON200, func() error {
				w := c.table()
				row(w, "ID", "NAME", "CAPACITY", "IN-FLIGHT", "NODES", "REVISION")
				for _, g := range r.JSON200.HostGroups {
					row(w, g.HostGroupId, g.Name, g.SlotCapacity, g.SlotsInFlight, deref(g.NodeCount, "-"), g.Revision)
				}
				return w.Flush()
			})
		}),
	}
}

func (c *cli) hostGroupCreate() *cobra.Command {
	var name string
	var slots int
	cmd := &cobra.Command{
		Use:     "create --name NAME --slots N",
		Short:   "Register a physical host",
		Example: "  kecectl host-group create --name rack1-host07 --slots 16",
		Args:    exactArgs(),
		RunE: c.action(func(*cobra.Command, []string) error {
			if slots < 1 {
				return usagef("--slots must be positive (the host's total job capacity)")
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			r, err := api.CreateHostGroupWithResponse(c.ctx, adminapi.HostGroupCreate{Name: name, SlotCapacity: int32(slots)})
			if err := c.result(r, err, http.StatusCreated); err != nil {
				return err
			}
			return c.emit(r.JSON201, func() error {
				_, err := fmt.Fprintf(c.out, "host group %s created: %s, %d slots, revision %d\n", r.JSON201.HostGroupId, r.JSON201.Name,
					r.JSON201.SlotCapacity, r.JSON201.Revision)
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "unique host group name (lower case)")
	cmd.Flags().IntVar(&slots, "slots", 0, "slot capacity of the host")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("slots")
	return cmd
}

func (c *cli) hostGroupResize() *cobra.Command {
	var slots int
	var rev int64
	cmd := &cobra.Command{
		Use:               "resize HOST_GROUP --slots N [--revision R]",
		Short:             "Change a host group's slot capacity",
		Example:           "  kecectl host-group resize rack1-host07 --slots 24",
		Args:              exactArgs("HOST_GROUP (a name or id)"),
		ValidArgsFunction: c.completeGroups,
		RunE: c.action(func(_ *cobra.Command, args []string) error {
			if slots < 1 {
				return usagef("--slots must be positive")
			}
			g, err := c.group(args[0])
			if err != nil {
				return err
			}
			if rev == 0 {
				rev = g.Revision
			}
			api, _ := c.api()
			r, err := api.UpdateHostGroupWithResponse(c.ctx, g.HostGroupId, adminapi.HostGroupUpdate{SlotCapacity: int32(slots), Revision: rev})
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.emit(r.JSON200, func() error {
				_, err := fmt.Fprintf(c.out, "host group %s (%s) now has %d slots (revision %d)\n", g.HostGroupId, g.Name,
					r.JSON200.SlotCapacity, r.JSON200.Revision)
				return err
			})
		}),
	}
	cmd.Flags().IntVar(&slots, "slots", 0, "new slot capacity")
	cmd.Flags().Int64Var(&rev, "revision", 0, "revision the change is based on (default: the current one)")
	_ = cmd.MarkFlagRequired("slots")
	return cmd
}
