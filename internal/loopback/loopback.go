// Package loopback finds free loopback ports and waits for local servers:
// what the demo, the benches and the end-to-end tests need to start the
// project's processes on 127.0.0.1.
package loopback

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

// FreeAddr is a 127.0.0.1 address whose port was free a moment ago (the
// listener is closed before it returns, so the caller's process can bind it).
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// WaitHTTP polls url every 100 ms until it answers 200 or ctx ends.
func WaitHTTP(ctx context.Context, url string) error {
	for {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s never answered 200: %w", url, context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitHTTPWithin is WaitHTTP bounded by limit.
func WaitHTTPWithin(ctx context.Context, url string, limit time.Duration) error {
	ctx, cancel := context.WithTimeoutCause(ctx, limit, fmt.Errorf("not within %s", limit))
	defer cancel()
	return WaitHTTP(ctx, url)
}
