package ratelimit_test

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/ratelimit"
)

// clock is a fake time the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type testBundle struct {
	clock   *clock
	buckets *ratelimit.Buckets
}

func setup(t *testing.T, def ratelimit.Limit) *testBundle {
	t.Helper()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	b, err := ratelimit.New(ratelimit.Config{Default: def, Now: c.now})
	require.NoError(t, err)
	return &testBundle{clock: c, buckets: b}
}

// take calls Allow n times and counts the admitted requests, with the
// longest wait answered to a refused one.
func (tb *testBundle) take(token int64, own *ratelimit.Limit, n int) (admitted int, wait time.Duration) {
	for range n {
		ok, ra := tb.buckets.Allow(token, own)
		if ok {
			admitted++
		}
		wait = max(wait, ra)
	}
	return admitted, wait
}

func TestBurstThenRefillAtTheRate(t *testing.T) {
	t.Parallel()
	tb := setup(t, ratelimit.Limit{Rate: 2, Burst: 5})
	admitted, wait := tb.take(1, nil, 8)
	require.Equal(t, 5, admitted, "a full bucket admits its burst")
	require.Equal(t, 500*time.Millisecond, wait, "at 2/s the next request comes in 0.5 s")

	tb.clock.add(500 * time.Millisecond)
	admitted, _ = tb.take(1, nil, 3)
	require.Equal(t, 1, admitted, "half a second at 2/s refills one request")

	tb.clock.add(time.Hour)
	admitted, _ = tb.take(1, nil, 10)
	require.Equal(t, 5, admitted, "a bucket never holds more than its burst")
}

func TestRefusedRequestsAreNotCounted(t *testing.T) {
	t.Parallel()
	tb := setup(t, ratelimit.Limit{Rate: 1, Burst: 1})
	admitted, _ := tb.take(1, nil, 100)
	require.Equal(t, 1, admitted)
	// A client that hammers while refused is not pushed further back.
	tb.clock.add(time.Second)
	ok, _ := tb.buckets.Allow(1, nil)
	require.True(t, ok, "one second after the last admitted request, the next is admitted")
}

func TestTokensHaveTheirOwnBuckets(t *testing.T) {
	t.Parallel()
	tb := setup(t, ratelimit.Limit{Rate: 1, Burst: 3})
	admitted, _ := tb.take(1, nil, 10)
	require.Equal(t, 3, admitted)
	admitted, _ = tb.take(2, nil, 10)
	require.Equal(t, 3, admitted, "token 1 emptying its bucket costs token 2 nothing")
}

func TestOwnLimitWinsOverDefaultAndChangesApplyAtOnce(t *testing.T) {
	t.Parallel()
	tb := setup(t, ratelimit.Limit{Rate: 1, Burst: 2})
	own := &ratelimit.Limit{Rate: 10, Burst: 20}
	admitted, wait := tb.take(1, own, 30)
	require.Equal(t, 20, admitted)
	require.Equal(t, 100*time.Millisecond, wait)

	// The token's limit is raised while its bucket is empty: the new
	// budget applies at once, with a full bucket.
	higher := &ratelimit.Limit{Rate: 10, Burst: 25}
	admitted, _ = tb.take(1, higher, 30)
	require.Equal(t, 25, admitted)

	// Lowered: no more than the new burst, refilled at the new rate.
	lower := &ratelimit.Limit{Rate: 1, Burst: 4}
	admitted, wait = tb.take(1, lower, 10)
	require.Equal(t, 4, admitted)
	require.Equal(t, time.Second, wait)

	// Unlimited: everything passes, and the bucket is dropped.
	admitted, _ = tb.take(1, &ratelimit.Limit{}, 1000)
	require.Equal(t, 1000, admitted)
	require.Equal(t, 0, tb.buckets.Len())
}

func TestUnlimitedDefault(t *testing.T) {
	t.Parallel()
	tb := setup(t, ratelimit.Limit{})
	admitted, _ := tb.take(1, nil, 10000)
	require.Equal(t, 10000, admitted)
	admitted, _ = tb.take(1, &ratelimit.Limit{Rate: 1, Burst: 1}, 5)
	require.Equal(t, 1, admitted, "a token's own limit applies under an unlimited default")
}

func TestFractionalRateWaitsRoundUp(t *testing.T) {
	t.Parallel()
	tb := setup(t, ratelimit.Limit{Rate: 0.4, Burst: 1})
	_, _ = tb.take(1, nil, 1)
	ok, wait := tb.buckets.Allow(1, nil)
	require.False(t, ok)
	require.Equal(t, 2500*time.Millisecond, wait)
	require.Equal(t, 3, ratelimit.RetryAfterSeconds(wait), "Retry-After rounds up")
	require.Equal(t, 1, ratelimit.RetryAfterSeconds(time.Millisecond), "Retry-After is at least 1")
	require.Equal(t, 1, ratelimit.RetryAfterSeconds(time.Second))
}

func TestIdleFullBucketsAreSwept(t *testing.T) {
	t.Parallel()
	tb := setup(t, ratelimit.Limit{Rate: 1, Burst: 10})
	for id := range int64(50) {
		_, _ = tb.take(id, nil, 10)
	}
	require.Equal(t, 50, tb.buckets.Len())
	// After a minute token 0 is used again; the others have refilled (10 s)
	// and are dropped by the sweep.
	tb.clock.add(61 * time.Second)
	admitted, _ := tb.take(0, nil, 11)
	require.Equal(t, 10, admitted, "a swept bucket comes back full, as it would have been")
	require.Equal(t, 1, tb.buckets.Len())
}

func TestConcurrentAllowAdmitsExactlyTheBurst(t *testing.T) {
	t.Parallel()
	tb := setup(t, ratelimit.Limit{Rate: 1, Burst: 100})
	var mu sync.Mutex
	total := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			n, _ := tb.take(7, nil, 50)
			mu.Lock()
			total += n
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Equal(t, 100, total, "the clock stands still: 400 requests at once get the burst, no more")
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lim    ratelimit.Limit
		fields []string
		says   string
	}{
		{ratelimit.Limit{Rate: 5, Burst: 10}, nil, ""},
		{ratelimit.Limit{}, nil, ""},
		{ratelimit.Limit{Rate: 0.01, Burst: 1}, nil, ""},
		{ratelimit.Limit{Rate: -1, Burst: 10}, []string{"rate"}, "must be 0 (unlimited)"},
		{ratelimit.Limit{Rate: math.NaN(), Burst: 1}, []string{"rate"}, "requests per second"},
		{ratelimit.Limit{Rate: math.Inf(1), Burst: 1}, []string{"rate"}, "up to"},
		{ratelimit.Limit{Rate: 5, Burst: 0}, []string{"burst"}, "would refuse every request"},
		{ratelimit.Limit{Rate: 0, Burst: 5}, []string{"burst"}, "means nothing"},
		{ratelimit.Limit{Rate: 5, Burst: -1}, []string{"burst"}, "must be 0.."},
		{ratelimit.Limit{Rate: -2, Burst: -3}, []string{"rate", "burst"}, ""},
	} {
		err := tc.lim.Validate()
		if tc.fields == nil {
			require.NoError(t, err, "%+v", tc.lim)
			continue
		}
		require.Error(t, err, "%+v", tc.lim)
		require.Contains(t, err.Error(), tc.says)
		var got []string
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			var fe *ratelimit.FieldError
			require.True(t, errors.As(e, &fe))
			got = append(got, fe.Field)
		}
		require.Equal(t, tc.fields, got, "every problem is reported, each naming its field")
	}
	_, err := ratelimit.New(ratelimit.Config{Default: ratelimit.Limit{Rate: 3}})
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "rate limit default: burst"), err.Error())
}
