package console

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/adminapi"
)

// The overview's per-pool chart: completions per minute as bars on the
// left scale, queue-wait p95 as a line on the right one, broken where a
// bucket has no p95.
func TestPoolChartScales(t *testing.T) {
	t.Parallel()
	ms := func(v int64) *int64 { return &v }
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	buckets := []adminapi.FinishBucket{
		{Start: t0, Finished: 4, QueueWaitP95Ms: ms(500)},
		{Start: t0.Add(2 * time.Minute), Finished: 8, QueueWaitP95Ms: ms(2000)},
		{Start: t0.Add(4 * time.Minute), Finished: 0},
		{Start: t0.Add(6 * time.Minute), Finished: 2, QueueWaitP95Ms: ms(1000)},
	}
	c := chart("cpp", buckets, 120) // 2-minute buckets: 8 finished is 4/min
	require.Len(t, c.Bars, 4)
	require.Equal(t, "4.0/min", c.PeakRate)
	require.Equal(t, "2.0 s", c.PeakWait)
	require.InDelta(t, c.PlotH-2, c.Bars[1].H, 1e-9, "the busiest bucket fills the plot")
	require.InDelta(t, (c.PlotH-2)/2, c.Bars[0].H, 1e-9)
	require.Zero(t, c.Bars[2].H)
	require.Len(t, c.Dots, 3)
	require.InDelta(t, bigH-(c.PlotH-2), c.Dots[1].Y, 1e-9, "the longest wait tops the right scale")
	require.Len(t, c.Lines, 1, "the gap at bucket 2 breaks the line; a lone point is only a dot")
	require.Len(t, strings.Fields(c.Lines[0]), 2)
	require.Equal(t, "cpp: up to 4.0/min completions, queue-wait p95 up to 2.0 s", c.Summary)

	idle := chart("java", []adminapi.FinishBucket{{Start: t0}, {Start: t0.Add(time.Minute)}}, 60)
	require.Empty(t, idle.Dots)
	require.Equal(t, "—", idle.PeakWait)
	require.Contains(t, idle.Summary, "no queue wait measured")
}
