package worker

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stoppable is a replica stand-in that, while stopped, takes requests and
// never answers them (SIGSTOP), and otherwise answers 200.
func stoppable(t *testing.T) (*httptest.Server, *atomic.Bool) {
	t.Helper()
	var stopped atomic.Bool
	end := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stopped.Load() {
			select {
			case <-r.Context().Done():
			case <-end:
			}
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(func() { close(end); srv.Close() })
	return srv, &stopped
}

// A replica left because it hung stays left until it answers a liveness
// check: neither a slow answer of the other replica (its database may be
// waiting out the hung one's locks) nor the other refusing connections
// sends the client back while it does not answer; once it answers one of
// the background checks, the next failure of the other moves the client
// back to it.
func TestNoMoveBackToAHungReplicaUntilItAnswers(t *testing.T) {
	t.Parallel()
	a, aStopped := stoppable(t)
	b, _ := stoppable(t)
	aStopped.Store(true)
	cl, err := newClient([]string{a.URL, b.URL}, time.Second)
	require.NoError(t, err)
	cl.liveEvery = 50 * time.Millisecond
	t.Cleanup(cl.close)
	refused := &net.OpError{Op: "dial", Err: net.UnknownNetworkError("refused")}

	require.True(t, cl.moveOff(0, errAttemptTimeout), "moved off the hung replica")
	require.Equal(t, int32(1), cl.cur.Load())
	require.False(t, cl.moveOff(1, errAttemptTimeout), "stayed: the other one hung and has not answered since")
	// Many liveness intervals pass without an answer from a: b refusing
	// connections does not send the client back to it.
	require.Never(t, func() bool { return cl.moveOff(1, refused) }, 500*time.Millisecond, 20*time.Millisecond,
		"went back to a replica that never answered a liveness check")
	require.Equal(t, int32(1), cl.cur.Load())

	aStopped.Store(false)
	require.Eventually(t, func() bool { return cl.hungSince[0].Load() == 0 }, 5*time.Second, 10*time.Millisecond,
		"a background liveness check found a answering")
	require.True(t, cl.moveOff(1, refused), "moved back: a answers again and b is gone")
	require.Equal(t, int32(0), cl.cur.Load())
	require.Equal(t, int64(2), cl.moves.Load())
}

// An answer cut on the network is tried once more on the same replica
// before the client moves: a second cut moves it, a refused connection or
// a timeout moves it at once.
func TestCutAnswerIsRetriedOnTheSameReplica(t *testing.T) {
	t.Parallel()
	a, _ := stoppable(t)
	b, _ := stoppable(t)
	cl, err := newClient([]string{a.URL, b.URL}, time.Second)
	require.NoError(t, err)
	t.Cleanup(cl.close)
	reset := &net.OpError{Op: "read", Err: net.UnknownNetworkError("connection reset by peer")}
	calls := func(errs ...error) []int {
		var on []int
		a := do(cl, context.Background(), callOpts{}, func(_ context.Context, i int) (int, error) {
			on = append(on, i)
			if len(on) <= len(errs) {
				return 0, errs[len(on)-1]
			}
			return 1, nil
		})
		require.NoError(t, a.err)
		return on
	}
	require.Equal(t, []int{0, 0}, calls(reset), "one cut answer: tried again on the same replica")
	require.Equal(t, int32(0), cl.cur.Load())
	require.Equal(t, []int{0, 0, 1}, calls(reset, io.ErrUnexpectedEOF), "cut twice: moved")
	require.Equal(t, int32(1), cl.cur.Load())
	require.Equal(t, []int{1, 0}, calls(&net.OpError{Op: "dial", Err: net.UnknownNetworkError("refused")}), "refused: moved at once")
}
