package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

// Validate names every bad field in one error, and a zero Config takes
// the defaults, which are valid.
func TestConfigValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	require.NoError(t, store.Config{}.WithDefaults().Validate())
	err := store.Config{LeaseTTL: time.Millisecond, MaxAttempts: 101, HeartbeatTTL: time.Millisecond, BatchLinger: time.Second}.WithDefaults().Validate()
	for _, want := range []string{"lease TTL 1ms is below", "max attempts 101 must be 1..100", "heartbeat TTL 1ms is below 1s", "batch linger 1s is above 50ms"} {
		require.ErrorContains(t, err, want)
	}
}
