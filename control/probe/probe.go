// Package probe fetches a judge node's /healthz from an admin-entered address
// under SSRF rules (DESIGN §7): only approved hosts, CIDRs and ports; every
// DNS answer is checked against the allowlist and the connection is pinned to
// exactly the checked IP; TLS is verified; redirects are refused; response
// size and time are bounded; no secret (Authorization, cookies) is sent.
//
// It owns only outbound probing. It knows nothing about the store or HTTP
// handlers; the admin API turns a Result into its wire form.
package probe

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defaults for Config.
const (
	TimeoutDefault      = 5 * time.Second
	MaxBodyBytesDefault = 64 << 10
	// HealthPath is appended to the node's base address.
	HealthPath = "/healthz"
)

// Resolver looks up a host's addresses. *net.Resolver implements it; tests
// pass their own to map a name to any address without real DNS.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config is the allowlist and the bounds. The zero value allows nothing:
// every probe is refused with ErrNotAllowed.
type Config struct {
	// AllowedHosts are host names a node address may use: exact names
	// ("judge-1.lab.example") or a leading wildcard ("*.lab.example", which
	// matches sub-domains only). Their DNS answers must still all fall in
	// AllowedCIDRs.
	AllowedHosts []string
	// AllowedCIDRs are the networks a probe may connect to (IP literals and
	// every DNS answer are checked against them).
	AllowedCIDRs []netip.Prefix
	// AllowedPorts are the ports a probe may connect to.
	AllowedPorts []int
	// AllowHTTP permits plain http:// addresses. Only for loopback tests and
	// lab setups; production probes use verified TLS.
	AllowHTTP bool
	// Timeout bounds a whole probe (DNS, connect, TLS, response).
	Timeout time.Duration
	// MaxBodyBytes bounds the /healthz body.
	MaxBodyBytes int64
	// RootCAs verifies node certificates; nil uses the system pool.
	RootCAs *x509.CertPool
	// Resolver resolves host names; nil uses net.DefaultResolver.
	Resolver Resolver
}

// Validate refuses nonsensical settings, naming every one.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("probe config: "+format, a...)) }
	for _, h := range c.AllowedHosts {
		name := strings.TrimPrefix(h, "*.")
		if name == "" || strings.ContainsAny(name, "*/:@ ") || name != strings.ToLower(name) {
			bad("allowed host %q must be a lower-case name or *.suffix", h)
		}
	}
	for _, p := range c.AllowedCIDRs {
		if !p.IsValid() {
			bad("invalid CIDR %v", p)
		}
	}
	for _, p := range c.AllowedPorts {
		if p < 1 || p > 65535 {
			bad("port %d must be 1..65535", p)
		}
	}
	if c.Timeout < 0 || c.Timeout > time.Minute {
		bad("timeout %s must be 0..1m", c.Timeout)
	}
	if c.MaxBodyBytes < 0 || c.MaxBodyBytes > 16<<20 {
		bad("max body %d must be 0..16 MiB", c.MaxBodyBytes)
	}
	return errors.Join(errs...)
}

// Enabled reports whether any target could be allowed at all.
func (c Config) Enabled() bool { return len(c.AllowedCIDRs) > 0 && len(c.AllowedPorts) > 0 }

// ErrNotAllowed is matched by every refusal of the allowlist rules (the
// admin API's 422 ADDRESS_NOT_ALLOWED).
var ErrNotAllowed = errors.New("address not allowed")

func notAllowed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotAllowed, fmt.Sprintf(format, args...))
}

// Code classifies why a probe of an allowed target failed.
type Code string

// Failure codes (the contract's ProbeErrorCode).
const (
	CodeDNSFailed       Code = "DNS_FAILED"
	CodeConnectFailed   Code = "CONNECT_FAILED"
	CodeTLSFailed       Code = "TLS_FAILED"
	CodeTimeout         Code = "TIMEOUT"
	CodeRedirectRefused Code = "REDIRECT_REFUSED"
	CodeBadStatus       Code = "BAD_STATUS"
	CodeTooLarge        Code = "TOO_LARGE"
	CodeBadBody         Code = "BAD_BODY"
)

// Failure is why an allowed probe did not yield a health document.
type Failure struct {
	Code    Code
	Message string
}

// Result is what one probe saw.
type Result struct {
	Address    string
	Reachable  bool
	DialedIP   string
	StatusCode int
	Latency    time.Duration
	Health     map[string]any
	Failure    *Failure
}

// Prober probes node addresses under one Config.
type Prober struct {
	cfg Config
}

// New validates cfg and fills defaults.
func New(cfg Config) (*Prober, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, TimeoutDefault)
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, MaxBodyBytesDefault)
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	return &Prober{cfg: cfg}, nil
}

// Target is a parsed, statically allowed address.
type Target struct {
	URL  *url.URL // base URL with the /healthz path
	Host string   // host name or IP literal, no brackets
	Port int
	IP   netip.Addr // set when Host is an IP literal
}

// Check applies the static rules to an address (scheme, no credentials, host
// or IP literal, port) without resolving it. Every refusal matches
// ErrNotAllowed.
func (p *Prober) Check(address string) (Target, error) {
	u, err := url.Parse(address)
	if err != nil || u.Host == "" {
		return Target{}, notAllowed("%q is not an absolute http(s) URL", address)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !p.cfg.AllowHTTP {
			return Target{}, notAllowed("plain http is not allowed; use https")
		}
	default:
		return Target{}, notAllowed("scheme %q is not allowed", u.Scheme)
	}
	if u.User != nil {
		return Target{}, notAllowed("credentials in the address are not allowed")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return Target{}, notAllowed("query and fragment are not allowed")
	}
	host := strings.ToLower(u.Hostname())
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if ps := u.Port(); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 {
			return Target{}, notAllowed("port %q is invalid", ps)
		}
		port = n
	}
	if !p.portAllowed(port) {
		return Target{}, notAllowed("port %d is not approved", port)
	}
	t := Target{Host: host, Port: port}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return Target{}, notAllowed("zoned addresses are not allowed")
		}
		if !p.ipAllowed(ip) {
			return Target{}, notAllowed("address %s is not in an approved network", ip)
		}
		t.IP = ip.Unmap()
	} else if !p.hostAllowed(host) {
		return Target{}, notAllowed("host %q is not approved", host)
	}
	base := *u
	base.Path = strings.TrimSuffix(u.Path, "/") + HealthPath
	base.RawPath = ""
	t.URL = &base
	return t, nil
}

func (p *Prober) portAllowed(port int) bool {
	for _, a := range p.cfg.AllowedPorts {
		if a == port {
			return true
		}
	}
	return false
}

func (p *Prober) hostAllowed(host string) bool {
	host = strings.TrimSuffix(host, ".")
	for _, a := range p.cfg.AllowedHosts {
		if suffix, ok := strings.CutPrefix(a, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
		} else if host == a {
			return true
		}
	}
	return false
}

// ipAllowed: inside an approved CIDR and never an address that cannot name
// one host (unspecified, multicast, broadcast).
func (p *Prober) ipAllowed(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsUnspecified() || ip.IsMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return false
	}
	for _, c := range p.cfg.AllowedCIDRs {
		if c.Contains(ip) {
			return true
		}
	}
	return false
}

// Resolve returns the IP to dial for a target: the literal, or the first DNS
// answer after every answer was checked (one bad answer refuses the whole
// name, so a rebinding record cannot slip in). A lookup failure is a
// *Failure with CodeDNSFailed; a refused answer matches ErrNotAllowed.
func (p *Prober) Resolve(ctx context.Context, t Target) (netip.Addr, error) {
	if t.IP.IsValid() {
		return t.IP, nil
	}
	addrs, err := p.cfg.Resolver.LookupNetIP(ctx, "ip", t.Host)
	if err != nil {
		return netip.Addr{}, &failureError{Failure{CodeDNSFailed, fmt.Sprintf("resolve %s: %v", t.Host, err)}}
	}
	if len(addrs) == 0 {
		return netip.Addr{}, &failureError{Failure{CodeDNSFailed, fmt.Sprintf("resolve %s: no addresses", t.Host)}}
	}
	for _, a := range addrs {
		if !p.ipAllowed(a) {
			return netip.Addr{}, notAllowed("%s resolves to %s, which is not in an approved network", t.Host, a.Unmap())
		}
	}
	return addrs[0].Unmap(), nil
}

type failureError struct{ f Failure }

func (e *failureError) Error() string { return string(e.f.Code) + ": " + e.f.Message }

// Probe checks, resolves and fetches the address's /healthz. A refused target
// returns an error matching ErrNotAllowed and no request is sent. Anything
// that goes wrong with an allowed target is a Result with Reachable false and
// a Failure.
func (p *Prober) Probe(ctx context.Context, address string) (Result, error) {
	t, err := p.Check(address)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	start := time.Now()
	res := Result{Address: address}
	ip, err := p.Resolve(ctx, t)
	if err != nil {
		var fe *failureError
		if errors.As(err, &fe) {
			res.Latency = time.Since(start)
			res.Failure = &fe.f
			return res, nil
		}
		return Result{}, err
	}
	res.DialedIP = ip.String()
	pinned := net.JoinHostPort(ip.String(), strconv.Itoa(t.Port))
	dialer := &net.Dialer{Timeout: p.cfg.Timeout}
	tr := &http.Transport{
		// No proxy from the environment: the pinned IP is dialled directly.
		Proxy: nil,
		// Whatever address the transport asks for, dial exactly the checked IP.
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", pinned)
		},
		// The TLS name is the URL's host (set by the transport), verified
		// against RootCAs.
		TLSClientConfig:        &tls.Config{RootCAs: p.cfg.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    p.cfg.Timeout,
		ResponseHeaderTimeout:  p.cfg.Timeout,
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: 16 << 10,
		ForceAttemptHTTP2:      false,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport: tr,
		// No redirects: a 3xx is reported, never followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       p.cfg.Timeout,
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL.String(), nil)
	if err != nil {
		return Result{}, fmt.Errorf("probe: request: %w", err)
	}
	// Only these headers are sent: no Authorization, no cookies (no jar).
	req.Header.Set("User-Agent", "kece-control-probe/1")
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		res.Latency = time.Since(start)
		res.Failure = classify(ctx, err)
		return res, nil
	}
	defer resp.Body.Close()
	res.StatusCode = resp.StatusCode
	res.Reachable = true
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		res.Latency = time.Since(start)
		res.Failure = &Failure{CodeRedirectRefused, fmt.Sprintf("redirect (%d) to %q refused", resp.StatusCode, resp.Header.Get("Location"))}
		return res, nil
	}
	if resp.StatusCode != http.StatusOK {
		res.Latency = time.Since(start)
		res.Failure = &Failure{CodeBadStatus, fmt.Sprintf("status %d", resp.StatusCode)}
		return res, nil
	}
	if resp.ContentLength > p.cfg.MaxBodyBytes {
		res.Latency = time.Since(start)
		res.Failure = &Failure{CodeTooLarge, fmt.Sprintf("body of %d bytes is above %d", resp.ContentLength, p.cfg.MaxBodyBytes)}
		return res, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, p.cfg.MaxBodyBytes+1))
	res.Latency = time.Since(start)
	if err != nil {
		res.Failure = classify(ctx, err)
		return res, nil
	}
	if int64(len(body)) > p.cfg.MaxBodyBytes {
		res.Failure = &Failure{CodeTooLarge, fmt.Sprintf("body is above %d bytes", p.cfg.MaxBodyBytes)}
		return res, nil
	}
	var health map[string]any
	if err := json.Unmarshal(body, &health); err != nil || health == nil {
		res.Failure = &Failure{CodeBadBody, "body is not a JSON object"}
		return res, nil
	}
	res.Health = health
	return res, nil
}

func classify(ctx context.Context, err error) *Failure {
	var netErr net.Error
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil || (errors.As(err, &netErr) && netErr.Timeout()):
		return &Failure{CodeTimeout, "no answer in time"}
	case errors.As(err, &certErr), errors.As(err, &recErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr),
		strings.Contains(err.Error(), "tls:"):
		return &Failure{CodeTLSFailed, trim(err.Error())}
	}
	return &Failure{CodeConnectFailed, trim(err.Error())}
}

func trim(s string) string {
	if len(s) > 1024 {
		return s[:1024]
	}
	return s
}

// ParseCIDRs parses a comma-separated list of CIDRs or single IPs (a single
// IP becomes a /32 or /128), for flags and environment variables.
func ParseCIDRs(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		ip, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("probe: %q is neither a CIDR nor an IP address", f)
		}
		out = append(out, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
	}
	return out, nil
}

// ParsePorts parses a comma-separated list of ports.
func ParsePorts(list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("probe: port %q must be 1..65535", f)
		}
		out = append(out, n)
	}
	return out, nil
}
