package engine

import "slices"

// Problem types (features) an executor may judge. The engine keeps its own
// list because it must not import contracts (contracts.Features); the two
// must agree (TestFeatureTablesAgree in worker). A node reports the ones its
// executor judges, and the control plane hands it only jobs that need no
// other (docs/scheduling.md, "Capabilities").
const (
	FeatureBatch         = "batch"
	FeatureFileIO        = "file_io"
	FeatureSubtasks      = "subtasks"
	FeatureMultiFile     = "multi_file"
	FeatureInteractive   = "interactive"
	FeatureCommunication = "communication"
	FeatureGrader        = "grader"
)

var allFeatures = []string{FeatureBatch, FeatureFileIO, FeatureSubtasks, FeatureMultiFile,
	FeatureInteractive, FeatureCommunication, FeatureGrader}

// AllFeatures lists every problem type, in the contract's order.
func AllFeatures() []string { return slices.Clone(allFeatures) }
