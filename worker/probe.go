package worker

// Dependency probes (pausing claims while one is down), the language
// reports heartbeats carry, and the janitor loop.

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/kece-oj/kece/contracts/machineapi"
)

// depsRecheck is the longest a node whose dependency is down waits between
// probes (HealthInterval if shorter): how soon it claims again once the
// dependency is back.
const depsRecheck = 5 * time.Second

// healthLoop probes every HealthInterval, every depsRecheck while a
// dependency is down, and at once when a job failed on one.
func (n *Node) healthLoop(ctx context.Context) {
	for {
		n.mu.Lock()
		d := n.cfg.HealthInterval
		if n.depsDown {
			d = min(d, depsRecheck)
		}
		n.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-n.probeCh:
			t.Stop()
		case <-t.C:
		}
		n.probe(ctx)
	}
}

// probe runs the backend's health check, bounded, and keeps the answer for
// heartbeats and /healthz; it stops or resumes claiming (mayClaimLocked).
func (n *Node) probe(ctx context.Context) {
	n.mu.Lock()
	gen := n.depsGen
	n.mu.Unlock()
	pctx, cancel := context.WithTimeout(ctx, max(n.cfg.RequestTimeout, 30*time.Second))
	defer cancel()
	h := n.backend.Health(pctx)
	deps := h.Dependencies
	healthy := !slices.ContainsFunc(deps, func(d Dependency) bool { return !d.Healthy })
	n.mu.Lock()
	// A failed probe keeps the last known version: enable compares it with
	// the version the self-check ran with, and a blip must not change it.
	if h.Runtime != "" {
		n.runtime = h.Runtime
	}
	// While a dependency stays down the node probes every few seconds;
	// the warning is logged when what the probe sees changes.
	changed := !slices.Equal(n.deps, deps)
	n.deps = deps
	n.languages = mergeLanguages(n.languages, h.Languages)
	n.features = h.Features
	was := n.depsDown
	// A job that failed on a dependency after this probe began keeps the
	// node paused; its own probe is already queued.
	n.depsDown = !healthy || (was && n.depsGen != gen)
	resumed := was && !n.depsDown
	n.mu.Unlock()
	for _, d := range deps {
		if !d.Healthy && changed {
			n.log.Warn("dependency unhealthy; claiming nothing until it is back", "node_id", n.nodeID, "dependency", d.Name, "detail", d.Detail)
		}
	}
	if resumed {
		n.log.Info("dependencies healthy again; claiming resumes", "node_id", n.nodeID)
		n.poke()
	}
}

// dependencyDown pauses claiming after a job failed on a dependency of the
// node (dependencyFault) and asks for a probe now; the probe resumes
// claiming once the dependency answers again.
func (n *Node) dependencyDown(err error) {
	n.mu.Lock()
	n.depsGen++
	was := n.depsDown
	n.depsDown = true
	n.mu.Unlock()
	if !was {
		n.m.dependencyPauses.Add(1)
		n.log.Warn("a job failed on a dependency of this node; claiming nothing until a probe passes", "node_id", n.nodeID, "err", err)
	}
	select {
	case n.probeCh <- struct{}{}:
	default:
	}
}

// languageReports converts the probed reports to the machine contract,
// bounded to its field sizes.
func languageReports(in []LanguageReport) []machineapi.LanguageReport {
	out := make([]machineapi.LanguageReport, 0, min(len(in), 32))
	for _, l := range in[:min(len(in), 32)] {
		out = append(out, machineapi.LanguageReport{Id: l.ID, Pool: machineapi.Pool(l.Pool),
			Standard: clip(l.Standard, 256), Version: clip(l.Version, 256),
			CompileCommand: clip(commandLine(l.CompileCmd), 1024), RunCommand: clip(commandLine(l.RunCmd), 1024),
			EntryPoint: clip(l.EntryRule, 512), ExtraMemoryBytes: l.ExtraMemoryBytes, MinMemoryBytes: l.MinMemoryBytes})
	}
	return out
}

// commandLine renders argv as one line a reader can paste into a POSIX
// shell: arguments with anything but safe characters are single-quoted.
func commandLine(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=+.,/:@%{}") == "" {
			parts[i] = a
			continue
		}
		parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(parts, " ")
}

// mergeLanguages takes the latest language reports but keeps a version the
// latest probe could not learn, as for the runtime version.
func mergeLanguages(old, latest []LanguageReport) []LanguageReport {
	known := make(map[string]string, len(old))
	for _, l := range old {
		known[l.ID] = l.Version
	}
	out := append([]LanguageReport(nil), latest...)
	for i := range out {
		if out[i].Version == "" {
			out[i].Version = known[out[i].ID]
		}
	}
	return out
}

func (n *Node) janitorLoop(ctx context.Context) {
	for n.sleep(ctx, n.cfg.JanitorInterval) {
		if err := n.backend.Janitor(ctx, n.isLive); err != nil && ctx.Err() == nil {
			n.log.Warn("janitor failed", "node_id", n.nodeID, "err", err)
		}
	}
}
