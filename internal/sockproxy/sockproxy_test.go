package sockproxy

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A cut proxy refuses new connections and breaks open ones; Up opens it
// again on the same address.
func TestCutAndUpAgainOnTheSameAddress(t *testing.T) {
	t.Parallel()
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			go func() { // echo lines until the client goes
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(l)); err != nil {
						return
					}
				}
			}()
		}
	}()
	p := New("tcp", "127.0.0.1:0", srv.Addr().String())
	t.Cleanup(p.Cut)
	require.NoError(t, p.Up())
	addr := p.Addr()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	require.NoError(t, err)
	r := bufio.NewReader(c)
	_, err = c.Write([]byte("one\n"))
	require.NoError(t, err)
	l, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "one\n", l)

	p.Cut()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = r.ReadString('\n')
	require.Error(t, err, "an open connection breaks")
	_, err = net.DialTimeout("tcp", addr, time.Second)
	require.Error(t, err, "a new one is refused")

	require.NoError(t, p.Up())
	require.Equal(t, addr, p.Addr(), "back on the same address")
	c2, err := net.DialTimeout("tcp", addr, time.Second)
	require.NoError(t, err)
	_, err = c2.Write([]byte("two\n"))
	require.NoError(t, err)
	l, err = bufio.NewReader(c2).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "two\n", l)

	// A connection the client closes is forgotten, both sides.
	require.NoError(t, c2.Close())
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.conns) == 0
	}, 5*time.Second, 10*time.Millisecond)
}
