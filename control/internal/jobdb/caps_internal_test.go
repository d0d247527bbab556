package jobdb

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/manifest"
)

// Each problem type a job uses is derived from its manifest and submission;
// an alias needs its canonical id's language.
func TestRequiredCapsDerived(t *testing.T) {
	t.Parallel()
	plain := manifest.Manifest{Kind: manifest.KindCode, Checker: manifest.Checker{Type: "tolerant"}}
	withIO := plain
	withIO.IO = &manifest.FileIO{InputFile: "a.in"}
	stdioOnly := plain
	stdioOnly.IO = &manifest.FileIO{Stdio: true}
	withSubtasks := plain
	withSubtasks.Subtasks = []manifest.Subtask{{SubtaskID: "s1"}}
	interactive := plain
	interactive.Checker.Type = manifest.CheckerInteractive
	communication := plain
	communication.Checker.Type = manifest.CheckerCommunication
	withGrader := plain
	withGrader.Grader = &manifest.Grader{}
	for name, c := range map[string]struct {
		m         manifest.Manifest
		multiFile bool
		want      []string
	}{
		"classic":       {plain, false, nil},
		"stdio only":    {stdioOnly, false, nil},
		"file io":       {withIO, false, []string{contracts.FeatureFileIO}},
		"subtasks":      {withSubtasks, false, []string{contracts.FeatureSubtasks}},
		"multi file":    {plain, true, []string{contracts.FeatureMultiFile}},
		"interactive":   {interactive, false, []string{contracts.FeatureInteractive}},
		"communication": {communication, true, []string{contracts.FeatureMultiFile, contracts.FeatureCommunication}},
		"grader":        {withGrader, false, []string{contracts.FeatureGrader}},
	} {
		got := RequiredCaps("cpp", c.m, c.multiFile)
		require.Equal(t, append(c.want, "cpp17"), contracts.CapNames(got), name)
		require.Equal(t, len(c.want) > 0, NeedsFeature(got), name)
	}
	require.Equal(t, []string{"c11"}, contracts.CapNames(RequiredCaps("c11", plain, false)))
}

// A node that never reported languages runs every language; one that never
// reported problem types runs classic batch only.
func TestNodeCapsDefaults(t *testing.T) {
	t.Parallel()
	all := NodeCaps(nil, 0)
	require.Equal(t, contracts.AllLanguageCaps()|BatchCap, all)
	cpp17, _ := contracts.LanguageCap("cpp17")
	only := NodeCaps(&cpp17, 0)
	require.Zero(t, RequiredCaps("cpp17", manifest.Manifest{}, false)&^only)
	require.NotZero(t, RequiredCaps("cpp20", manifest.Manifest{}, false)&^only)
	require.NotZero(t, RequiredCaps("cpp17", manifest.Manifest{}, true)&^only, "multi_file not reported")
}
