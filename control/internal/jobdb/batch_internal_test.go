package jobdb

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A lone call on an idle batcher runs at once however long the linger; on
// a busy batcher (a batch just ended) the call that starts the next batch
// waits for its burst: a call arriving within the quiet time joins its
// batch instead of forming a second one, and the batch runs once no call
// has come for the quiet time, long before the linger is up.
func TestBatchLingerOnlyWhenBusy(t *testing.T) {
	t.Parallel()
	const linger, quiet = 10 * time.Second, 500 * time.Millisecond
	var mu sync.Mutex
	var sizes []int
	b := NewBatcher(64, 1, linger, func(_ context.Context, calls []*BatchCall[int, int]) {
		mu.Lock()
		sizes = append(sizes, len(calls))
		mu.Unlock()
		for _, c := range calls {
			c.Resp = c.Req * 2
		}
	})
	b.quiet = quiet
	ctx := context.Background()

	t0 := time.Now()
	got, err := b.Do(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 2, got)
	require.Less(t, time.Since(t0), quiet, "an idle batcher does not linger")

	// Busy now: the first call waits, the second joins it.
	var wg sync.WaitGroup
	answers := make([]int, 2)
	t0 = time.Now()
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := b.Do(ctx, 10+i)
			assert.NoError(t, err)
			answers[i] = v
		}()
		if i == 0 { // the second call comes once the first waits for its burst
			require.Eventually(t, func() bool { return b.Queued() == 1 }, quiet/2, time.Millisecond)
		}
	}
	wg.Wait()
	took := time.Since(t0)
	require.GreaterOrEqual(t, took, quiet, "a busy batcher's new batch waits for its burst")
	require.Less(t, took, linger/2, "and runs once the burst is in, not at the end of the linger")
	require.Equal(t, []int{20, 22}, answers)
	mu.Lock()
	require.Equal(t, []int{1, 2}, sizes, "the call that came during the wait shared the batch")
	mu.Unlock()

	// Idle again once lingerBusy has passed since the last batch.
	time.Sleep(lingerBusy + 10*time.Millisecond) // the time under test passing, not a wait for a goroutine
	t0 = time.Now()
	_, err = b.Do(ctx, 3)
	require.NoError(t, err)
	require.Less(t, time.Since(t0), quiet)
}

// BatchLinger defaults to 2 ms, negative turns it off, and above 50 ms is
// refused.
func TestBatchLingerConfig(t *testing.T) {
	t.Parallel()
	c := Config{}
	c.setDefaults()
	require.Equal(t, BatchLingerDefault, c.BatchLinger)
	require.NoError(t, c.Validate())
	c = Config{BatchLinger: -1}
	c.setDefaults()
	require.NoError(t, c.Validate())
	c = Config{BatchLinger: time.Second}
	c.setDefaults()
	require.ErrorContains(t, c.Validate(), "batch linger 1s is above 50ms")
}
