package probe_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/probe"
)

// mapResolver answers from a fixed table; it never touches real DNS.
type mapResolver map[string][]netip.Addr

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a, ok := m[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return a, nil
}

// seen records what reached a test server.
type seen struct {
	mu      sync.Mutex
	n       atomic.Int64
	headers http.Header
	host    string
}

func (s *seen) record(r *http.Request) {
	s.n.Add(1)
	s.mu.Lock()
	s.headers, s.host = r.Header.Clone(), r.Host
	s.mu.Unlock()
}

func portOf(t *testing.T, rawURL string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(rawURL, "http://"), "https://"))
	require.NoError(t, err)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

func loopback() []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")} }

func newProber(t *testing.T, cfg probe.Config) *probe.Prober {
	t.Helper()
	p, err := probe.New(cfg)
	require.NoError(t, err)
	return p
}

func TestProbeHealthyNodeSendsNoSecret(t *testing.T) {
	t.Parallel()
	var s seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.record(r)
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"nodeId":"7","pool":"cpp","runtime":"g++ 12"}`))
	}))
	t.Cleanup(srv.Close)
	p := newProber(t, probe.Config{AllowedCIDRs: loopback(), AllowedPorts: []int{portOf(t, srv.URL)}, AllowHTTP: true})
	res, err := p.Probe(context.Background(), srv.URL)
	require.NoError(t, err)
	require.Nil(t, res.Failure)
	require.True(t, res.Reachable)
	require.Equal(t, "127.0.0.1", res.DialedIP)
	require.Equal(t, "cpp", res.Health["pool"])
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Empty(t, s.headers.Get("Authorization"))
	require.Empty(t, s.headers.Get("Cookie"))
}

func TestProbeRefusesRedirect(t *testing.T) {
	t.Parallel()
	var target seen
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target.record(r)
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/healthz", http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	p := newProber(t, probe.Config{AllowedCIDRs: loopback(), AllowedPorts: []int{portOf(t, srv.URL), portOf(t, other.URL)}, AllowHTTP: true})
	res, err := p.Probe(context.Background(), srv.URL)
	require.NoError(t, err)
	require.NotNil(t, res.Failure)
	require.Equal(t, probe.CodeRedirectRefused, res.Failure.Code)
	require.Equal(t, http.StatusFound, res.StatusCode)
	require.Nil(t, res.Health)
	require.Zero(t, target.n.Load(), "the redirect target must never be contacted")
}

func TestProbeBoundsBodySize(t *testing.T) {
	t.Parallel()
	chunk := []byte(strings.Repeat("x", 32<<10))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// No Content-Length: the limit must hold while reading.
		_, _ = w.Write([]byte(`{"pad":"`))
		for i := 0; i < 1024; i++ { // 32 MiB if nobody stops reading
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		_, _ = w.Write([]byte(`"}`))
	}))
	t.Cleanup(srv.Close)
	p := newProber(t, probe.Config{AllowedCIDRs: loopback(), AllowedPorts: []int{portOf(t, srv.URL)}, AllowHTTP: true,
		MaxBodyBytes: 64 << 10})
	res, err := p.Probe(context.Background(), srv.URL)
	require.NoError(t, err)
	require.NotNil(t, res.Failure)
	require.Equal(t, probe.CodeTooLarge, res.Failure.Code)

	// A declared Content-Length above the bound is refused before reading.
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(1<<20))
		_, _ = w.Write(make([]byte, 1<<20))
	}))
	t.Cleanup(big.Close)
	p = newProber(t, probe.Config{AllowedCIDRs: loopback(), AllowedPorts: []int{portOf(t, big.URL)}, AllowHTTP: true,
		MaxBodyBytes: 64 << 10})
	res, err = p.Probe(context.Background(), big.URL)
	require.NoError(t, err)
	require.Equal(t, probe.CodeTooLarge, res.Failure.Code)
}

func TestProbeBoundsTime(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	p := newProber(t, probe.Config{AllowedCIDRs: loopback(), AllowedPorts: []int{portOf(t, srv.URL)}, AllowHTTP: true,
		Timeout: 200 * time.Millisecond})
	res, err := p.Probe(context.Background(), srv.URL)
	require.NoError(t, err)
	require.NotNil(t, res.Failure)
	require.Equal(t, probe.CodeTimeout, res.Failure.Code)
	require.False(t, res.Reachable)
}

func TestProbeChecksEveryDNSAnswerAndPinsTheDial(t *testing.T) {
	t.Parallel()
	var s seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.record(r)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	port := portOf(t, srv.URL)
	res := mapResolver{
		"node.lab.test":   {netip.MustParseAddr("127.0.0.1")},
		"evil.lab.test":   {netip.MustParseAddr("10.20.30.40")},
		"mixed.lab.test":  {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("169.254.169.254")},
		"mapped.lab.test": {netip.MustParseAddr("::ffff:10.0.0.1")},
	}
	p := newProber(t, probe.Config{AllowedHosts: []string{"*.lab.test"}, AllowedCIDRs: loopback(), AllowedPorts: []int{port},
		AllowHTTP: true, Resolver: res})

	for _, name := range []string{"evil.lab.test", "mixed.lab.test", "mapped.lab.test"} {
		_, err := p.Probe(context.Background(), fmt.Sprintf("http://%s:%d", name, port))
		require.ErrorIs(t, err, probe.ErrNotAllowed, name)
	}
	require.Zero(t, s.n.Load(), "no request for a name with a non-approved answer")

	// An approved name: the dial goes to the checked IP; Host stays the name.
	r, err := p.Probe(context.Background(), fmt.Sprintf("http://node.lab.test:%d/", port))
	require.NoError(t, err)
	require.Nil(t, r.Failure)
	require.Equal(t, "127.0.0.1", r.DialedIP)
	s.mu.Lock()
	require.Equal(t, fmt.Sprintf("node.lab.test:%d", port), s.host)
	s.mu.Unlock()

	// Unknown names fail as DNS, not as a dial anywhere.
	r, err = p.Probe(context.Background(), fmt.Sprintf("http://gone.lab.test:%d", port))
	require.NoError(t, err)
	require.Equal(t, probe.CodeDNSFailed, r.Failure.Code)
}

func TestProbeStaticRules(t *testing.T) {
	t.Parallel()
	p := newProber(t, probe.Config{AllowedHosts: []string{"node.lab.test"}, AllowedCIDRs: loopback(), AllowedPorts: []int{8443}})
	for _, addr := range []string{
		"http://127.0.0.1:8443",          // plain http not allowed here
		"https://127.0.0.1:9999",         // port not approved
		"https://127.0.0.2:8443",         // outside the CIDR
		"https://10.0.0.1:8443",          // outside the CIDR
		"https://[::1]:8443",             // outside the CIDR
		"https://0.0.0.0:8443",           // unspecified
		"https://other.lab.test:8443",    // host not approved
		"https://user:pw@127.0.0.1:8443", // credentials
		"ftp://127.0.0.1:8443",
		"127.0.0.1:8443",
		"https://127.0.0.1:8443/?x=1",
	} {
		_, err := p.Check(addr)
		require.ErrorIs(t, err, probe.ErrNotAllowed, addr)
	}
	tg, err := p.Check("https://node.lab.test:8443/base/")
	require.NoError(t, err)
	require.Equal(t, "https://node.lab.test:8443/base/healthz", tg.URL.String())

	// The zero config allows nothing.
	zero := newProber(t, probe.Config{})
	_, err = zero.Check("https://127.0.0.1")
	require.ErrorIs(t, err, probe.ErrNotAllowed)

	_, err = probe.New(probe.Config{AllowedPorts: []int{0}})
	require.Error(t, err)
	_, err = probe.New(probe.Config{AllowedHosts: []string{"Bad.Host"}})
	require.Error(t, err)
}

func TestProbeVerifiesTLS(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"tls":true}`))
	}))
	t.Cleanup(srv.Close)
	port := portOf(t, srv.URL)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	// httptest's certificate names example.com and 127.0.0.1.
	res := mapResolver{"example.com": {netip.MustParseAddr("127.0.0.1")}, "wrong.example": {netip.MustParseAddr("127.0.0.1")}}
	cfg := probe.Config{AllowedHosts: []string{"example.com", "wrong.example"}, AllowedCIDRs: loopback(), AllowedPorts: []int{port},
		RootCAs: pool, Resolver: res}
	p := newProber(t, cfg)
	for _, addr := range []string{srv.URL, fmt.Sprintf("https://example.com:%d", port)} {
		r, err := p.Probe(context.Background(), addr)
		require.NoError(t, err)
		require.Nil(t, r.Failure, addr)
		require.Equal(t, true, r.Health["tls"])
	}
	// The certificate does not name this host: refused even though the IP is right.
	r, err := p.Probe(context.Background(), fmt.Sprintf("https://wrong.example:%d", port))
	require.NoError(t, err)
	require.Equal(t, probe.CodeTLSFailed, r.Failure.Code)
	// Without the CA the certificate is not trusted.
	cfg.RootCAs = x509.NewCertPool()
	r, err = newProber(t, cfg).Probe(context.Background(), srv.URL)
	require.NoError(t, err)
	require.Equal(t, probe.CodeTLSFailed, r.Failure.Code)
}

func TestParseLists(t *testing.T) {
	t.Parallel()
	cidrs, err := probe.ParseCIDRs(" 10.1.0.0/16, 192.168.1.7 ,fd00::/8,")
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("192.168.1.7/32"),
		netip.MustParsePrefix("fd00::/8")}, cidrs)
	_, err = probe.ParseCIDRs("10.0.0.0/33")
	require.Error(t, err)
	_, err = probe.ParseCIDRs("judge.example")
	require.Error(t, err)
	ports, err := probe.ParsePorts("443, 9443")
	require.NoError(t, err)
	require.Equal(t, []int{443, 9443}, ports)
	_, err = probe.ParsePorts("0")
	require.Error(t, err)
}

// rebinder answers an approved address first and another one afterwards,
// the way a DNS-rebinding attacker's server would.
type rebinder struct{ calls atomic.Int64 }

func (r *rebinder) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	if r.calls.Add(1) == 1 {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	// Loopback but outside the allowlist, and nothing listens there.
	return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
}

func TestProbeDialsTheCheckedAnswerDespiteRebinding(t *testing.T) {
	t.Parallel()
	var s seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.record(r)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	port := portOf(t, srv.URL)
	p := newProber(t, probe.Config{AllowedHosts: []string{"rebind.lab.test"}, AllowedCIDRs: loopback(), AllowedPorts: []int{port},
		AllowHTTP: true, Resolver: &rebinder{}})
	r, err := p.Probe(context.Background(), fmt.Sprintf("http://rebind.lab.test:%d", port))
	require.NoError(t, err)
	require.Nil(t, r.Failure, "the connection went to the checked address, not a second lookup's")
	require.Equal(t, "127.0.0.1", r.DialedIP)
	require.EqualValues(t, 1, s.n.Load())
}

// A bad setting is refused, and every bad setting is named at once.
func TestConfigValidateNamesEveryProblem(t *testing.T) {
	t.Parallel()
	require.NoError(t, probe.Config{AllowedHosts: []string{"*.judge.example"}, AllowedPorts: []int{443}}.Validate())
	err := probe.Config{AllowedHosts: []string{"Judge.Example"}, AllowedCIDRs: []netip.Prefix{{}}, AllowedPorts: []int{0, 70000},
		Timeout: 2 * time.Minute, MaxBodyBytes: -1}.Validate()
	for _, want := range []string{`allowed host "Judge.Example"`, "invalid CIDR", "port 0", "port 70000", "timeout 2m0s", "max body -1"} {
		require.ErrorContains(t, err, want)
	}
}
