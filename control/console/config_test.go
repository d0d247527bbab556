package console

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, Config{}.Validate())
	require.Error(t, Config{SessionIdle: 10e9}.Validate())
	require.Error(t, Config{SessionIdle: 3600e9, SessionMax: 60e9}.Validate())
	require.Error(t, Config{LiveInterval: 1e6}.Validate())
}
