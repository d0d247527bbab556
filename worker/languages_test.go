package worker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code"
	"github.com/kece-oj/kece/engine/sqljudge"
)

// The control plane (contracts.Languages) and the node (code.Languages) keep
// their own tables because engine must not import contracts; they must list
// the same code language ids, with the same pools, standards and minimum
// memory, and every alias must judge exactly like the id it stands for.
func TestLanguageTablesAgree(t *testing.T) {
	t.Parallel()
	specs, err := code.Languages()
	require.NoError(t, err)
	engineIDs := map[string]bool{}
	for _, s := range specs {
		engineIDs[s.Language] = true
		l, ok := contracts.LookupLanguage(s.Language)
		require.True(t, ok, "the node judges %s but the contract does not accept it", s.Language)
		require.Equal(t, l.Pool, s.Pool, s.Language)
		require.Equal(t, l.MinMemoryBytes, s.MinMemoryBytes, s.Language)
		require.Equal(t, l.Standard, s.Standard, s.Language)
		require.NotEmpty(t, s.EntryRule(), s.Language)
		if l.AliasOf != "" {
			target, err := code.RuntimeForLanguage(l.AliasOf)
			require.NoError(t, err)
			alias := s
			alias.Language, alias.Standard = target.Language, target.Standard
			require.Equal(t, target, alias, "alias %s must judge exactly like %s", s.Language, l.AliasOf)
		}
	}
	for _, l := range contracts.Languages() {
		if l.Pool == "mysql" {
			continue
		}
		require.True(t, engineIDs[l.ID], "the contract accepts %s but no node can judge it", l.ID)
		pool, err := codePoolOf(l.ID)
		require.NoError(t, err)
		require.Equal(t, l.Pool, pool)
	}
}

// Newer probes replace the reports; a version a failed probe could not learn
// is kept from the previous one.
func TestMergeLanguagesKeepsKnownVersions(t *testing.T) {
	t.Parallel()
	old := []LanguageReport{{ID: "cpp17", Version: "g++ 12"}, {ID: "cpp20", Version: "g++ 12"}}
	latest := []LanguageReport{{ID: "cpp17", Version: ""}, {ID: "cpp20", Version: "g++ 13"}, {ID: "cpp11"}}
	got := mergeLanguages(old, latest)
	require.Equal(t, []string{"g++ 12", "g++ 13", ""}, []string{got[0].Version, got[1].Version, got[2].Version})
	require.Empty(t, latest[0].Version, "the probe's answer is not modified")
}

// Command lines are shown as a POSIX shell would read them back.
func TestCommandLine(t *testing.T) {
	t.Parallel()
	require.Equal(t, "g++ -std=gnu++20 -o main main.cpp", commandLine([]string{"g++", "-std=gnu++20", "-o", "main", "main.cpp"}))
	require.Equal(t, "java -Xmx{memory_mb}m -cp . {class}", commandLine([]string{"java", "-Xmx{memory_mb}m", "-cp", ".", "{class}"}))
	require.Equal(t, `/bin/sh -c 'cp a b && echo '\''x'\''' ''`, commandLine([]string{"/bin/sh", "-c", "cp a b && echo 'x'", ""}))
}

// The control plane (contracts.Features), the machine contract's Feature
// enum and the engine (engine.AllFeatures) list the same problem types in
// the same order, and each executor reports only problem types of that list.
func TestFeatureTablesAgree(t *testing.T) {
	t.Parallel()
	require.Equal(t, contracts.Features(), engine.AllFeatures())
	for _, f := range contracts.Features() {
		require.True(t, machineapi.Feature(f).Valid(), "the machine contract does not accept %s", f)
	}
	for name, fs := range map[string][]string{"code": code.Features(), "sqljudge": sqljudge.Features()} {
		require.Contains(t, fs, engine.FeatureBatch, "%s: every executor judges classic batch", name)
		_, err := contracts.FeatureCaps(fs)
		require.NoError(t, err, name)
	}
}
