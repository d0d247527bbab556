package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLoggerNormalizesAttributes(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log, err := NewLogger(&buf, LogConfig{})
	require.NoError(t, err)
	ctx := WithRequestID(context.Background(), "req-1")
	log.InfoContext(ctx, "job leased", "node_id", int64(12), "job_id", "34", "lease_epoch", int64(2),
		"lease_ttl", 1500*time.Microsecond, "wait_ms", 3*time.Second)
	log.With("host_group_id", 7).Info("no context")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	var a, b map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &a), "JSON by default")
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &b))
	require.Equal(t, "12", a["node_id"], "ids are strings whatever the caller passed")
	require.Equal(t, "34", a["job_id"])
	require.Equal(t, float64(2), a["lease_epoch"], "epochs stay numbers")
	require.Equal(t, 1.5, a["lease_ttl_ms"], "durations in milliseconds")
	require.Equal(t, float64(3000), a["wait_ms"], "no double suffix")
	require.Equal(t, "req-1", a["request_id"])
	require.Equal(t, "7", b["host_group_id"])
	require.NotContains(t, b, "request_id")
}

func TestLogConfigRefusesUnknownValues(t *testing.T) {
	t.Parallel()
	require.ErrorContains(t, LogConfig{Format: "xml"}.Validate(), `log format "xml"`)
	require.ErrorContains(t, LogConfig{Level: "chatty"}.Validate(), `log level "chatty"`)
	both := LogConfig{Format: "xml", Level: "chatty"}.Validate()
	require.ErrorContains(t, both, `log format "xml"`)
	require.ErrorContains(t, both, `log level "chatty"`, "both problems at once")
	var buf bytes.Buffer
	log, err := NewLogger(&buf, LogConfig{Format: "text", Level: "warn"})
	require.NoError(t, err)
	log.Info("hidden")
	log.Warn("shown", slog.Duration("took", time.Second))
	require.Equal(t, 1, strings.Count(buf.String(), "\n"))
	require.Contains(t, buf.String(), "took_ms=1000")
}

func TestRequestIDs(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"abc", "7f3a9c0e2b1d4a5f", "nginx-1.2:3_x"} {
		require.True(t, ValidRequestID(ok), ok)
	}
	for _, bad := range []string{"", "a b", "a\nb", `a"b`, strings.Repeat("x", 129)} {
		require.False(t, ValidRequestID(bad), bad)
	}
	a, b := NewRequestID(), NewRequestID()
	require.NotEqual(t, a, b)
	require.True(t, ValidRequestID(a))
}
