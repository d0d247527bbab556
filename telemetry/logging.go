package telemetry

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"
)

// Log formats.
const (
	FormatJSON = "json"
	FormatText = "text"
	// FormatDefault is what server processes log unless told otherwise.
	FormatDefault = FormatJSON
)

// LogConfig configures a server process's logger.
type LogConfig struct {
	// Format is "json" (default) or "text".
	Format string
	// Level is a slog level name (debug, info, warn, error); empty is info.
	Level string
	// Leveler, when set, is used instead of Level (a slog.LevelVar lets a
	// process change the level after its flags are parsed).
	Leveler slog.Leveler
}

func (c *LogConfig) withDefaults() {
	c.Format = cmp.Or(c.Format, FormatDefault)
	c.Level = cmp.Or(c.Level, "info")
}

// Validate refuses unknown formats and levels, naming both when both are wrong.
func (c LogConfig) Validate() error {
	c.withDefaults()
	var errs []error
	if c.Format != FormatJSON && c.Format != FormatText {
		errs = append(errs, fmt.Errorf("log format %q: want json or text", c.Format))
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.Level)); err != nil {
		errs = append(errs, fmt.Errorf("log level %q: want debug, info, warn or error", c.Level))
	}
	return errors.Join(errs...)
}

// NewLogger returns the logger of a server process writing to w. Every
// record passes through the same attribute rules (see NormalizeAttr) and
// carries the request id of its context, when there is one.
func NewLogger(w io.Writer, cfg LogConfig) (*slog.Logger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.withDefaults()
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Level))
	var leveler slog.Leveler = level
	if cfg.Leveler != nil {
		leveler = cfg.Leveler
	}
	opts := &slog.HandlerOptions{Level: leveler, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return NormalizeAttr(a) }}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if cfg.Format == FormatText {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(ContextHandler{Handler: h}), nil
}

// idKeys are attributes that hold database ids. BIGINT ids travel as strings
// in JSON (DESIGN §3), so logs carry them as strings too, whichever Go type
// the caller had at hand: a query for node_id="12" finds every line.
var idKeys = map[string]bool{
	"node_id": true, "job_id": true, "host_group_id": true, "event_id": true, "manifest_id": true,
	"new_job_id": true, "check_job_id": true, "attempt_id": true,
}

// NormalizeAttr applies the house rules to one attribute: ids are strings,
// durations are milliseconds (a float, key suffixed _ms unless it already
// is). It is exported so tests and other handlers can apply the same rules.
func NormalizeAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch {
	case v.Kind() == slog.KindDuration:
		key := a.Key
		if !strings.HasSuffix(key, "_ms") {
			key += "_ms"
		}
		return slog.Float64(key, Millis(v.Duration()))
	case idKeys[a.Key] && v.Kind() == slog.KindInt64:
		return slog.String(a.Key, strconv.FormatInt(v.Int64(), 10))
	case idKeys[a.Key] && v.Kind() == slog.KindUint64:
		return slog.String(a.Key, strconv.FormatUint(v.Uint64(), 10))
	}
	return a
}

// Millis renders d as milliseconds with microsecond precision.
func Millis(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}

type ctxKey struct{}

// WithRequestID returns ctx carrying the request id id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// RequestID returns the request id ctx carries ("" when none).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// NewRequestID returns a fresh random request id (32 hex digits).
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ValidRequestID says whether an id received from a proxy may be used as is:
// 1..128 characters of letters, digits and -_.:; anything else is replaced by
// a generated id so a client cannot forge log structure.
func ValidRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

// ContextHandler adds request_id from the record's context to every record
// logged with a context (InfoContext and friends), so every line of one HTTP
// request can be found by the id nginx put in X-Request-Id.
type ContextHandler struct{ slog.Handler }

// Handle implements slog.Handler.
func (h ContextHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h ContextHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return ContextHandler{h.Handler.WithAttrs(as)}
}

// WithGroup implements slog.Handler.
func (h ContextHandler) WithGroup(name string) slog.Handler {
	return ContextHandler{h.Handler.WithGroup(name)}
}
