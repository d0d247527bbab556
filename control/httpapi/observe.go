package httpapi

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/metrics"
	"github.com/kece-oj/kece/telemetry"
)

// RequestIDHeader carries the request id: nginx sets it ($request_id), the
// replica generates one when it is missing or malformed, and echoes it.
const RequestIDHeader = "X-Request-Id"

// routeUnmatched labels requests no route pattern matched: raw paths (with
// ids in them) never become label values.
const routeUnmatched = "unmatched"

// accessInfo is what inner layers tell the access log about one request.
type accessInfo struct {
	mu      sync.Mutex
	errCode string
	nodeID  string
	pool    string
}

type accessKey struct{}

func accessFrom(ctx context.Context) *accessInfo {
	a, _ := ctx.Value(accessKey{}).(*accessInfo)
	return a
}

// noteError records the machine code of an error answer for the access log.
func noteError(ctx context.Context, code string) {
	if a := accessFrom(ctx); a != nil {
		a.mu.Lock()
		a.errCode = code
		a.mu.Unlock()
	}
}

// noteNode records the authenticated node of a machine request.
func noteNode(ctx context.Context, nodeID, pool string) {
	metrics.SetRequestPool(ctx, pool)
	if a := accessFrom(ctx); a != nil {
		a.mu.Lock()
		a.nodeID, a.pool = nodeID, pool
		a.mu.Unlock()
	}
}

// route returns the surface and the registered route pattern (without the
// method) that r will be served by.
func (s *Server) route(r *http.Request) (string, string) {
	var mux *http.ServeMux
	surface := metrics.SurfaceOps
	switch p := r.URL.Path; {
	case p == contracts.LivenessPath:
		return metrics.SurfaceMachine, p
	case strings.HasPrefix(p, machinePrefix):
		mux, surface = s.internal, metrics.SurfaceMachine
	case strings.HasPrefix(p, adminPrefix):
		mux, surface = s.adminMux, metrics.SurfaceAdmin
	case strings.HasPrefix(p, businessPrefix):
		mux, surface = s.businessMux, metrics.SurfaceBusiness
	case p == "/healthz", p == "/metrics":
		return surface, p
	case strings.HasPrefix(p, "/openapi/"):
		return surface, "/openapi/"
	case p == "/docs" || strings.HasPrefix(p, "/docs/"):
		return surface, "/docs/"
	case strings.HasPrefix(p, "/console/"):
		// One label for the whole console: its paths carry ids.
		return surface, "/console/"
	case p == "/status":
		return surface, p
	default:
		mux = s.extra // handlers mounted by other packages (Mount)
	}
	if mux == nil {
		return surface, routeUnmatched
	}
	_, pattern := mux.Handler(r)
	if _, path, ok := strings.Cut(pattern, " "); ok {
		pattern = path
	}
	if pattern == "" || pattern == "/" {
		pattern = routeUnmatched
	}
	return surface, pattern
}

// observed is the outermost layer: it fixes the request id (from nginx, or
// generated) in the context and the response, counts the request by
// surface, route pattern and status, and writes one access log line.
func (s *Server) observed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(RequestIDHeader)
		if !telemetry.ValidRequestID(id) {
			id = telemetry.NewRequestID()
		}
		w.Header().Set(RequestIDHeader, id)
		ai := &accessInfo{}
		ctx := telemetry.WithRequestID(r.Context(), id)
		ctx = context.WithValue(ctx, accessKey{}, ai)
		ctx = metrics.WithRequestInfo(ctx)
		ctx = context.WithValue(ctx, outageKey{}, s.outage)
		r = r.WithContext(ctx)
		surface, route := s.route(r)
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		d := time.Since(start)
		s.metrics.ObserveRequest(ctx, surface, route, r.Method, rec.status, d)
		if route == "/metrics" || route == "/healthz" || route == contracts.LivenessPath {
			return // scrapes and probes every few seconds would drown the log
		}
		attrs := []slog.Attr{slog.String("surface", surface), slog.String("method", r.Method),
			slog.String("route", route), slog.String("path", r.URL.Path), slog.Int("status", rec.status),
			slog.Duration("duration", d), slog.Int64("bytes", rec.bytes), slog.String("remote", r.RemoteAddr)}
		ai.mu.Lock()
		if ai.errCode != "" {
			attrs = append(attrs, slog.String("code", ai.errCode))
		}
		if ai.nodeID != "" {
			attrs = append(attrs, slog.String("node_id", ai.nodeID), slog.String("pool", ai.pool))
		}
		ai.mu.Unlock()
		level := slog.LevelInfo
		// 503s of a database outage are summed up by the outage tracker.
		if rec.status >= 500 && !(rec.status == http.StatusServiceUnavailable && s.outage.Down()) {
			level = slog.LevelWarn
		}
		s.log.LogAttrs(ctx, level, "http request", attrs...)
	})
}

// statusRecorder remembers the status and size of a response. It passes
// Flush through (artifact downloads stream) and supports
// http.ResponseController through Unwrap.
type statusRecorder struct {
	http.ResponseWriter
	status  int
	bytes   int64
	written bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.written {
		r.status, r.written = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.written = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := r.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errors.New("hijacking not supported")
}
