package duration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"90d": 90 * Day, "7d": 7 * Day, "1d12h": 36 * time.Hour, "24h": 24 * time.Hour, "15m": 15 * time.Minute,
		"1m30s": 90 * time.Second, "0": 0, "0d": 0, "-1d": -Day, "-2s": -2 * time.Second, " 3s ": 3 * time.Second,
	} {
		got, err := Parse(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "d", "soon", "1.5d", "1d-1h", "3", "1dd", "-d", "1w"} {
		_, err := Parse(in)
		require.EqualError(t, err, "not a duration such as 90s, 15m, 24h or 7d", in)
	}
}

func TestFormatRoundTrips(t *testing.T) {
	t.Parallel()
	for want, d := range map[string]time.Duration{
		"90d": 90 * Day, "1d12h": 36 * time.Hour, "15m": 15 * time.Minute, "1m30s": 90 * time.Second, "0s": 0,
		"1h30m": 90 * time.Minute, "2s": 2 * time.Second, "-1d": -Day, "500ms": 500 * time.Millisecond,
	} {
		require.Equal(t, want, Format(d))
		back, err := Parse(want)
		require.NoError(t, err)
		require.Equal(t, d, back)
	}
}

func TestValue(t *testing.T) {
	t.Parallel()
	var d time.Duration
	v := Value{D: &d}
	require.NoError(t, v.Set("2d"))
	require.Equal(t, 2*Day, d)
	require.Equal(t, "2d", v.String())
	require.EqualError(t, v.Set("-1s"), "must not be negative")
	require.Error(t, v.Set("often"))
	require.Equal(t, "duration", v.Type())
	var zero time.Duration
	require.Equal(t, "0", Value{D: &zero}.String(), "help prints no (default 0s)")
}
