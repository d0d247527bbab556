package jobdb

import (
	"fmt"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/manifest"
)

// Capabilities (docs/scheduling.md, "Capabilities"): a job requires its
// language's bit and the bit of each problem type it uses; a node supports
// the bits of the languages and problem types it reported. A claim leases a
// job only when required_caps & ~(the node's bits) = 0.

// BatchCap is classic batch judging: every node supports it and no job
// requires it (jobs queued before capabilities require nothing at all).
var BatchCap = mustFeatureCaps(contracts.FeatureBatch)

func mustFeatureCaps(names ...string) uint64 {
	m, err := contracts.FeatureCaps(names)
	if err != nil {
		panic(err)
	}
	return m
}

// RequiredCaps derives what a submission requires from its language, its
// manifest and whether it has more than one source file.
func RequiredCaps(language string, m manifest.Manifest, multiFile bool) uint64 {
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

// NeedsFeature reports whether caps require a problem type beyond classic
// batch (language bits aside).
func NeedsFeature(caps uint64) bool { return caps&(1<<contracts.LanguageBitBase-1) != 0 }

// NodeCapsSQL is a node's supported bits in SQL (n = judge_node): the
// languages it reported, every language when it never reported any, and the
// problem types it reported plus classic batch.
var NodeCapsSQL = fmt.Sprintf(`(COALESCE(n.caps_languages, %d) | n.caps_features | %d)`, contracts.AllLanguageCaps(), BatchCap)

// NodeCaps is nodeCapsSQL in Go, from the two columns.
func NodeCaps(languages *uint64, features uint64) uint64 {
	langs := contracts.AllLanguageCaps()
	if languages != nil {
		langs = *languages
	}
	return langs | features | BatchCap
}
