package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// On a terminal the status line is rewritten in place; elsewhere each
// change is one plain line and repeats are not printed.
func TestProgressDisplay(t *testing.T) {
	t.Parallel()
	var tty bytes.Buffer
	p := &progress{w: &tty, tty: true}
	p.update("draining node a: 2 leases in flight", time.Second)
	p.update("draining node a: 1 leases in flight", 2*time.Second)
	p.done("node a is drained")
	require.Equal(t, "\r\033[Kdraining node a: 2 leases in flight (1s)\r\033[Kdraining node a: 1 leases in flight (2s)\r\033[Knode a is drained\n", tty.String())

	var plain bytes.Buffer
	p = newProgress(&plain) // a buffer is not a terminal
	require.False(t, p.tty)
	p.update("draining node a: 2 leases in flight", time.Second)
	p.update("draining node a: 2 leases in flight", 2*time.Second)
	p.update("draining node a: 1 leases in flight", 3*time.Second)
	p.done("node a is drained")
	require.Equal(t, "draining node a: 2 leases in flight (1s)\ndraining node a: 1 leases in flight (3s)\nnode a is drained\n", plain.String())
}
