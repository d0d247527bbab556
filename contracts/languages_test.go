package contracts_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts"
)

// Every pool is reachable from a canonical language key and every canonical
// key names a pool; unknown keys have none.
func TestLanguageTableCoversEveryPool(t *testing.T) {
	t.Parallel()
	reached := map[string]bool{}
	for _, lang := range strings.Split(contracts.CanonicalLanguages, ", ") {
		pool, ok := contracts.PoolOfLanguage(lang)
		require.True(t, ok, lang)
		reached[pool] = true
	}
	for _, p := range contracts.Pools() {
		require.True(t, reached[p], "no canonical language for pool %s", p)
	}
	_, ok := contracts.PoolOfLanguage("cobol")
	require.False(t, ok)
}

// Aliases point at canonical ids of the same pool with the same minimum
// memory, ids are unique, and every code id has a minimum memory.
func TestLanguageAliasesAndIDs(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, l := range contracts.Languages() {
		require.False(t, seen[l.ID], "duplicate id %s", l.ID)
		seen[l.ID] = true
		require.Contains(t, contracts.Pools(), l.Pool, l.ID)
		require.NotEmpty(t, l.Standard, l.ID)
		if l.Pool == "mysql" {
			require.Zero(t, l.MinMemoryBytes, l.ID)
		} else {
			require.Positive(t, l.MinMemoryBytes, l.ID)
		}
		got, ok := contracts.LookupLanguage(l.ID)
		require.True(t, ok)
		require.Equal(t, l, got)
		if l.AliasOf == "" {
			continue
		}
		target, ok := contracts.LookupLanguage(l.AliasOf)
		require.True(t, ok, "%s is an alias of unknown %s", l.ID, l.AliasOf)
		require.Empty(t, target.AliasOf, "%s: aliases must point at canonical ids", l.ID)
		require.Equal(t, target.Pool, l.Pool, l.ID)
		require.Equal(t, target.MinMemoryBytes, l.MinMemoryBytes, l.ID)
		require.Contains(t, l.Standard, target.Standard, "an alias means what its target means")
	}
	require.Contains(t, contracts.CanonicalLanguages, "cpp20")
	require.NotContains(t, strings.Split(contracts.CanonicalLanguages, ", "), "cpp")
}
