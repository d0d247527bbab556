package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSummaryCountsPoolsAndNodesApart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.Group(t, 8)
	b.Node(t, "cpp", g.ID, 2, true)
	b.Node(t, "cpp", g.ID, 2, true)
	b.Node(t, "python", g.ID, 2, false)
	b.Enqueue(t, "ALGO", "s1")
	sum, err := b.Store.Summary(b.Ctx)
	require.NoError(t, err)
	require.Equal(t, 5, sum.TotalPools)
	require.Equal(t, 1, sum.ReadyPools)
	require.NotNil(t, sum.Freshness)
	for _, p := range sum.Pools {
		switch p.Pool {
		case "cpp":
			require.Equal(t, 2, p.ReadyNodes)
			require.Equal(t, 1, p.QueuedSubmissions)
		default:
			require.Zero(t, p.ReadyNodes, p.Pool)
		}
	}
}
