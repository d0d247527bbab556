package httpapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"

	"github.com/kece-oj/kece/control/store"
)

// The admin console (control/console) acts through the admin API itself, so
// every rule, error code and audit record is the API's own. Its requests
// never leave the process: InProcessTransport hands them to this replica's
// Handler, and AsAdmin marks them as coming from the admin token that
// opened the console session. The mark is a context value of an unexported
// type, so no request from the network can carry it; tokenAuth accepts it
// for the admin surface only.

type inProcessKey struct{}

type inProcessCaller struct {
	admin  store.TokenIdentity
	remote string
}

// AsAdmin returns a context whose in-process API requests (see
// InProcessTransport) are authenticated as the admin token admin, already
// resolved by the caller from a live console session, and come from remote
// (the browser's address, host:port), which is what the API logs and
// audits as the caller's address.
func AsAdmin(ctx context.Context, admin store.TokenIdentity, remote string) context.Context {
	return context.WithValue(ctx, inProcessKey{}, inProcessCaller{admin: admin, remote: remote})
}

// inProcessAdmin is the admin identity AsAdmin put on ctx, if any.
func inProcessAdmin(ctx context.Context) (store.TokenIdentity, bool) {
	c, ok := ctx.Value(inProcessKey{}).(inProcessCaller)
	return c.admin, ok && c.admin.Kind == store.TokenAdmin && c.admin.ID > 0
}

// InProcessTransport serves requests with h (a replica's Handler) without a
// network hop. A request whose context came from AsAdmin carries that
// caller's address; any other request is anonymous, as from loopback.
func InProcessTransport(h http.Handler) http.RoundTripper { return inProcess{h} }

type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.RequestURI = r.URL.RequestURI()
	r.RemoteAddr = "127.0.0.1:0"
	if c, ok := req.Context().Value(inProcessKey{}).(inProcessCaller); ok && c.remote != "" {
		r.RemoteAddr = c.remote
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	rec := &recorder{header: http.Header{}}
	t.h.ServeHTTP(rec, r)
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	return &http.Response{
		Status:     strconv.Itoa(rec.code) + " " + http.StatusText(rec.code),
		StatusCode: rec.code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.header, Body: io.NopCloser(&rec.body), ContentLength: int64(rec.body.Len()), Request: req,
	}, nil
}

// recorder buffers one in-process response.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *recorder) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}
