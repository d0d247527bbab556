package console

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParseTrustedProxies reads a comma list of addresses and networks
// ("10.0.0.5, 10.1.0.0/16"); an address stands for itself alone.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, err
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, err
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// peer is the connection's peer address (no port), or invalid.
func peer(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

func (c *Console) trusted(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range c.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// secure says whether the browser reached us over TLS: the connection's own
// TLS, or X-Forwarded-Proto: https set by a trusted proxy. A header from
// anyone else is ignored, so a client cannot talk the console out of (or
// into) the Secure cookie flag.
func (c *Console) secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !c.trusted(peer(r)) {
		return false
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

// clientAddr is the browser's address as host:port for logs and audit: the
// peer, or, when the peer is a trusted proxy, the right-most address of
// X-Forwarded-For that is not itself a trusted proxy (entries to its left
// are the client's own claims and could be forged).
func (c *Console) clientAddr(r *http.Request) string {
	p := peer(r)
	if !c.trusted(p) {
		return r.RemoteAddr
	}
	hops := strings.Split(r.Header.Get("X-Forwarded-For"), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		if a = a.Unmap(); !c.trusted(a) {
			return net.JoinHostPort(a.String(), "0")
		}
	}
	return r.RemoteAddr
}

// clientIP is clientAddr without the port: what sessions and their audit
// rows record, like the admin API's own rows.
func (c *Console) clientIP(r *http.Request) string {
	a := c.clientAddr(r)
	if host, _, err := net.SplitHostPort(a); err == nil {
		return host
	}
	return a
}
