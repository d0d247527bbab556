package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// Slow-client bounds. A server-wide ReadTimeout/WriteTimeout would also cut
// 256 MiB uploads, streamed artifact downloads and 15 s long-polls, so each
// request gets deadlines of its own through http.ResponseController, paced
// by what it moves: a body must arrive within BodyReadTimeout plus one
// second per BodyMinRate bytes received so far, and a response within
// WriteTimeout plus one second per BodyMinRate bytes written so far. Time a
// handler spends waiting (a claim long-poll, a waiting status read) is not
// bounded here: the read deadline is lifted once the body is in, and the
// write clock starts at the first byte written.
const (
	// BodyReadTimeoutDefault is the time any body gets before its size
	// counts: a small body (join, claim, enqueue) must be in by then.
	BodyReadTimeoutDefault = 10 * time.Second
	// WriteTimeoutDefault is the same for writing a response.
	WriteTimeoutDefault = 30 * time.Second
	// BodyMinRateDefault is the slowest sustained transfer (bytes/s) a large
	// upload or download may run at once its base time is spent.
	BodyMinRateDefault = 64 << 10
	// ReadHeaderTimeoutDefault, IdleTimeoutDefault and MaxHeaderBytesDefault
	// are the listener's own bounds (NewHTTPServer).
	ReadHeaderTimeoutDefault = 10 * time.Second
	IdleTimeoutDefault       = 2 * time.Minute
	MaxHeaderBytesDefault    = 64 << 10
)

// NewHTTPServer is the http.Server every control listener uses: headers are
// bounded in time and size and idle connections are closed; bodies and
// responses are bounded per request by the handler (Server.Handler).
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeoutDefault,
		IdleTimeout: IdleTimeoutDefault, MaxHeaderBytes: MaxHeaderBytesDefault}
}

// pace turns bytes moved into a deadline.
type pace struct {
	base time.Duration
	rate int64 // bytes per second
}

func (p pace) deadline(start time.Time, moved int64) time.Time {
	return start.Add(p.base + time.Duration(moved)*time.Second/time.Duration(p.rate))
}

// bodyStateKey finds the request's pacedBody from its context, so that
// writeError can answer 408 whichever layer saw the read fail.
type bodyStateKey struct{}

// bodyTimedOut reports whether the request's body missed its deadline.
func bodyTimedOut(ctx context.Context) bool {
	b, _ := ctx.Value(bodyStateKey{}).(*pacedBody)
	return b != nil && b.timedOut.Load()
}

// paced sets the per-request deadlines (see the constants above).
func (s *Server) paced(next http.Handler) http.Handler {
	read := pace{base: s.cfg.BodyReadTimeout, rate: s.cfg.BodyMinRate}
	write := pace{base: s.cfg.WriteTimeout, rate: s.cfg.BodyMinRate}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		// Only with a body: for a request without one the server is already
		// reading the connection in the background (to notice a client that
		// goes away), and a read deadline there would cancel the request.
		if r.Body != nil && r.Body != http.NoBody {
			b := &pacedBody{ReadCloser: r.Body, rc: rc, pace: read, start: time.Now()}
			if rc.SetReadDeadline(b.pace.deadline(b.start, 0)) == nil {
				r.Body = b
				r = r.WithContext(context.WithValue(r.Context(), bodyStateKey{}, b))
			}
		}
		next.ServeHTTP(&pacedWriter{ResponseWriter: w, rc: rc, pace: write}, r)
	})
}

// pacedBody moves the read deadline as bytes arrive and lifts it at the end
// of the body: the server's background read that follows must not hit it
// while the handler still works (a long-poll), or the request is cancelled.
type pacedBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	pace     pace
	start    time.Time
	got      int64
	done     bool
	timedOut atomic.Bool
}

func (b *pacedBody) Read(p []byte) (int, error) {
	if !b.done && b.got > 0 {
		_ = b.rc.SetReadDeadline(b.pace.deadline(b.start, b.got))
	}
	n, err := b.ReadCloser.Read(p)
	b.got += int64(n)
	switch {
	case errors.Is(err, io.EOF) && !b.done:
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.timedOut.Store(true)
	}
	return n, err
}

// pacedWriter sets the write deadline from the first byte written on.
type pacedWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	pace    pace
	start   time.Time
	written int64
}

func (w *pacedWriter) arm() {
	if w.start.IsZero() {
		w.start = time.Now()
	}
	_ = w.rc.SetWriteDeadline(w.pace.deadline(w.start, w.written))
}

func (w *pacedWriter) WriteHeader(code int) {
	w.arm()
	w.ResponseWriter.WriteHeader(code)
}

func (w *pacedWriter) Write(p []byte) (int, error) {
	w.arm()
	n, err := w.ResponseWriter.Write(p)
	w.written += int64(n)
	return n, err
}

// Flush passes through (artifact downloads stream).
func (w *pacedWriter) Flush() {
	w.arm()
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *pacedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
