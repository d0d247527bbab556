package httpapi

// Admin API: host groups and judge nodes. Jobs, events and reconciliation
// are in admin_jobs.go; wire conversions in admin_convert.go. Every mutation
// passes the calling admin token's name (tokenFrom(ctx).Actor()) and the
// request's reason to the store, which writes the audit row in the same
// transaction as the change.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/control/checks"
	"github.com/kece-oj/kece/control/probe"
	"github.com/kece-oj/kece/control/store"
)

// Recent items in a node's detail view (the contract's maxItems).
const (
	nodeDetailAttempts = 50
	nodeDetailChecks   = 20
	nodeDetailAudit    = 100
)

func actor(ctx context.Context) string { return tokenFrom(ctx).Actor() }

// orNotFound gives a store ErrNotFound the operation's specific code.
func orNotFound(err error, code string) error {
	if errors.Is(err, store.ErrNotFound) {
		return apiErr(http.StatusNotFound, code, err)
	}
	return err
}

// nodeErr maps what every node mutation can hit: unknown node, revoked node.
func nodeErr(err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apiErr(http.StatusNotFound, codeNodeNotFound, err)
	case errors.Is(err, store.ErrNodeRevoked):
		return apiErr(http.StatusConflict, codeNodeRevoked, err)
	}
	return err
}

// liveNode reads a node and refuses a revoked one with 409 NODE_REVOKED.
func (a fleetAdmin) liveNode(ctx context.Context, rawID string) (store.Node, error) {
	id, err := parseID("nodeId", rawID)
	if err != nil {
		return store.Node{}, err
	}
	n, err := a.s.store.Nodes().GetNode(ctx, id)
	if err != nil {
		return store.Node{}, nodeErr(err)
	}
	if n.Revoked {
		return store.Node{}, apiErr(http.StatusConflict, codeNodeRevoked, fmt.Errorf("node %d is revoked; register a new node", id))
	}
	return n, nil
}

func (a fleetAdmin) judger(ctx context.Context, n store.Node) adminapi.Judger {
	t, err := a.s.store.Nodes().NodeTimestamps(ctx, n.ID)
	if err != nil {
		return judgerOut(n, nil)
	}
	return judgerOut(n, &t)
}

func (a fleetAdmin) hostGroup(ctx context.Context, id int64) (adminapi.HostGroup, error) {
	gs, err := a.s.store.Nodes().HostGroupDetails(ctx, id)
	if err != nil {
		return adminapi.HostGroup{}, err
	}
	if len(gs) == 0 {
		return adminapi.HostGroup{}, apiErr(http.StatusNotFound, codeHostGroupNotFound, fmt.Errorf("host group %d: %w", id, store.ErrNotFound))
	}
	return hostGroupOut(gs[0]), nil
}

// ListHostGroups lists host groups with capacity and use.
func (a fleetAdmin) ListHostGroups(ctx context.Context, _ adminapi.ListHostGroupsRequestObject) (adminapi.ListHostGroupsResponseObject, error) {
	gs, err := a.s.store.Nodes().HostGroupDetails(ctx, 0)
	if err != nil {
		return nil, err
	}
	out := adminapi.HostGroupList{HostGroups: make([]adminapi.HostGroup, 0, len(gs))}
	for _, g := range gs {
		out.HostGroups = append(out.HostGroups, hostGroupOut(g))
	}
	return adminapi.ListHostGroups200JSONResponse(out), nil
}

// CreateHostGroup adds a host group.
func (a fleetAdmin) CreateHostGroup(ctx context.Context, req adminapi.CreateHostGroupRequestObject) (adminapi.CreateHostGroupResponseObject, error) {
	g, err := a.s.store.Nodes().CreateHostGroup(ctx, req.Body.Name, int(req.Body.SlotCapacity), actor(ctx))
	if errors.Is(err, store.ErrConflict) {
		return nil, apiErr(http.StatusConflict, codeNameTaken, err)
	}
	if err != nil {
		return nil, err
	}
	a.s.log.InfoContext(ctx, "host group created", "host_group_id", g.ID, "actor", actor(ctx))
	out, err := a.hostGroup(ctx, g.ID)
	if err != nil {
		return nil, err
	}
	return adminapi.CreateHostGroup201JSONResponse(out), nil
}

// UpdateHostGroup resizes a host group with an optimistic revision check.
func (a fleetAdmin) UpdateHostGroup(ctx context.Context, req adminapi.UpdateHostGroupRequestObject) (adminapi.UpdateHostGroupResponseObject, error) {
	id, err := parseID("hostGroupId", req.HostGroupId)
	if err != nil {
		return nil, err
	}
	_, err = a.s.store.Nodes().ResizeHostGroup(ctx, id, int(req.Body.SlotCapacity), req.Body.Revision, actor(ctx), "")
	switch {
	case errors.Is(err, store.ErrConflict):
		return nil, apiErr(http.StatusConflict, codeRevisionStale, err)
	case err != nil:
		return nil, orNotFound(err, codeHostGroupNotFound)
	}
	a.s.log.InfoContext(ctx, "host group resized", "host_group_id", id, "slot_capacity", req.Body.SlotCapacity, "actor", actor(ctx))
	out, err := a.hostGroup(ctx, id)
	if err != nil {
		return nil, err
	}
	return adminapi.UpdateHostGroup200JSONResponse(out), nil
}

// ListJudgers lists nodes, optionally by pool and desired state.
func (a fleetAdmin) ListJudgers(ctx context.Context, req adminapi.ListJudgersRequestObject) (adminapi.ListJudgersResponseObject, error) {
	var pool string
	var state store.NodeState
	if req.Params.Pool != nil {
		pool = string(*req.Params.Pool)
	}
	if req.Params.State != nil {
		state = store.NodeState(*req.Params.State)
	}
	ns, err := a.s.store.Nodes().ListNodes(ctx, pool, state)
	if err != nil {
		return nil, err
	}
	out := adminapi.JudgerList{Judgers: make([]adminapi.Judger, 0, len(ns))}
	for _, n := range ns {
		out.Judgers = append(out.Judgers, judgerOut(n, nil))
	}
	return adminapi.ListJudgers200JSONResponse(out), nil
}

// CreateJudger registers a node and returns its join code once.
func (a fleetAdmin) CreateJudger(ctx context.Context, req adminapi.CreateJudgerRequestObject) (adminapi.CreateJudgerResponseObject, error) {
	groupID, err := parseID("hostGroupId", req.Body.HostGroupId)
	if err != nil {
		return nil, err
	}
	var address string
	if req.Body.Address != nil && *req.Body.Address != "" {
		address = *req.Body.Address
		if err := a.checkAddress(address); err != nil {
			return nil, err
		}
	}
	n, code, err := a.s.store.Nodes().CreateNode(ctx, store.NodeSpec{Name: req.Body.Name, Pool: string(req.Body.Pool),
		HostGroupID: groupID, Slots: int(req.Body.Slots), Address: address, JoinCodeTTL: seconds(req.Body.JoinCodeTtlSeconds)}, actor(ctx))
	var ve *store.ValidationError
	switch {
	case errors.As(err, &ve) && ve.Field == "hostGroupId":
		return nil, apiErr(http.StatusNotFound, codeHostGroupNotFound, err)
	case errors.Is(err, store.ErrConflict):
		return nil, apiErr(http.StatusConflict, codeNameTaken, err)
	case err != nil:
		return nil, err
	}
	a.s.log.InfoContext(ctx, "node created", "node_id", n.ID, "pool", n.Pool, "actor", actor(ctx))
	return adminapi.CreateJudger201JSONResponse{Node: a.judger(ctx, n), JoinCode: code.Code,
		JoinCodeExpiresAt: time.Now().Add(code.ExpiresIn).UTC()}, nil
}

func (a fleetAdmin) prober() (*probe.Prober, error) {
	p, err := probe.New(a.s.cfg.Probe)
	if err != nil {
		return nil, fmt.Errorf("probe config: %w", err)
	}
	return p, nil
}

// checkAddress applies the static probe rules to an admin-entered address.
func (a fleetAdmin) checkAddress(address string) error {
	p, err := a.prober()
	if err != nil {
		return err
	}
	if _, err := p.Check(address); err != nil {
		return apiErr(http.StatusUnprocessableEntity, codeAddressNotAllowed, err)
	}
	return nil
}

// GetJudger returns a node with its recent attempts, checks and audit trail.
func (a fleetAdmin) GetJudger(ctx context.Context, req adminapi.GetJudgerRequestObject) (adminapi.GetJudgerResponseObject, error) {
	id, err := parseID("nodeId", req.NodeId)
	if err != nil {
		return nil, err
	}
	n, err := a.s.store.Nodes().GetNode(ctx, id)
	if err != nil {
		return nil, nodeErr(err)
	}
	attempts, err := a.s.store.Jobs().NodeAttempts(ctx, id, nodeDetailAttempts)
	if err != nil {
		return nil, err
	}
	cs, err := a.s.store.Nodes().NodeChecks(ctx, id, nodeDetailChecks)
	if err != nil {
		return nil, err
	}
	au, err := a.s.store.AuditLog().Audit(ctx, id, 0, nodeDetailAudit)
	if err != nil {
		return nil, err
	}
	out := adminapi.JudgerDetail{Node: a.judger(ctx, n), RecentAttempts: make([]adminapi.Attempt, 0, len(attempts)),
		Checks: make([]adminapi.NodeCheck, 0, len(cs)), Audit: make([]adminapi.AuditEntry, 0, len(au))}
	for _, at := range attempts {
		out.RecentAttempts = append(out.RecentAttempts, attemptOut(at))
	}
	for _, c := range cs {
		out.Checks = append(out.Checks, checkOut(id, c))
	}
	for _, e := range au {
		out.Audit = append(out.Audit, auditOut(e))
	}
	return adminapi.GetJudger200JSONResponse(out), nil
}

// UpdateJudger resizes a node with an optimistic revision check.
func (a fleetAdmin) UpdateJudger(ctx context.Context, req adminapi.UpdateJudgerRequestObject) (adminapi.UpdateJudgerResponseObject, error) {
	n, err := a.liveNode(ctx, req.NodeId)
	if err != nil {
		return nil, err
	}
	n, err = a.s.store.Nodes().ResizeNode(ctx, n.ID, int(req.Body.Slots), req.Body.Revision, actor(ctx), req.Body.Reason)
	switch {
	case errors.Is(err, store.ErrConflict):
		return nil, apiErr(http.StatusConflict, codeRevisionStale, err)
	case err != nil:
		return nil, nodeErr(err)
	}
	a.s.log.InfoContext(ctx, "node resized", "node_id", n.ID, "slots", n.Slots, "actor", actor(ctx))
	return adminapi.UpdateJudger200JSONResponse(a.judger(ctx, n)), nil
}

// ResetJoinCode issues a fresh join code for a node that has not joined.
func (a fleetAdmin) ResetJoinCode(ctx context.Context, req adminapi.ResetJoinCodeRequestObject) (adminapi.ResetJoinCodeResponseObject, error) {
	id, err := parseID("nodeId", req.NodeId)
	if err != nil {
		return nil, err
	}
	var ttl time.Duration
	if req.Body != nil {
		ttl = seconds(req.Body.TtlSeconds)
	}
	code, err := a.s.store.Credentials().IssueJoinCodeTTL(ctx, id, ttl, actor(ctx), "join code reset")
	if errors.Is(err, store.ErrNodeAlreadyJoined) {
		return nil, apiErr(http.StatusConflict, codeNodeAlreadyJoined, err)
	}
	if err != nil {
		return nil, nodeErr(err)
	}
	a.s.log.InfoContext(ctx, "join code reset", "node_id", id, "actor", actor(ctx))
	return adminapi.ResetJoinCode200JSONResponse{NodeId: idString(id), JoinCode: code.Code,
		JoinCodeExpiresAt: time.Now().Add(code.ExpiresIn).UTC()}, nil
}

// VerifyJudger starts a self-check: the pool's built-in known-answer program
// as a CHECK job only this node may claim. The check's manifest and files
// are published on first use (idempotent).
func (a fleetAdmin) VerifyJudger(ctx context.Context, req adminapi.VerifyJudgerRequestObject) (adminapi.VerifyJudgerResponseObject, error) {
	n, err := a.liveNode(ctx, req.NodeId)
	if err != nil {
		return nil, err
	}
	if jobID, busy, err := a.s.store.Nodes().ActiveCheck(ctx, n.ID); err != nil {
		return nil, err
	} else if busy {
		return nil, apiErr(http.StatusConflict, codeCheckInProgress, fmt.Errorf("self-check job %d of node %d is still queued or running", jobID, n.ID))
	}
	prog, err := checks.Publish(ctx, a.s.store, a.s.artifacts, n.Pool)
	if err != nil {
		return nil, err
	}
	started, err := a.s.store.Nodes().StartCheck(ctx, store.CheckRequest{NodeID: n.ID, ManifestID: prog.ManifestID,
		Language: prog.Language, Source: prog.Source}, actor(ctx), req.Body.Reason)
	if err != nil {
		return nil, nodeErr(err)
	}
	a.s.log.InfoContext(ctx, "node self-check queued", "node_id", n.ID, "job_id", started.JobID, "actor", actor(ctx))
	return adminapi.VerifyJudger202JSONResponse{CheckId: idString(started.CheckID), JobId: idString(started.JobID)}, nil
}

// EnableJudger lets a verified, online node claim pool work.
func (a fleetAdmin) EnableJudger(ctx context.Context, req adminapi.EnableJudgerRequestObject) (adminapi.EnableJudgerResponseObject, error) {
	n, err := a.liveNode(ctx, req.NodeId)
	if err != nil {
		return nil, err
	}
	if n.DesiredState == store.NodeEnabled {
		return adminapi.EnableJudger200JSONResponse(a.judger(ctx, n)), nil
	}
	enabled, err := a.s.store.Nodes().Enable(ctx, n.ID, actor(ctx), req.Body.Reason)
	switch {
	case errors.Is(err, store.ErrNodeRevoked):
		return nil, apiErr(http.StatusConflict, codeNodeRevoked, err)
	case errors.Is(err, store.ErrHeartbeatStale):
		return nil, apiErr(http.StatusConflict, codeHeartbeatStale, err)
	case errors.Is(err, store.ErrCheckRequired):
		return nil, apiErr(http.StatusConflict, codeCheckRequired, err)
	case err != nil:
		return nil, nodeErr(err)
	}
	a.s.log.InfoContext(ctx, "node enabled", "node_id", n.ID, "actor", actor(ctx))
	return adminapi.EnableJudger200JSONResponse(a.judger(ctx, enabled)), nil
}

// DrainJudger stops new claims; running jobs finish, by the deadline if one
// is given (the control plane enforces it, see store.ExpireDrainDeadlines).
func (a fleetAdmin) DrainJudger(ctx context.Context, req adminapi.DrainJudgerRequestObject) (adminapi.DrainJudgerResponseObject, error) {
	n, err := a.liveNode(ctx, req.NodeId)
	if err != nil {
		return nil, err
	}
	deadline := seconds(req.Body.DeadlineSeconds)
	n, err = a.s.store.Nodes().DrainUntil(ctx, n.ID, deadline, actor(ctx), req.Body.Reason)
	if err != nil {
		return nil, nodeErr(err)
	}
	a.s.log.InfoContext(ctx, "node draining", "node_id", n.ID, "deadline", deadline, "actor", actor(ctx))
	return adminapi.DrainJudger200JSONResponse(a.judger(ctx, n)), nil
}

// DisableJudger disables a node with no live lease, or any node with force.
func (a fleetAdmin) DisableJudger(ctx context.Context, req adminapi.DisableJudgerRequestObject) (adminapi.DisableJudgerResponseObject, error) {
	n, err := a.liveNode(ctx, req.NodeId)
	if err != nil {
		return nil, err
	}
	n, err = a.s.store.Nodes().Disable(ctx, n.ID, req.Body.Force, actor(ctx), req.Body.Reason)
	if errors.Is(err, store.ErrConflict) {
		return nil, apiErr(http.StatusConflict, codeLeasesActive, err)
	}
	if err != nil {
		return nil, nodeErr(err)
	}
	a.s.log.InfoContext(ctx, "node disabled", "node_id", n.ID, "force", req.Body.Force, "actor", actor(ctx))
	return adminapi.DisableJudger200JSONResponse(a.judger(ctx, n)), nil
}

// RevokeJudger revokes a node at once; revoking a revoked node is a no-op.
func (a fleetAdmin) RevokeJudger(ctx context.Context, req adminapi.RevokeJudgerRequestObject) (adminapi.RevokeJudgerResponseObject, error) {
	id, err := parseID("nodeId", req.NodeId)
	if err != nil {
		return nil, err
	}
	n, err := a.s.store.Nodes().GetNode(ctx, id)
	if err != nil {
		return nil, nodeErr(err)
	}
	if !n.Revoked {
		if n, err = a.s.store.Nodes().Revoke(ctx, id, actor(ctx), req.Body.Reason); err != nil {
			return nil, nodeErr(err)
		}
		a.s.log.WarnContext(ctx, "node revoked", "node_id", id, "actor", actor(ctx))
	}
	return adminapi.RevokeJudger200JSONResponse(a.judger(ctx, n)), nil
}

// RotateJudgerCredential kills the node credential and issues a join code.
func (a fleetAdmin) RotateJudgerCredential(ctx context.Context, req adminapi.RotateJudgerCredentialRequestObject) (adminapi.RotateJudgerCredentialResponseObject, error) {
	id, err := parseID("nodeId", req.NodeId)
	if err != nil {
		return nil, err
	}
	code, err := a.s.store.Credentials().RotateCredentialTTL(ctx, id, seconds(req.Body.JoinCodeTtlSeconds), actor(ctx), req.Body.Reason)
	if err != nil {
		return nil, nodeErr(err)
	}
	a.s.log.WarnContext(ctx, "node credential rotated", "node_id", id, "actor", actor(ctx))
	return adminapi.RotateJudgerCredential200JSONResponse{NodeId: idString(id), JoinCode: code.Code,
		JoinCodeExpiresAt: time.Now().Add(code.ExpiresIn).UTC()}, nil
}

// ProbeJudger fetches the node's /healthz from its admin-entered address
// under the SSRF rules of control/probe.
func (a fleetAdmin) ProbeJudger(ctx context.Context, req adminapi.ProbeJudgerRequestObject) (adminapi.ProbeJudgerResponseObject, error) {
	id, err := parseID("nodeId", req.NodeId)
	if err != nil {
		return nil, err
	}
	n, err := a.s.store.Nodes().GetNode(ctx, id)
	if err != nil {
		return nil, nodeErr(err)
	}
	if n.Address == "" {
		return nil, apiErr(http.StatusConflict, codeNoAddress, fmt.Errorf("node %d has no address to probe", id))
	}
	p, err := a.prober()
	if err != nil {
		return nil, err
	}
	res, err := p.Probe(ctx, n.Address)
	if errors.Is(err, probe.ErrNotAllowed) {
		// Refused targets are audited too: they are what an SSRF attempt looks like.
		if aerr := a.s.store.AuditLog().RecordNodeAction(ctx, id, actor(ctx), "node.probe", "", map[string]any{
			"address": n.Address, "refused": err.Error()}); aerr != nil {
			return nil, aerr
		}
		return nil, apiErr(http.StatusUnprocessableEntity, codeAddressNotAllowed, err)
	}
	if err != nil {
		return nil, err
	}
	out := adminapi.ProbeResult{NodeId: idString(id), Address: n.Address, Reachable: res.Reachable,
		LatencyMs: res.Latency.Milliseconds()}
	if res.DialedIP != "" {
		out.DialedIp = &res.DialedIP
	}
	if res.StatusCode != 0 {
		sc := int32(res.StatusCode)
		out.StatusCode = &sc
	}
	if res.Health != nil {
		out.Health = &res.Health
	}
	if f := res.Failure; f != nil {
		out.Error = &adminapi.ProbeError{Code: adminapi.ProbeErrorCode(f.Code), Message: f.Message}
	}
	detail := map[string]any{"address": n.Address, "dialedIp": res.DialedIP, "reachable": res.Reachable}
	if res.Failure != nil {
		detail["error"] = string(res.Failure.Code)
	}
	if err := a.s.store.AuditLog().RecordNodeAction(ctx, id, actor(ctx), "node.probe", "", detail); err != nil {
		return nil, err
	}
	a.s.log.InfoContext(ctx, "node probed", "node_id", id, "reachable", out.Reachable, "dialed_ip", res.DialedIP, "actor", actor(ctx))
	return adminapi.ProbeJudger200JSONResponse(out), nil
}

// seconds turns an optional API seconds field into a duration (nil: 0).
func seconds(v *int64) time.Duration {
	if v == nil {
		return 0
	}
	return time.Duration(*v) * time.Second
}
