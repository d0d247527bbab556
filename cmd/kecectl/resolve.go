package main

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/contracts/adminapi"
)

// Nodes and host groups are addressed by name or id. Names are unique within
// their kind, but a name may be all digits, so the argument is matched
// against both and an argument that is one node's name and another's id is
// refused rather than guessed.

func validID(s string) bool {
	if s == "" || len(s) > 19 || s[0] == '0' {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// nodeRef resolves NODE (a name or an id) to the node's id.
func (c *cli) nodeRef(arg string) (string, error) {
	api, err := c.api()
	if err != nil {
		return "", err
	}
	r, err := api.ListJudgersWithResponse(c.ctx, &adminapi.ListJudgersParams{})
	if err := c.result(r, err, http.StatusOK); err != nil {
		return "", err
	}
	var byName, byID string
	for _, n := range r.JSON200.Judgers {
		if string(n.Name) == arg {
			byName = n.NodeId
		}
		if n.NodeId == arg {
			byID = n.NodeId
		}
	}
	return pick("node", arg, byName, byID, "kecectl node list")
}

// groupRef resolves HOST_GROUP (a name or an id) to the group's id.
func (c *cli) groupRef(arg string) (string, error) {
	g, err := c.group(arg)
	if err != nil {
		return "", err
	}
	return g.HostGroupId, nil
}

func (c *cli) group(arg string) (adminapi.HostGroup, error) {
	api, err := c.api()
	if err != nil {
		return adminapi.HostGroup{}, err
	}
	r, err := api.ListHostGroupsWithResponse(c.ctx)
	if err := c.result(r, err, http.StatusOK); err != nil {
		return adminapi.HostGroup{}, err
	}
	var byName, byID string
	all := map[string]adminapi.HostGroup{}
	for _, g := range r.JSON200.HostGroups {
		all[g.HostGroupId] = g
		if string(g.Name) == arg {
			byName = g.HostGroupId
		}
		if g.HostGroupId == arg {
			byID = g.HostGroupId
		}
	}
	id, err := pick("host group", arg, byName, byID, "kecectl host-group list")
	return all[id], err
}

func pick(kind, arg, byName, byID, list string) (string, error) {
	switch {
	case byName != "" && byID != "" && byName != byID:
		return "", usagef("%q is the name of %s %s and the id of another %s; rename one of them", arg, kind, byName, kind)
	case byName != "":
		return byName, nil
	case byID != "":
		return byID, nil
	}
	if strings.TrimSpace(arg) == "" {
		return "", usagef("an empty %s name", kind)
	}
	return "", fmt.Errorf("no %s named %q or with that id (see '%s')", kind, arg, list)
}

// completeNodes offers node names for shell completion when the control
// plane is reachable; otherwise nothing (completion never fails loudly).
func (c *cli) completeNodes(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	api, err := c.api()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	r, err := api.ListJudgersWithResponse(c.ctx, &adminapi.ListJudgersParams{})
	if err != nil || r.JSON200 == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, n := range r.JSON200.Judgers {
		out = append(out, string(n.Name)+"\t"+string(n.Pool)+", "+string(n.DesiredState))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeGroups offers host group names.
func (c *cli) completeGroups(_ *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	api, err := c.api()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	r, err := api.ListHostGroupsWithResponse(c.ctx)
	if err != nil || r.JSON200 == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, g := range r.JSON200.HostGroups {
		out = append(out, string(g.Name))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func fixedCompletion(values ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}
