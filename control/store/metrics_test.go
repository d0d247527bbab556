package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

// The fleet gauges read on every metrics scrape, and the host groups' view,
// walk index ranges of live rows (queued, running, undelivered), never the
// whole job or event table.
func TestFleetStatsWalkIndexRanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 30 {
		b.Enqueue(t, "ALGO", "fleet-"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	for _, q := range store.FleetQueriesForExplain() {
		plans := b.Explain(t, q.Query, q.Args...)
		for _, plan := range plans {
			require.Equal(t, q.Index, plan["key"], "%s: plan %v", q.Name, plan)
			require.Contains(t, []string{"ref", "range"}, plan["type"], "%s walks a range, not the whole index: %v", q.Name, plan)
		}
		require.Len(t, plans, 1, "%s: one table", q.Name)
	}
	fs, err := b.Store.FleetStats(b.Ctx)
	require.NoError(t, err)
	queued := map[string]int{}
	for _, q := range fs.Queues {
		queued[q.Pool] = q.Queued
	}
	require.Equal(t, map[string]int{"cpp": 30, "java": 0, "python": 0, "arkts": 0, "mysql": 0}, queued)
}
