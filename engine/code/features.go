package code

import "github.com/kece-oj/kece/engine"

// Features are the problem types this executor judges. Add one here only
// once the executor judges it end to end: nodes report this list, and the
// control plane hands them such jobs from then on.
func Features() []string {
	return []string{engine.FeatureBatch, engine.FeatureFileIO, engine.FeatureSubtasks, engine.FeatureMultiFile,
		engine.FeatureInteractive, engine.FeatureCommunication, engine.FeatureGrader}
}
