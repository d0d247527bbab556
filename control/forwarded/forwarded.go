// Package forwarded decides who a request came from and whether the browser
// used TLS, believing X-Forwarded-For and X-Forwarded-Proto only from the
// reverse proxies an operator configured (KECE_TRUSTED_PROXIES). The admin
// API's audit rows and the console's cookies and audit rows both ask it, so
// there is one rule for both. It owns no other policy.
package forwarded

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies are the trusted reverse proxies (addresses or networks). The zero
// value trusts none: forwarded headers are ignored.
type Proxies []netip.Prefix

// Parse reads a comma list of addresses and networks
// ("10.0.0.5, 10.1.0.0/16"); an address stands for itself alone.
func Parse(s string) (Proxies, error) {
	var out Proxies
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
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Validate refuses entries that are not addresses or networks.
func (p Proxies) Validate() error {
	for _, x := range p {
		if !x.IsValid() {
			return errors.New("trusted proxies: an entry is not a valid address or network")
		}
	}
	return nil
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

func (p Proxies) trusted(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	for _, x := range p {
		if x.Contains(a) {
			return true
		}
	}
	return false
}

// Secure says whether the client reached us over TLS: the connection's own
// TLS, or X-Forwarded-Proto: https set by a trusted proxy. A header from
// anyone else is ignored, so a client cannot talk us out of (or into) it.
func (p Proxies) Secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !p.trusted(peer(r)) {
		return false
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

// ClientAddr is the client's address as host:port: the peer, or, when the
// peer is a trusted proxy, the right-most X-Forwarded-For entry that is not
// itself a trusted proxy (port 0). Entries to its left are the client's own
// claims and could be forged.
func (p Proxies) ClientAddr(r *http.Request) string {
	if !p.trusted(peer(r)) {
		return r.RemoteAddr
	}
	hops := strings.Split(r.Header.Get("X-Forwarded-For"), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		if a = a.Unmap(); !p.trusted(a) {
			return net.JoinHostPort(a.String(), "0")
		}
	}
	return r.RemoteAddr
}

// ClientIP is ClientAddr without the port: what audit rows record.
func (p Proxies) ClientIP(r *http.Request) string {
	a := p.ClientAddr(r)
	if host, _, err := net.SplitHostPort(a); err == nil {
		return host
	}
	return a
}
