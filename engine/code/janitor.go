package code

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code/sandboxinit"
)

// Janitor force-removes the containers labelled with nodeID (running or
// not) and that node's work directories in the workspace, except those of
// a lease live says the node holds (nil: none). Call it at node start,
// before the first Execute: resources of a previous process of this node
// are leftovers by definition. A node whose start call failed (the daemon
// was down) makes its first successful one while it may hold leases, so
// those are kept. It returns the containers removed.
func (x *Executor) Janitor(ctx context.Context, nodeID string, live func(jobID string, leaseEpoch int64) bool) (int, error) {
	if nodeID == "" {
		return 0, engine.Infraf(engine.InfraConfig, "janitor: empty node id")
	}
	if live == nil {
		live = func(string, int64) bool { return false }
	}
	if err := x.removeWorkDirs(nodeID, live); err != nil {
		return 0, err
	}
	return x.removeContainers(ctx, nodeID, func(id string, labels map[string]string) bool {
		if labels[LabelRole] == roleWarm {
			return x.warm.keep(id, live)
		}
		job, epoch, ok := labelLease(labels)
		return ok && live(job, epoch)
	})
}

// Sweep force-removes the containers labelled with nodeID whose lease is
// not live: what a removal missed, e.g. during a daemon outage, while the
// node runs on. live answers from the node's own view of its leases, which
// holds a lease from before its first container is created until after its
// last is removed, so a live job is never touched. Work directories are left
// to the next Janitor: one of a live job may not have its container yet.
func (x *Executor) Sweep(ctx context.Context, nodeID string, live func(jobID string, leaseEpoch int64) bool) (int, error) {
	if nodeID == "" {
		return 0, engine.Infraf(engine.InfraConfig, "sweep: empty node id")
	}
	return x.removeContainers(ctx, nodeID, func(id string, labels map[string]string) bool {
		if labels[LabelRole] == roleWarm {
			return x.warm.keep(id, live)
		}
		job, epoch, ok := labelLease(labels)
		return !ok || live(job, epoch)
	})
}

// labelLease reads the lease a sandbox container was made for from its
// labels (session.go sets them); ok is false when they do not name one.
func labelLease(labels map[string]string) (jobID string, leaseEpoch int64, ok bool) {
	epoch, err := strconv.ParseInt(labels[LabelLeaseEpoch], 10, 64)
	if err != nil || labels[LabelJob] == "" {
		return "", 0, false
	}
	return labels[LabelJob], epoch, true
}

// removeContainers force-removes nodeID's containers, except those keep
// (when given) says to keep.
func (x *Executor) removeContainers(ctx context.Context, nodeID string, keep func(id string, labels map[string]string) bool) (int, error) {
	list, err := x.cli.ContainerList(ctx, client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", LabelNode+"="+nodeID),
	})
	if err != nil {
		return 0, x.classifyDaemon(ctx, "janitor list", err)
	}
	removed := 0
	for _, c := range list.Items {
		if c.Labels[LabelNode] != nodeID { // the filter is the daemon's; trust but verify
			continue
		}
		if keep != nil && keep(c.ID, c.Labels) {
			continue
		}
		_, err := x.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			return removed, x.classifyDaemon(ctx, "janitor remove "+short(c.ID), err)
		}
		removed++
		x.cfg.Logger.Info("janitor removed sandbox container", "node_id", nodeID, "container", short(c.ID),
			"job_id", c.Labels[LabelJob], "lease_epoch", c.Labels[LabelLeaseEpoch])
	}
	return removed, nil
}

// Probe checks that the daemon answers, the image of spec is present and the
// runtime works in a sandbox; it returns the first line of the version probe.
func (x *Executor) Probe(ctx context.Context, spec engine.RuntimeSpec) (string, error) {
	if err := spec.Validate(); err != nil {
		return "", engine.Infra(engine.InfraConfig, err)
	}
	if _, err := x.cli.Ping(ctx, client.PingOptions{}); err != nil {
		return "", engine.Infraf(engine.InfraDaemonUnreachable, "ping: %w", err)
	}
	if _, err := x.checkImage(ctx, spec.Image); err != nil {
		return "", err
	}
	if len(spec.VersionProbe) == 0 {
		return spec.Image, nil
	}
	task := engine.Task{NodeID: x.cfg.NodeID, JobID: "probe", Runtime: spec}
	j := &job{x: x, task: task, compileUID: uidBase, runUID: uidBase + 1}
	defer j.cleanup(ctx)
	if err := j.prepare(); err != nil {
		return "", err
	}
	s, err := x.startSession(ctx, sessionSpec{image: spec.Image, role: "probe", task: &j.task, memoryBytes: 512 << 20, mounts: j.mounts("box")})
	if err != nil {
		return "", err
	}
	j.userSession = s
	res, err := s.run(ctx, sandboxinit.Request{
		Argv: spec.VersionProbe, Dir: boxDir, Env: j.runEnv(), UID: j.runUID, GID: j.runUID,
		LogBytes: 4096, CPUMillis: 10000, WallMillis: 20000, FileSize: 1 << 20,
		Processes: x.cfg.ProcessesPerRun, Stack: 8 << 20, OpenFiles: x.cfg.OpenFiles,
	})
	if err != nil {
		return "", err
	}
	if res.SetupError != "" || res.ExitCode != 0 || res.Signal != 0 {
		return "", engine.Infraf(engine.InfraImageMissing, "version probe %v in %s failed: %s %s (exit %d signal %d)",
			spec.VersionProbe, spec.Image, res.SetupError, clip(res.Log, 300), res.ExitCode, res.Signal)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(res.Log), "\n")
	if first == "" {
		return "", engine.Infraf(engine.InfraImageMissing, "version probe %v printed nothing", spec.VersionProbe)
	}
	return fmt.Sprintf("%s (%s)", strings.TrimSpace(first), spec.Image), nil
}

// removeWorkDirs removes workspace directories named after nodeID (see
// prepare), except those of a lease live says is held.
func (x *Executor) removeWorkDirs(nodeID string, live func(jobID string, leaseEpoch int64) bool) error {
	entries, err := os.ReadDir(x.cfg.Workspace)
	if err != nil {
		return engine.Infraf(engine.InfraInternal, "janitor: workspace: %w", err)
	}
	prefix := workDirPrefix(nodeID)
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if job, epoch, ok := workDirLease(prefix, e.Name()); ok && live(job, epoch) || x.warm.keepsDir(e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(x.cfg.Workspace, e.Name())); err != nil {
			return hostErr("janitor: work dir", err)
		}
		x.cfg.Logger.Info("janitor removed work dir", "node_id", nodeID, "dir", e.Name())
	}
	return nil
}

// A job's work dir is named node-job-epoch-random (each part with the
// characters idRE rejects replaced), so the janitor can tell a node's dirs
// and the lease each belongs to from the name alone.
func workDirName(nodeID, jobID string, leaseEpoch int64, random string) string {
	return idRE.ReplaceAllString(fmt.Sprintf("%s-%s-%d-%s", nodeID, jobID, leaseEpoch, random), "_")
}

// workDirPrefix is how every work dir of nodeID begins.
func workDirPrefix(nodeID string) string { return idRE.ReplaceAllString(nodeID, "_") + "-" }

// workDirLease reads the lease from the name of a work dir that begins
// with prefix; ok is false when the name does not carry one.
func workDirLease(prefix, name string) (jobID string, leaseEpoch int64, ok bool) {
	f := strings.Split(strings.TrimPrefix(name, prefix), "-")
	if len(f) < 3 {
		return "", 0, false
	}
	epoch, err := strconv.ParseInt(f[len(f)-2], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return strings.Join(f[:len(f)-2], "-"), epoch, true
}
