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
