package clikit

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLongFlagsKeepTheOneDashForm(t *testing.T) {
	t.Parallel()
	got := longFlags([]string{"-heartbeat", "1s", "-drain-grace=20m", "-o", "json", "--pool", "cpp", "--lease-ttl", "-1s", "-v", "--", "-keep"})
	require.Equal(t, []string{"--heartbeat", "1s", "--drain-grace=20m", "-o", "json", "--pool", "cpp", "--lease-ttl", "-1s", "-v", "--", "-keep"}, got)
}
