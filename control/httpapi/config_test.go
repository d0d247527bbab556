package httpapi_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/httpapi"
)

// Validate names every bad field in one error, and a zero Config takes
// the defaults, which are valid.
func TestConfigValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	require.NoError(t, httpapi.Config{}.WithDefaults().Validate())
	err := httpapi.Config{HeartbeatInterval: time.Millisecond, RenewInterval: time.Millisecond,
		MaxBodyBytes: 1}.WithDefaults().Validate()
	for _, want := range []string{"heartbeat interval 1ms is below 100ms", "renew interval 1ms is below 100ms",
		"max body 1 is below 64 KiB"} {
		require.ErrorContains(t, err, want)
	}
}
