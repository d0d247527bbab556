package forwarded_test

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/forwarded"
)

func TestForwardedHeadersOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	c, err := forwarded.Parse("10.0.0.5, 10.1.0.0/16")
	require.NoError(t, err)
	require.NoError(t, c.Validate())
	for _, tc := range []struct {
		name, peer, xfp, xff string
		tls                  bool
		secure               bool
		client               string
	}{
		{name: "direct plain", peer: "192.0.2.1:5000", client: "192.0.2.1:5000"},
		{name: "direct TLS", peer: "192.0.2.1:5000", tls: true, secure: true, client: "192.0.2.1:5000"},
		{name: "untrusted peer claims https and an address", peer: "192.0.2.1:5000", xfp: "https", xff: "203.0.113.9", client: "192.0.2.1:5000"},
		{name: "trusted proxy, https", peer: "10.0.0.5:40000", xfp: "https", xff: "203.0.113.9", secure: true, client: "203.0.113.9:0"},
		{name: "trusted proxy network, http", peer: "10.1.2.3:40000", xfp: "http", xff: "203.0.113.9", client: "203.0.113.9:0"},
		{name: "forged left entries are skipped", peer: "10.0.0.5:1", xfp: "HTTPS", xff: "1.2.3.4, 203.0.113.9, 10.1.0.7", secure: true, client: "203.0.113.9:0"},
		{name: "trusted proxy without XFF", peer: "10.0.0.5:1", client: "10.0.0.5:1"},
		{name: "garbage XFF", peer: "10.0.0.5:1", xff: "nonsense", client: "10.0.0.5:1"},
	} {
		r := httptest.NewRequest("GET", "/console/", nil)
		r.RemoteAddr = tc.peer
		if tc.xfp != "" {
			r.Header.Set("X-Forwarded-Proto", tc.xfp)
		}
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if tc.tls {
			r.TLS = &tls.ConnectionState{}
		}
		require.Equal(t, tc.secure, c.Secure(r), tc.name)
		require.Equal(t, tc.client, c.ClientAddr(r), tc.name)
	}
	for _, bad := range []string{"10.0.0.300", "example.com", "10.0.0.0/33"} {
		_, err := forwarded.Parse(bad)
		require.Error(t, err, bad)
	}
	none, err := forwarded.Parse("")
	require.NoError(t, err)
	require.Empty(t, none)
}
