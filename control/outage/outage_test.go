package outage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/outage"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) records(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(s.b.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(line, &m))
		out = append(out, m)
	}
	return out
}

// Two outages with many failures each: one WARN with the cause when each
// begins, one INFO when each ends, nothing per failure; other errors are
// left to the caller.
func TestOutageLoggedOncePerOutage(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	tr := outage.New(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	var mu sync.Mutex
	up := false
	ping := func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if up {
			return nil
		}
		return errors.New("still down")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tr.Run(ctx, ping, 5*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })

	refused := fmt.Errorf("store: claim: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	require.False(t, tr.Failed("op", errors.New("a bug, not an outage")))
	for round := 0; round < 2; round++ {
		mu.Lock()
		up = false
		mu.Unlock()
		for i := 0; i < 50; i++ {
			require.True(t, tr.Failed(fmt.Sprintf("request %d", i), refused))
		}
		require.True(t, tr.Down())
		mu.Lock()
		up = true
		mu.Unlock()
		require.Eventually(t, func() bool { return !tr.Down() }, 5*time.Second, time.Millisecond)
	}
	recs := logs.records(t)
	require.Len(t, recs, 4, "%v", recs)
	for i, r := range recs {
		if i%2 == 0 {
			require.Equal(t, "WARN", r["level"])
			require.Equal(t, "request 0", r["op"])
			require.Contains(t, r["cause"], "connection refused")
		} else {
			require.Equal(t, "INFO", r["level"])
			require.Equal(t, "control database reachable again", r["msg"])
			require.EqualValues(t, 50, r["failures"])
		}
	}
}
