// Package sockproxy forwards a socket to a server's and can cut it and open
// it again on the same address. To a client of the proxy a cut looks
// exactly like a server that stopped (new connections are refused, open
// ones break) and Up like one that came back: the Docker daemon for the
// engine and the node, the control database for the control plane. It
// exists for tests.
package sockproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// Proxy is one forwarding socket; make it with New or Docker.
type Proxy struct {
	network, target string

	mu   sync.Mutex
	addr string       // where it listens: fixed by the first Up for "127.0.0.1:0"
	ln   net.Listener // nil while cut
	// conns are the open connections, both sides; a pair leaves when both
	// its copies end, so a long run does not keep every closed one.
	conns map[net.Conn]struct{}
}

// New prepares a proxy listening on network/addr ("tcp" "127.0.0.1:0" for a
// free port, or "unix" and a path) that forwards to target on the same
// network. It starts cut: nothing listens until Up.
func New(network, addr, target string) *Proxy {
	return &Proxy{network: network, addr: addr, target: target}
}

// Docker prepares a proxy on dir/d.sock (keep dir short: a unix socket path
// has at most 107 bytes) to the Docker daemon's socket: the one DOCKER_HOST
// names, else /var/run/docker.sock. Its Host is the executor's DockerHost.
func Docker(dir string) *Proxy {
	target := "/var/run/docker.sock"
	if h, ok := strings.CutPrefix(os.Getenv("DOCKER_HOST"), "unix://"); ok {
		target = h
	}
	return New("unix", filepath.Join(dir, "d.sock"), target)
}

// Addr is where the proxy listens (after the first Up for a free port).
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// Host is the proxy as a Docker host: "unix://" and its path.
func (p *Proxy) Host() string { return "unix://" + p.Addr() }

// Up listens (again, on the same address) and forwards each new connection.
func (p *Proxy) Up() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return nil
	}
	if p.network == "unix" {
		if err := os.Remove(p.addr); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	ln, err := net.Listen(p.network, p.addr)
	if err != nil {
		return err
	}
	p.ln, p.addr = ln, ln.Addr().String()
	go p.serve(ln)
	return nil
}

func (p *Proxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial(p.network, p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.ln != ln { // cut since Accept returned
			p.mu.Unlock()
			c.Close()
			up.Close()
			continue
		}
		if p.conns == nil {
			p.conns = make(map[net.Conn]struct{})
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		var copying atomic.Int32
		copying.Store(2)
		ended := func() {
			if copying.Add(-1) == 0 {
				p.mu.Lock()
				delete(p.conns, c)
				delete(p.conns, up)
				p.mu.Unlock()
			}
		}
		go func() { _, _ = io.Copy(up, c); up.Close(); ended() }()
		go func() { _, _ = io.Copy(c, up); c.Close(); ended() }()
	}
}

// Cut closes the listener and every connection made through it.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}
