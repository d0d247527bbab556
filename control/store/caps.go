package store

import (
	"context"
	"fmt"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/manifest"
)

// Capabilities (docs/scheduling.md, "Capabilities"): a job requires its
// language's bit and the bit of each problem type it uses; a node supports
// the bits of the languages and problem types it reported. A claim leases a
// job only when required_caps & ~(the node's bits) = 0.

// batchCap is classic batch judging: every node supports it and no job
// requires it (jobs queued before capabilities require nothing at all).
var batchCap = mustFeatureCaps(contracts.FeatureBatch)

func mustFeatureCaps(names ...string) uint64 {
	m, err := contracts.FeatureCaps(names)
	if err != nil {
		panic(err)
	}
	return m
}

// requiredCaps derives what a submission requires from its language, its
// manifest and whether it has more than one source file.
func requiredCaps(language string, m manifest.Manifest, multiFile bool) uint64 {
	caps, _ := contracts.LanguageCap(language)
	var need []string
	if m.IO != nil && (m.IO.InputFile != "" || m.IO.OutputFile != "") {
		need = append(need, contracts.FeatureFileIO)
	}
	if len(m.Subtasks) > 0 {
		need = append(need, contracts.FeatureSubtasks)
	}
	if multiFile {
		need = append(need, contracts.FeatureMultiFile)
	}
	if m.Grader != nil {
		need = append(need, contracts.FeatureGrader)
	}
	switch m.Checker.Type {
	case manifest.CheckerInteractive:
		need = append(need, contracts.FeatureInteractive)
	case manifest.CheckerCommunication:
		need = append(need, contracts.FeatureCommunication)
	}
	return caps | mustFeatureCaps(need...)
}

// needsFeature reports whether caps require a problem type beyond classic
// batch (language bits aside).
func needsFeature(caps uint64) bool { return caps&(1<<contracts.LanguageBitBase-1) != 0 }

// nodeCapsSQL is a node's supported bits in SQL (n = judge_node): the
// languages it reported, every language when it never reported any, and the
// problem types it reported plus classic batch.
var nodeCapsSQL = fmt.Sprintf(`(COALESCE(n.caps_languages, %d) | n.caps_features | %d)`, contracts.AllLanguageCaps(), batchCap)

// nodeCaps is nodeCapsSQL in Go, from the two columns.
func nodeCaps(languages *uint64, features uint64) uint64 {
	langs := contracts.AllLanguageCaps()
	if languages != nil {
		langs = *languages
	}
	return langs | features | batchCap
}

// reportedCaps turns a heartbeat's reports into the columns to store (nil:
// not reported, keep the stored value).
func reportedCaps(langs []LanguageReport, features []string) (languages, feats *uint64, err error) {
	if langs != nil {
		ids := make([]string, len(langs))
		for i, l := range langs {
			ids[i] = l.ID
		}
		m := contracts.LanguageCaps(ids)
		languages = &m
	}
	if features != nil {
		if len(features) > 32 {
			return nil, nil, invalid("features", "at most 32 problem types")
		}
		m, err := contracts.FeatureCaps(features)
		if err != nil {
			return nil, nil, invalid("features", "%v", err)
		}
		feats = &m
	}
	return languages, feats, nil
}

// pickPool picks the pool work of the live calls, capacity[i] jobs at most
// for call i, each only jobs its node can run. Nodes that support the same
// capabilities (a pool's nodes, as a rule) share one pick; each further set
// of capabilities in the batch costs one more, which skips the jobs already
// picked (this transaction holds their locks, which SKIP LOCKED does not
// skip).
func pickPool(ctx context.Context, q querier, calls []claimCall, live, capacity []int,
	nodes map[int64]lockedNode, out []claimAnswer) error {
	var order []uint64
	want := map[uint64]int{}
	for _, i := range live {
		if capacity[i] <= 0 {
			continue
		}
		caps := nodes[calls[i].sess.NodeID].caps
		if _, ok := want[caps]; !ok {
			order = append(order, caps)
		}
		want[caps] += capacity[i]
	}
	var picked []int64
	for _, caps := range order {
		more, err := pickReady(ctx, q, calls[0].pool, 0, caps, want[caps], picked)
		if err != nil {
			return err
		}
		for _, j := range more {
			picked = append(picked, j.JobID)
		}
		for _, i := range live {
			if nodes[calls[i].sess.NodeID].caps != caps {
				continue
			}
			take := min(capacity[i], len(more))
			out[i].jobs, more = append(out[i].jobs, more[:take]...), more[take:]
		}
	}
	return nil
}
