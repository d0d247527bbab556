// Package faultproxy is a small loopback reverse proxy for fault-injection
// tests: it sits between a judge node and the control plane and, per rule
// (method and path, a number of times, every n-th request), forwards a
// request and then drops its answer (the server handled it, the client sees
// a cut connection), delays the answer, holds the request back and forwards
// it late (after its client gave up), refuses to forward at all (a blocked
// path), rewrites the answer's body (a corrupt artifact), or answers by
// itself (429, 503). Like a load balancer, it can also keep a forwarded
// request open after its client left (KeepAbandoned). It is for tests only
// and binds 127.0.0.1.
package faultproxy

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Action is what a rule does to a matching request.
type Action int

// Actions.
const (
	// Pass forwards untouched (useful to let the first N through).
	Pass Action = iota
	// DropResponse forwards, lets the server handle it, then cuts the client
	// connection without an answer.
	DropResponse
	// DelayResponse forwards, then waits Delay before answering.
	DelayResponse
	// Block never forwards: the client's connection is cut.
	Block
	// Rewrite forwards and replaces the answer's body with Body(old body),
	// keeping status and headers (Content-Length follows the new body).
	Rewrite
	// Respond never forwards: the proxy answers Status with Header and
	// Body(nil) itself (a 429 or a 503 the server did not send).
	Respond
	// HoldRequest keeps the request Delay before forwarding it, and
	// forwards it even when its client has left meanwhile (a load balancer
	// whose queue delivers a request late): the server handles a copy no
	// one waits for.
	HoldRequest
)

// abandonedMax bounds how long a request whose client left is kept open.
const abandonedMax = 2 * time.Minute

// Rule matches requests whose method equals Method (empty: any) and whose
// path contains PathContains. Times is how many requests it applies to
// (0: all). With Every > 1 it applies to every Every-th matching request
// only, and the others go on to the next rules. Rules are tried in the
// order added; the first with uses left wins.
type Rule struct {
	Method       string
	PathContains string
	Action       Action
	Times        int
	Every        int
	Delay        time.Duration
	Body         func([]byte) []byte
	Status       int         // Respond
	Header       http.Header // Respond
}

// Handle observes one rule.
type Handle struct {
	fired   chan struct{}
	once    sync.Once
	mu      sync.Mutex
	hits    int
	matched int // requests that matched (Every counts them)
}

// Fired is closed the first time the rule applies.
func (h *Handle) Fired() <-chan struct{} { return h.fired }

// Hits is how many requests the rule applied to.
func (h *Handle) Hits() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits
}

type rule struct {
	Rule
	h *Handle
}

// Proxy is a running fault proxy.
type Proxy struct {
	srv      *httptest.Server
	upstream string
	client   *http.Client

	mu    sync.Mutex
	rules []*rule
	seen  map[string]int // requests per "METHOD path-key"
	// keep: forwarded requests outlive their client (KeepAbandoned);
	// late counts answers that came back after their client had left.
	keep bool
	late int
	// life ends at Close: it ends kept and held requests.
	life    context.Context
	endLife context.CancelFunc
}

// New starts a proxy on 127.0.0.1 in front of upstream (a base URL).
func New(upstream string) *Proxy {
	p := &Proxy{upstream: strings.TrimRight(upstream, "/"), seen: map[string]int{},
		client: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}}}
	p.life, p.endLife = context.WithCancel(context.Background())
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// URL is the proxy's base URL, to give to the node.
func (p *Proxy) URL() string { return p.srv.URL }

// Close stops the proxy, ending the requests it keeps or holds.
func (p *Proxy) Close() {
	p.endLife()
	p.srv.CloseClientConnections()
	p.srv.Close()
}

// Add installs a rule and returns its handle.
func (p *Proxy) Add(r Rule) *Handle {
	h := &Handle{fired: make(chan struct{})}
	p.mu.Lock()
	p.rules = append(p.rules, &rule{Rule: r, h: h})
	p.mu.Unlock()
	return h
}

// Remove uninstalls the rule of h: later requests no longer meet it.
func (p *Proxy) Remove(h *Handle) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = slices.DeleteFunc(p.rules, func(r *rule) bool { return r.h == h })
}

// KeepAbandoned makes forwarded requests outlive their client, as a load
// balancer's do: a client that gives up (its deadline, a move to another
// server) no longer cancels the request upstream, which runs to its end
// (at most abandonedMax) and whose answer is thrown away.
func (p *Proxy) KeepAbandoned(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keep = on
}

// Late is how many upstream answers came back after their client had left
// (a kept or held request handled for no one).
func (p *Proxy) Late() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.late
}

// Count is how many requests with this method and a path containing
// pathContains reached the proxy (whatever happened to them).
func (p *Proxy) Count(method, pathContains string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for k, v := range p.seen {
		m, path, _ := strings.Cut(k, " ")
		if (method == "" || m == method) && strings.Contains(path, pathContains) {
			n += v
		}
	}
	return n
}

func (p *Proxy) match(r *http.Request) *rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[r.Method+" "+r.URL.Path]++
	for _, ru := range p.rules {
		if ru.Method != "" && ru.Method != r.Method || !strings.Contains(r.URL.Path, ru.PathContains) {
			continue
		}
		ru.h.mu.Lock()
		left := ru.Times == 0 || ru.h.hits < ru.Times
		if left && ru.Every > 1 {
			ru.h.matched++
			left = ru.h.matched%ru.Every == 0
		}
		if left {
			ru.h.hits++
		}
		ru.h.mu.Unlock()
		if left {
			ru.h.once.Do(func() { close(ru.h.fired) })
			return ru
		}
	}
	return nil
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	ru := p.match(r)
	action := Pass
	if ru != nil {
		action = ru.Action
	}
	switch action {
	case Block:
		cut(w)
		return
	case Respond:
		var body []byte
		if ru.Body != nil {
			body = ru.Body(nil)
		}
		for k, vs := range ru.Header {
			w.Header()[k] = vs
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(ru.Status)
		_, _ = w.Write(body)
		return
	}
	ctx, cancel, body, ok := p.upstreamContext(w, r, ru, action)
	if !ok {
		return
	}
	defer cancel()
	out, err := http.NewRequestWithContext(ctx, r.Method, p.upstream+r.URL.RequestURI(), body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.ContentLength = r.ContentLength
	resp, err := p.client.Do(out)
	if err != nil {
		cut(w)
		return
	}
	defer resp.Body.Close()
	// The whole answer is read first: the server has handled the request
	// before anything is dropped, delayed or rewritten.
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		cut(w)
		return
	}
	if r.Context().Err() != nil {
		p.mu.Lock()
		p.late++
		p.mu.Unlock()
		return
	}
	p.answer(w, r, ru, action, resp, answer)
}

// upstreamContext is what a forwarded request runs under: the client's
// request, or — when the proxy keeps abandoned requests or the rule holds
// the request — one that outlives the client (bounded by abandonedMax and
// the proxy's life), with the body read first so that it can still be
// sent. A held request waits out its delay here. ok is false when the
// request cannot be sent.
func (p *Proxy) upstreamContext(w http.ResponseWriter, r *http.Request, ru *rule, action Action) (context.Context, context.CancelFunc, io.Reader, bool) {
	p.mu.Lock()
	keep := p.keep
	p.mu.Unlock()
	if !keep && action != HoldRequest {
		ctx, cancel := context.WithCancel(r.Context())
		return ctx, cancel, r.Body, true
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		cut(w)
		return nil, nil, nil, false
	}
	ctx, cancel := context.WithTimeout(p.life, abandonedMax)
	if action == HoldRequest {
		t := time.NewTimer(ru.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			cancel()
			return nil, nil, nil, false
		}
	}
	return ctx, cancel, bytes.NewReader(body), true
}

// answer sends the upstream answer to the client, spoiled as action says.
func (p *Proxy) answer(w http.ResponseWriter, r *http.Request, ru *rule, action Action, resp *http.Response, body []byte) {
	switch action {
	case DropResponse:
		cut(w)
		return
	case DelayResponse:
		t := time.NewTimer(ru.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	case Rewrite:
		if ru.Body != nil {
			body = ru.Body(bytes.Clone(body))
		}
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// cut closes the client connection without writing an answer.
func cut(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("faultproxy: response writer cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // reset, not a clean close
	}
	_ = conn.Close()
}
