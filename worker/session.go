package worker

// The session of this boot: join or read the credential, open (and reopen)
// the session, and heartbeat with the desired state it answers.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
)

// login reads or obtains the credential and opens the session of this boot.
func (n *Node) login(ctx context.Context) error {
	cred, err := readCredential(n.cfg.CredentialFile)
	if errors.Is(err, errNoCredential) {
		if n.cfg.JoinCode == "" {
			return fmt.Errorf("KECE_CREDENTIAL_FILE %s does not exist and KECE_JOIN_CODE is empty: "+
				"ask an admin for a join code for the first start", n.cfg.CredentialFile)
		}
		j, err := n.cl.join(ctx, n.cfg.JoinCode, n.cfg.Pool)
		if err != nil {
			return fmt.Errorf("join: %w", err)
		}
		cred = Credential{NodeID: j.NodeId, Pool: string(j.Pool), HostGroupID: j.HostGroupId, Secret: j.Credential}
		if err := writeCredential(n.cfg.CredentialFile, cred); err != nil {
			return err
		}
		n.log.Info("joined the control plane; credential stored", "node_id", cred.NodeID, "file", n.cfg.CredentialFile)
	} else if err != nil {
		return err
	} else if n.cfg.JoinCode != "" {
		n.log.Info("credential file exists; the join code is not used", "node_id", cred.NodeID)
	}
	if cred.Pool != n.cfg.Pool {
		return fmt.Errorf("KECE_POOL is %q but the credential in %s belongs to a %q node", n.cfg.Pool, n.cfg.CredentialFile, cred.Pool)
	}
	n.mu.Lock()
	n.cred = cred
	n.mu.Unlock()
	// Written once, before any goroutine that reads them starts.
	n.nodeID = cred.NodeID
	n.execID = ExecutorNodeID(n.cfg.ControlURL, cred.NodeID)
	backoff := n.cfg.RetryBase
	for {
		err := n.openSession(ctx)
		if err == nil {
			return nil
		}
		if !retryable(err) || ctx.Err() != nil {
			return err
		}
		n.log.Warn("opening the session failed; retrying", "err", err)
		if !n.sleep(ctx, n.backoffFor(err, &backoff)) {
			return ctx.Err()
		}
	}
}

func (n *Node) openSession(ctx context.Context) error {
	n.mu.Lock()
	cred := n.cred
	n.mu.Unlock()
	s, err := n.cl.openSession(ctx, cred.Secret, n.bootID)
	if err != nil {
		return err
	}
	if string(s.Pool) != n.cfg.Pool {
		return fmt.Errorf("KECE_POOL is %q but the control plane says node %s serves %q", n.cfg.Pool, s.NodeId, s.Pool)
	}
	t := timing{
		heartbeat: minPositive(n.cfg.HeartbeatInterval, time.Duration(s.HeartbeatIntervalMs)*time.Millisecond),
		renew:     minPositive(n.cfg.RenewInterval, time.Duration(s.RenewIntervalMs)*time.Millisecond),
		claimWait: min(n.cfg.ClaimWait, time.Duration(s.ClaimWaitMaxMs)*time.Millisecond),
		leaseTTL:  time.Duration(s.LeaseTtlMs) * time.Millisecond,
		// A result's claim for the slot it frees (the slot cycle), unless
		// the configuration turns it off.
		resultClaims: s.ResultClaims != nil && *s.ResultClaims && !n.cfg.NoResultClaims,
		// A control plane before job phases would refuse them.
		resultPhases: s.ResultPhases != nil && *s.ResultPhases,
	}
	// Renew well inside the lease and keep the margin below a quarter of it.
	t.renew = min(t.renew, t.leaseTTL/3)
	t.margin = min(n.cfg.SafetyMargin, t.leaseTTL/4)
	// A job's deadline counts from when its claim was sent, and the server
	// may grant the lease at the end of the long-poll: keep the wait to a
	// quarter of the lease so a claimed job always has most of it left.
	t.claimWait = min(t.claimWait, t.leaseTTL/4)
	n.mu.Lock()
	if n.nodeID != "" && n.nodeID != s.NodeId {
		n.mu.Unlock()
		return fmt.Errorf("the control plane now says this credential is node %s, not %s", s.NodeId, n.nodeID)
	}
	n.epoch, n.timing = s.SessionEpoch, t
	n.desired, n.adminSlots = s.DesiredState, int(s.Slots)
	n.mu.Unlock()
	n.log.Info("session open", "node_id", s.NodeId, "session_epoch", s.SessionEpoch, "desired_state", s.DesiredState, "slots", s.Slots)
	return nil
}

// reopen re-opens the session with the same boot id after SESSION_INVALID,
// once for every caller that saw the same token fail.
func (n *Node) reopen(ctx context.Context, failedToken *string) {
	n.reopenMu.Lock()
	defer n.reopenMu.Unlock()
	if n.cl.token.Load() != failedToken {
		return // someone else reopened already
	}
	if err := n.openSession(ctx); err != nil {
		if fatal(err) {
			n.fail(err)
			return
		}
		n.log.Warn("re-opening the session failed", "err", err)
	}
}

func (n *Node) heartbeatLoop(ctx context.Context) {
	for {
		n.mu.Lock()
		every := n.timing.heartbeat
		n.mu.Unlock()
		if !n.sleep(ctx, every) {
			return
		}
		n.sendHeartbeat(ctx)
	}
}

// sendHeartbeat reports health and applies the desired state it returns.
func (n *Node) sendHeartbeat(ctx context.Context) {
	n.mu.Lock()
	req := machineapi.HeartbeatRequest{RuntimeVersion: clip(n.cfg.Version+"; "+n.runtime, 255),
		LocalSlots: int32(n.cfg.LocalSlots), SlotsBusy: int32(min(n.busy, contracts.SlotsMax)), Draining: n.draining,
		Dependencies: make([]machineapi.Dependency, 0, len(n.deps))}
	for _, d := range n.deps {
		md := machineapi.Dependency{Name: d.Name, Healthy: d.Healthy}
		if d.Detail != "" {
			s := clip(d.Detail, 1024)
			md.Detail = &s
		}
		req.Dependencies = append(req.Dependencies, md)
	}
	if len(n.languages) > 0 {
		// None before the first probe: the control plane keeps the
		// previous report rather than learning an empty one.
		langs := languageReports(n.languages)
		req.Languages = &langs
	}
	if len(n.features) > 0 {
		// Likewise none before the first probe: the control plane keeps the
		// previous report.
		feats := make([]machineapi.Feature, len(n.features))
		for i, f := range n.features {
			feats[i] = machineapi.Feature(f)
		}
		req.Features = &feats
	}
	n.mu.Unlock()
	tok := n.cl.token.Load()
	r, err := n.cl.heartbeat(ctx, req, n.times().heartbeat)
	if err != nil {
		if ctx.Err() == nil {
			n.m.heartbeatFailures.Add(1)
			n.log.Warn("heartbeat failed", "node_id", n.nodeID, "err", err)
			var b time.Duration
			n.handleCallError(ctx, err, tok, &b)
		}
		return
	}
	n.m.heartbeats.Add(1)
	n.mu.Lock()
	changed := r.DesiredState != n.desired || int(r.Slots) != n.adminSlots
	if changed {
		n.log.Info("desired state from the control plane", "node_id", n.nodeID, "desired_state", r.DesiredState,
			"slots", r.Slots, "config_revision", r.ConfigRevision)
	}
	n.desired, n.adminSlots = r.DesiredState, int(r.Slots)
	n.mu.Unlock()
	if changed {
		n.poke()
	}
}
