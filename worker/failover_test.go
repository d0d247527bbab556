package worker

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A replica that is only slow right after the client left the other one
// because it hung (its database waiting out the hung replica's locks) is
// not left for the hung one; a replica that refuses connections is.
func TestNoMoveBackToAReplicaThatJustHung(t *testing.T) {
	t.Parallel()
	cl, err := newClient([]string{"http://a.invalid", "http://b.invalid"}, time.Second)
	require.NoError(t, err)
	cl.moveOff(0, errAttemptTimeout)
	require.Equal(t, int32(1), cl.cur.Load(), "moved off the hung replica")
	cl.moveOff(1, errAttemptTimeout)
	require.Equal(t, int32(1), cl.cur.Load(), "stayed: the other one hung moments ago")
	cl.moveOff(1, &net.OpError{Op: "dial", Err: net.UnknownNetworkError("refused")})
	require.Equal(t, int32(0), cl.cur.Load(), "moved: this one is gone")
	require.Equal(t, int64(2), cl.moves.Load())
}
