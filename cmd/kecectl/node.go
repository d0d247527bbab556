package main

import (
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/internal/duration"
)

// Bounds the control plane enforces too; checked here to answer at once.
const (
	joinCodeTTLMin   = time.Minute
	joinCodeTTLMax   = 7 * 24 * time.Hour
	drainDeadlineMax = 7 * 24 * time.Hour
)

var desiredStates = []string{"PENDING_VERIFICATION", "ENABLED", "DRAINING", "DISABLED"}

func (c *cli) nodeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "node",
		Aliases: []string{"nodes"},
		Short:   "Judge nodes: register, verify, enable, drain, disable, revoke",
		Long: `A judge node is one kece-node process serving one pool on a host group.
Its life: create (prints a one-time join code) → the host runs 'kece-node join'
→ verify (self-check) → enable → drain → disable. Address it by name or id.`,
		Args: groupArgs,
		RunE: groupRun,
	}
	cmd.AddCommand(c.nodeList(), c.nodeShow(), c.nodeCreate(), c.nodeVerify(), c.nodeEnable(), c.nodeDrain(),
		c.nodeDisable(), c.nodeResize(), c.nodeJoinCode(), c.nodeRotate(), c.nodeRevoke(), c.nodeProbe())
	return cmd
}

// reasonFlag adds the --reason every state change needs for the audit log.
func reasonFlag(cmd *cobra.Command, reason *string) {
	cmd.Flags().StringVar(reason, "reason", "", "why (written to the audit log); required")
	_ = cmd.MarkFlagRequired("reason")
}

func ttlFlag(cmd *cobra.Command, ttl *time.Duration) {
	cmd.Flags().Var(duration.Value{D: ttl}, "code-ttl", "lifetime of the join code, 1m..7d (default 1h)")
}

// ttlSeconds validates --code-ttl; nil takes the control plane's default.
func ttlSeconds(ttl time.Duration) (*int64, error) {
	if ttl == 0 {
		return nil, nil
	}
	if ttl < joinCodeTTLMin || ttl > joinCodeTTLMax {
		return nil, usagef("--code-ttl %s must be between 1m and 168h (7 days)", ttl)
	}
	s := int64((ttl + time.Second - 1) / time.Second)
	return &s, nil
}

func nodeRows(w *tabwriter.Writer, ns []adminapi.Judger) {
	row(w, "ID", "NAME", "POOL", "GROUP", "DESIRED", "ONLINE", "HEARTBEAT", "VERSION", "SLOTS", "LEASES", "REVISION")
	for _, n := range ns {
		desired := string(n.DesiredState)
		if n.Revoked {
			desired += " (revoked)"
		}
		online := "no"
		if n.Health.Online {
			online = "yes"
		}
		if n.Health.ReportedDraining {
			online += " (draining itself)"
		}
		row(w, n.NodeId, n.Name, n.Pool, n.HostGroupId, desired, online, age(n.Health.HeartbeatAgeMs),
			orDash(nodeVersion(n.Health.RuntimeVersion)), n.Slots, n.LeasesInFlight, n.Revision)
	}
}

// nodeVersion is the kece-node build from the reported runtime string
// ("kece-node v1.2.3; g++ 12.2.0" → "v1.2.3").
func nodeVersion(runtime string) string {
	first, _, _ := strings.Cut(runtime, ";")
	if v, ok := strings.CutPrefix(strings.TrimSpace(first), "kece-node "); ok {
		return v
	}
	return ""
}

func (c *cli) nodeList() *cobra.Command {
	var pool, state string
	cmd := &cobra.Command{
		Use:   "list [--pool POOL] [--state STATE]",
		Short: "List nodes with desired state, observed health and leases",
		Args:  exactArgs(),
		RunE: c.action(func(*cobra.Command, []string) error {
			var p adminapi.ListJudgersParams
			if pool != "" {
				v := adminapi.Pool(pool)
				p.Pool = &v
			}
			if state != "" {
				v := adminapi.DesiredState(strings.ToUpper(state))
				p.State = &v
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			r, err := api.ListJudgersWithResponse(c.ctx, &p)
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.emit(r.JSON200, func() error {
				w := c.table()
				nodeRows(w, r.JSON200.Judgers)
				return w.Flush()
			})
		}),
	}
	cmd.Flags().StringVar(&pool, "pool", "", "only this pool: "+strings.Join(contracts.Pools(), ", "))
	cmd.Flags().StringVar(&state, "state", "", "only this desired state: "+strings.Join(desiredStates, ", "))
	_ = cmd.RegisterFlagCompletionFunc("pool", fixedCompletion(contracts.Pools()...))
	_ = cmd.RegisterFlagCompletionFunc("state", fixedCompletion(desiredStates...))
	return cmd
}

// getNode reads one node with its checks, attempts and audit trail.
func (c *cli) getNode(id string) (*adminapi.JudgerDetail, error) {
	api, err := c.api()
	if err != nil {
		return nil, err
	}
	r, err := api.GetJudgerWithResponse(c.ctx, id)
	if err := c.result(r, err, http.StatusOK); err != nil {
		return nil, err
	}
	return r.JSON200, nil
}

func (c *cli) nodeShow() *cobra.Command {
	return &cobra.Command{
		Use:               "show NODE",
		Short:             "One node with its self-checks, recent attempts and audit trail",
		Args:              exactArgs("NODE (a name or id)"),
		ValidArgsFunction: c.completeNodes,
		RunE: c.action(func(_ *cobra.Command, args []string) error {
			id, err := c.nodeRef(args[0])
			if err != nil {
				return err
			}
			d, err := c.getNode(id)
			if err != nil {
				return err
			}
			return c.emit(d, func() error { return c.printNodeDetail(d) })
		}),
	}
}

func (c *cli) printNodeDetail(d *adminapi.JudgerDetail) error {
	w := c.table()
	nodeRows(w, []adminapi.Judger{d.Node})
	if err := w.Flush(); err != nil {
		return err
	}
	if d.Node.Address != nil {
		fmt.Fprintf(c.out, "address: %s\n", *d.Node.Address)
	}
	if d.Node.Health.RuntimeVersion != "" {
		fmt.Fprintf(c.out, "runtime: %s\n", d.Node.Health.RuntimeVersion)
	}
	if d.Node.DrainDeadlineAt != nil {
		fmt.Fprintf(c.out, "drain deadline: %s\n", stamp(*d.Node.DrainDeadlineAt))
	}
	if len(d.Node.Health.Dependencies) > 0 {
		fmt.Fprintln(c.out, "\ndependencies:")
		w = c.table()
		for _, dep := range d.Node.Health.Dependencies {
			row(w, "  "+dep.Name, map[bool]string{true: "healthy", false: "UNHEALTHY"}[dep.Healthy], deref(dep.Detail, ""))
		}
		_ = w.Flush()
	}
	fmt.Fprintln(c.out, "\nchecks:")
	w = c.table()
	row(w, "  CHECK", "JOB", "STATE", "RUNTIME", "CREATED", "ERROR")
	for _, ch := range d.Checks {
		row(w, "  "+ch.CheckId, ch.JobId, ch.State, deref(ch.RuntimeVersion, "-"), stamp(ch.CreatedAt), deref(ch.ErrorCode, ""))
	}
	_ = w.Flush()
	fmt.Fprintln(c.out, "\nrecent attempts:")
	w = c.table()
	row(w, "  JOB", "LEASE", "OUTCOME", "STARTED", "ERROR")
	for _, a := range d.RecentAttempts {
		row(w, "  "+a.JobId, a.LeaseEpoch, a.Outcome, stamp(a.StartedAt), deref(a.ErrorCode, ""))
	}
	_ = w.Flush()
	fmt.Fprintln(c.out, "\naudit:")
	w = c.table()
	row(w, "  AT", "ACTOR", "ACTION", "REASON")
	for _, e := range d.Audit {
		row(w, "  "+stamp(e.At), e.Actor, e.Action, e.Reason)
	}
	return w.Flush()
}

func (c *cli) nodeCreate() *cobra.Command {
	var name, pool, group, address string
	var slots int
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "create --name NAME --pool POOL --group HOST_GROUP --slots N [--address URL] [--code-ttl D]",
		Short: "Register a node and print its one-time join code",
		Long: `Register a node in PENDING_VERIFICATION and print its one-time join code.
Hand the code to the host operator, who runs
  kece-node join --control-url URL --pool POOL --join-code CODE \
      --credential-file /var/lib/kece/node-NAME/credential
on the host (as root; the path is the systemd units' state directory). The code is valid once, for --code-ttl (default 1h, at most 7 days).`,
		Example: "  kecectl node create --name cpp-07 --pool cpp --group rack1-host07 --slots 4 --code-ttl 24h",
		Args:    exactArgs(),
		RunE: c.action(func(*cobra.Command, []string) error {
			if slots < 1 {
				return usagef("--slots must be positive")
			}
			sec, err := ttlSeconds(ttl)
			if err != nil {
				return err
			}
			gid, err := c.groupRef(group)
			if err != nil {
				return err
			}
			body := adminapi.JudgerCreate{Name: name, Pool: adminapi.Pool(pool), HostGroupId: gid, Slots: int32(slots),
				JoinCodeTtlSeconds: sec}
			if address != "" {
				body.Address = &address
			}
			api, _ := c.api()
			r, err := api.CreateJudgerWithResponse(c.ctx, body)
			if err := c.result(r, err, http.StatusCreated); err != nil {
				return err
			}
			j := r.JSON201
			return c.emit(j, func() error {
				fmt.Fprintf(c.out, "node %s (%s, pool %s) registered, PENDING_VERIFICATION\n", j.Node.NodeId, j.Node.Name, j.Node.Pool)
				fmt.Fprintf(c.out, "join code (shown once, valid until %s):\n%s\n", stamp(j.JoinCodeExpiresAt), j.JoinCode)
				_, err := fmt.Fprintf(c.out, "on the host: %s\n", contracts.JoinCommand(c.url, string(j.Node.Pool), j.Node.Name, j.JoinCode))
				return err
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "unique node name (lower case)")
	f.StringVar(&pool, "pool", "", "pool the node serves: "+strings.Join(contracts.Pools(), ", "))
	f.StringVar(&group, "group", "", "host group (name or id)")
	f.IntVar(&slots, "slots", 0, "jobs the node may run at once")
	f.StringVar(&address, "address", "", "base URL of the node's /healthz, for 'node probe' (optional)")
	ttlFlag(cmd, &ttl)
	for _, r := range []string{"name", "pool", "group", "slots"} {
		_ = cmd.MarkFlagRequired(r)
	}
	_ = cmd.RegisterFlagCompletionFunc("pool", fixedCompletion(contracts.Pools()...))
	_ = cmd.RegisterFlagCompletionFunc("group", c.completeGroups)
	return cmd
}

func (c *cli) printNode(n *adminapi.Judger) error {
	return c.emit(n, func() error {
		revoked := ""
		if n.Revoked {
			revoked = ", revoked"
		}
		deadline := ""
		if n.DrainDeadlineAt != nil {
			deadline = ", drain deadline " + stamp(*n.DrainDeadlineAt)
		}
		_, err := fmt.Fprintf(c.out, "node %s (%s): %s%s, %d slots, %d leases in flight%s, revision %d\n", n.NodeId, n.Name,
			n.DesiredState, revoked, n.Slots, n.LeasesInFlight, deadline, n.Revision)
		return err
	})
}

func waitFlags(cmd *cobra.Command, wait *bool, timeout *time.Duration, what string) {
	cmd.Flags().BoolVar(wait, "wait", false, "wait until "+what+", showing progress")
	*timeout = WaitTimeoutDefault
	cmd.Flags().Var(duration.Value{D: timeout}, "timeout", "give up waiting after this long (with --wait)")
}

func (c *cli) nodeVerify() *cobra.Command {
	var reason string
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "verify NODE --reason TEXT [--wait]",
		Short: "Queue the node's self-check (a CHECK job only this node runs)",
		Long: `Queue the node's self-check: a CHECK job bound to this node that compiles
and runs known programs in its pool. With --wait, follow it until it passes
(exit 0) or fails (exit 1).`,
		Example:           "  kecectl node verify cpp-07 --reason 'new host' --wait",
		Args:              exactArgs("NODE (a name or id)"),
		ValidArgsFunction: c.completeNodes,
		RunE: c.action(func(_ *cobra.Command, args []string) error {
			id, api, err := c.nodeVerb(reason, args[0])
			if err != nil {
				return err
			}
			r, err := api.VerifyJudgerWithResponse(c.ctx, id, adminapi.ReasonRequest{Reason: reason})
			if err := c.result(r, err, http.StatusAccepted); err != nil {
				return err
			}
			if !wait {
				return c.emit(r.JSON202, func() error {
					_, err := fmt.Fprintf(c.out, "self-check %s queued as job %s; follow it with 'kecectl node show %s' or --wait\n",
						r.JSON202.CheckId, r.JSON202.JobId, args[0])
					return err
				})
			}
			return c.waitCheck(id, r.JSON202.CheckId, r.JSON202.JobId, timeout)
		}),
	}
	reasonFlag(cmd, &reason)
	waitFlags(cmd, &wait, &timeout, "the self-check passed or failed")
	return cmd
}

func (c *cli) nodeEnable() *cobra.Command {
	var reason string
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "enable NODE --reason TEXT [--wait]",
		Short: "Let a verified node claim jobs",
		Long: `Enable a node whose latest self-check passed. With --wait, wait until the
running node has heartbeated since, i.e. it knows it is enabled and claims.`,
		Example:           "  kecectl node enable cpp-07 --reason 'check passed' --wait",
		Args:              exactArgs("NODE (a name or id)"),
		ValidArgsFunction: c.completeNodes,
		RunE: c.action(func(_ *cobra.Command, args []string) error {
			id, api, err := c.nodeVerb(reason, args[0])
			if err != nil {
				return err
			}
			r, err := api.EnableJudgerWithResponse(c.ctx, id, adminapi.ReasonRequest{Reason: reason})
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			if !wait {
				return c.printNode(r.JSON200)
			}
			return c.waitEnabled(id, timeout)
		}),
	}
	reasonFlag(cmd, &reason)
	waitFlags(cmd, &wait, &timeout, "the node has picked up its new state")
	return cmd
}

func (c *cli) nodeDrain() *cobra.Command {
	var reason string
	var wait bool
	var timeout, deadline time.Duration
	cmd := &cobra.Command{
		Use:   "drain NODE --reason TEXT [--deadline D] [--wait]",
		Short: "Stop new claims; running jobs finish (by a deadline, if given)",
		Long: `Drain a node: it claims nothing new and its running jobs finish.

With --deadline the control plane keeps a deadline: when it passes, the
node's remaining leases are taken back (fenced, requeued, not counted as
attempts) and the node is disabled. The control plane enforces it, whether
or not this command still runs. Draining again replaces the deadline.

With --wait, show the leases left until there are none (or the deadline
disabled the node).`,
		Example:           "  kecectl node drain cpp-07 --reason 'kernel update' --deadline 15m --wait",
		Args:              exactArgs("NODE (a name or id)"),
		ValidArgsFunction: c.completeNodes,
		RunE: c.action(func(_ *cobra.Command, args []string) error {
			if err := needReason(reason); err != nil {
				return err
			}
			body := adminapi.DrainRequest{Reason: reason}
			if deadline != 0 {
				if deadline < time.Second || deadline > drainDeadlineMax {
					return usagef("--deadline %s must be between 1s and 168h (7 days)", deadline)
				}
				s := int64((deadline + time.Second - 1) / time.Second)
				body.DeadlineSeconds = &s
			}
			id, err := c.nodeRef(args[0])
			if err != nil {
				return err
			}
			api, _ := c.api()
			r, err := api.DrainJudgerWithResponse(c.ctx, id, body)
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			if !wait {
				return c.printNode(r.JSON200)
			}
			if timeout < deadline+time.Minute && deadline > 0 {
				// The control plane ends the drain at the deadline; give
				// the wait room to see that happen.
				timeout = deadline + time.Minute
			}
			return c.waitDrained(id, timeout)
		}),
	}
	reasonFlag(cmd, &reason)
	cmd.Flags().Var(duration.Value{D: &deadline}, "deadline", "after this long the control plane takes remaining leases back and disables the node (e.g. 15m)")
	waitFlags(cmd, &wait, &timeout, "no lease is left")
	return cmd
}

func (c *cli) nodeDisable() *cobra.Command {
	var reason string
	var force bool
	cmd := &cobra.Command{
		Use:               "disable NODE --reason TEXT [--force]",
		Short:             "Disable a node that holds no live lease",
		Args:              exactArgs("NODE (a name or id)"),
		ValidArgsFunction: c.completeNodes,
		RunE: c.action(func(_ *cobra.Command, args []string) error {
			id, api, err := c.nodeVerb(reason, args[0])
			if err != nil {
				return err
			}
			r, err := api.DisableJudgerWithResponse(c.ctx, id, adminapi.DisableRequest{Reason: reason, Force: force})
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.printNode(r.JSON200)
		}),
	}
	reasonFlag(cmd, &reason)
	cmd.Flags().BoolVar(&force, "force", false, "disable even while the node holds live leases (they run out and are retried elsewhere)")
	return cmd
}

func (c *cli) nodeResize() *cobra.Command {
	var reason string
	var slots int
	var rev int64
	cmd := &cobra.Command{
		Use:               "resize NODE --slots N --reason TEXT [--revision R]",
		Short:             "Change how many jobs a node may run at once",
		Args:              exactArgs("NODE (a name or id)"),
		ValidArgsFunction: c.completeNodes,
		RunE: c.action(func(_ *cobra.Command, args []string) error {
			if err := needReason(reason); err != nil {
				return err
			}
			if slots < 1 {
				return usagef("--slots must be positive")
			}
			id, err := c.nodeRef(args[0])
			if err != nil {
				return err
			}
			if rev == 0 {
				d, err := c.getNode(id)
				if err != nil {
					return err
				}
				rev = d.Node.Revision
			}
			api, _ := c.api()
			r, err := api.UpdateJudgerWithResponse(c.ctx, id, adminapi.JudgerUpdate{Slots: int32(slots), Revision: rev, Reason: reason})
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.printNode(r.JSON200)
		}),
	}
	reasonFlag(cmd, &reason)
	cmd.Flags().IntVar(&slots, "slots", 0, "new slot count")
	cmd.Flags().Int64Var(&rev, "revision", 0, "revision the change is based on (default: the current one)")
	_ = cmd.MarkFlagRequired("slots")
	return cmd
}

func (c *cli) printJoinCode(j *adminapi.JoinCodeIssued, what string) error {
	return c.emit(j, func() error {
		_, err := fmt.Fprintf(c.out, "%s for node %s (shown once, valid until %s):\n%s\n", what, j.NodeId, stamp(j.JoinCodeExpiresAt), j.JoinCode)
		return err
	})
}

func (c *cli) nodeJoinCode() *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:               "join-code NODE [--code-ttl D]",
		Short:             "Issue a fresh join code for a node that has not joined yet",
		Args:              exactArgs("NODE (a name or id)"),
		ValidArgsFunction: c.completeNodes,
		RunE: c.action(func(_ *cobra.Command, args []string) error {
			sec, err := ttlSeconds(ttl)
			if err != nil {
				return err
			}
			id, err := c.nodeRef(args[0])
			if err != nil {
				return err
			}
			api, _ := c.api()
			r, err := api.ResetJoinCodeWithResponse(c.ctx, id, adminapi.JoinCodeRequest{TtlSeconds: sec})
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.printJoinCode(r.JSON200, "new join code")
		}),
	}
	ttlFlag(cmd, &ttl)
	return cmd
}

func (c *cli) nodeRotate() *cobra.Command {
	var reason string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:               "rotate NODE --reason TEXT [--code-ttl D]",
		Short:             "Invalidate the node's credential and issue a new join code",
		Args:              exactArgs("NODE (a name or id)"),
		ValidArgsFunction: c.completeNodes,
		RunE: c.action(func(_ *cobra.Command, args []string) error {
			if err := needReason(reason); err != nil {
				return err
			}
			sec, err := ttlSeconds(ttl)
			if err != nil {
				return err
			}
			id, err := c.nodeRef(args[0])
			if err != nil {
				return err
			}
			api, _ := c.api()
			r, err := api.RotateJudgerCredentialWithResponse(c.ctx, id, adminapi.RotateRequest{Reason: reason, JoinCodeTtlSeconds: sec})
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.printJoinCode(r.JSON200, "credential revoked; the node must join again with this join code")
		}),
	}
	reasonFlag(cmd, &reason)
	ttlFlag(cmd, &ttl)
	return cmd
}

func (c *cli) nodeRevoke() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:               "revoke NODE --reason TEXT",
		Short:             "Revoke a node for good (credential, sessions, leases)",
		Args:              exactArgs("NODE (a name or id)"),
		ValidArgsFunction: c.completeNodes,
		RunE: c.action(func(_ *cobra.Command, args []string) error {
			id, api, err := c.nodeVerb(reason, args[0])
			if err != nil {
				return err
			}
			r, err := api.RevokeJudgerWithResponse(c.ctx, id, adminapi.ReasonRequest{Reason: reason})
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.printNode(r.JSON200)
		}),
	}
	reasonFlag(cmd, &reason)
	return cmd
}

func (c *cli) nodeProbe() *cobra.Command {
	return &cobra.Command{
		Use:               "probe NODE",
		Short:             "Have the control plane fetch the node's /healthz",
		Args:              exactArgs("NODE (a name or id)"),
		ValidArgsFunction: c.completeNodes,
		RunE: c.action(func(_ *cobra.Command, args []string) error {
			id, err := c.nodeRef(args[0])
			if err != nil {
				return err
			}
			api, _ := c.api()
			r, err := api.ProbeJudgerWithResponse(c.ctx, id)
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			p := r.JSON200
			return c.emit(p, func() error {
				fmt.Fprintf(c.out, "probe %s: reachable=%v dialed=%s status=%s latency=%dms\n", p.Address, p.Reachable,
					deref(p.DialedIp, "-"), deref(p.StatusCode, "-"), p.LatencyMs)
				if p.Error != nil {
					fmt.Fprintf(c.out, "error: %s: %s\n", p.Error.Code, p.Error.Message)
				}
				if p.Health != nil {
					saved := c.output
					c.output = outputJSON
					defer func() { c.output = saved }()
					return c.emit(p.Health, nil)
				}
				return nil
			})
		}),
	}
}
