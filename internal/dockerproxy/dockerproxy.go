// Package dockerproxy forwards a unix socket to the Docker daemon's and can
// cut it and open it again. To an executor whose DockerHost is the proxy,
// a cut looks exactly like a daemon that stopped (every call fails, every
// open stream breaks) and Up like one that came back. It exists for tests
// of the engine and the node.
package dockerproxy

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Proxy is one forwarding socket. The zero value is not usable; use New.
type Proxy struct {
	path, target string

	mu    sync.Mutex
	ln    net.Listener // nil while cut
	conns []net.Conn
}

// New prepares a proxy on dir/d.sock (keep dir short: a unix socket path
// has at most 107 bytes) to the daemon socket target, or to the one
// DOCKER_HOST names (default /var/run/docker.sock) when target is "". It
// starts cut: nothing listens until Up.
func New(dir, target string) *Proxy {
	if target == "" {
		target = "/var/run/docker.sock"
		if h, ok := strings.CutPrefix(os.Getenv("DOCKER_HOST"), "unix://"); ok {
			target = h
		}
	}
	return &Proxy{path: filepath.Join(dir, "d.sock"), target: target}
}

// Host is the DockerHost of the proxy.
func (p *Proxy) Host() string { return "unix://" + p.path }

// Up listens (again) and forwards each new connection to the daemon.
func (p *Proxy) Up() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return nil
	}
	if err := os.Remove(p.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		return err
	}
	p.ln = ln
	go p.serve(ln)
	return nil
}

func (p *Proxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("unix", p.target)
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
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
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
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
