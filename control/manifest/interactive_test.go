package manifest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/manifest"
)

func interactiveManifest(sp manifest.SpecialChecker) manifest.Manifest {
	m := specialManifest(sp)
	m.Checker.Type = manifest.CheckerInteractive
	return m
}

func communicationManifest(sp manifest.SpecialChecker) manifest.Manifest {
	m := specialManifest(sp)
	m.Checker.Type = manifest.CheckerCommunication
	return m
}

// An interactor follows testlib's convention (an explicit testlib is stored
// as absent), may carry its own CPU limit, and excludes file I/O; a special
// checker takes no time limit.
func TestInteractiveManifest(t *testing.T) {
	t.Parallel()
	bad := map[string]struct {
		m     manifest.Manifest
		field string
	}{
		"legacy interactor":  {interactiveManifest(manifest.SpecialChecker{Protocol: "legacy"}), "checker.special.protocol"},
		"score interactor":   {interactiveManifest(manifest.SpecialChecker{Protocol: "score"}), "checker.special.protocol"},
		"negative time":      {interactiveManifest(manifest.SpecialChecker{TimeMs: -1}), "checker.special.timeMs"},
		"time above the max": {interactiveManifest(manifest.SpecialChecker{TimeMs: manifest.MaxTimeMs + 1}), "checker.special.timeMs"},
		"time for a checker": {specialManifest(manifest.SpecialChecker{TimeMs: 1000}), "checker.special.timeMs"},
		"file input": {func() manifest.Manifest {
			m := interactiveManifest(manifest.SpecialChecker{})
			m.IO = &manifest.FileIO{InputFile: "a.in"}
			return m
		}(), "io"},
		"no processes":        {communicationManifest(manifest.SpecialChecker{}), "checker.special.processes"},
		"too many processes":  {communicationManifest(manifest.SpecialChecker{Processes: manifest.MaxProcesses + 1}), "checker.special.processes"},
		"processes elsewhere": {interactiveManifest(manifest.SpecialChecker{Processes: 2}), "checker.special.processes"},
		"manager with files": {func() manifest.Manifest {
			m := communicationManifest(manifest.SpecialChecker{Processes: 2})
			m.IO = &manifest.FileIO{OutputFile: "a.out"}
			return m
		}(), "io"},
		"negative points":    {interactiveManifest(manifest.SpecialChecker{MaxPoints: -1}), "checker.special.maxPoints"},
		"legacy manager":     {communicationManifest(manifest.SpecialChecker{Processes: 2, Protocol: "legacy"}), "checker.special.protocol"},
		"interactor missing": {func() manifest.Manifest { m := codeManifest(); m.Checker.Type = "interactive"; return m }(), "checker.special"},
		"unknown type":       {func() manifest.Manifest { m := codeManifest(); m.Checker.Type = "relay"; return m }(), "checker.type"},
	}
	for name, tc := range bad {
		err := tc.m.Validate()
		var ve *manifest.Error
		require.ErrorAs(t, err, &ve, name)
		require.Equal(t, tc.field, ve.Field, name)
	}

	m := interactiveManifest(manifest.SpecialChecker{Protocol: "testlib", TimeMs: 2000, MaxPoints: 100})
	require.NoError(t, m.Validate())
	b, digest, err := m.Canonical()
	require.NoError(t, err)
	require.NotContains(t, string(b), "protocol")
	require.Contains(t, string(b), `"type":"interactive"`)
	require.Contains(t, string(b), `"timeMs":2000`)
	require.Contains(t, string(b), `"maxPoints":100`)
	m2 := interactiveManifest(manifest.SpecialChecker{TimeMs: 2000, MaxPoints: 100})
	_, digest2, err := m2.Canonical()
	require.NoError(t, err)
	require.Equal(t, digest, digest2, "explicit testlib and absent are one manifest")
}

// A communication task's manager names its process count and may carry its
// own CPU limit.
func TestCommunicationManifest(t *testing.T) {
	t.Parallel()
	m := communicationManifest(manifest.SpecialChecker{Processes: 2, TimeMs: 3000})
	require.NoError(t, m.Validate())
	b, _, err := m.Canonical()
	require.NoError(t, err)
	require.Contains(t, string(b), `"type":"communication"`)
	require.Contains(t, string(b), `"processes":2`)
}
