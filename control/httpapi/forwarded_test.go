package httpapi_test

import (
	"context"
	"net/http"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/forwarded"
	"github.com/kece-oj/kece/control/httpapi"
)

// Audit rows record the client a trusted proxy names, and only then.
func TestAuditCallerBehindTrustedProxy(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		proxies forwarded.Proxies
		want    string
	}{
		"no proxy trusted: the peer":       {nil, "127.0.0.1"},
		"loopback trusted: the XFF client": {forwarded.Proxies{netip.MustParsePrefix("127.0.0.1/32")}, "203.0.113.7"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := controltest.Start(t, controltest.Options{HTTP: httpapi.Config{TrustedProxies: tc.proxies}})
			c, err := adminapi.NewClientWithResponses(env.URL, adminapi.WithRequestEditorFn(controltest.Bearer(env.Admin)),
				adminapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
					r.Header.Set("X-Forwarded-For", "198.51.100.1, 203.0.113.7")
					return nil
				}))
			require.NoError(t, err)
			r, err := c.CreateHostGroupWithResponse(env.Ctx, adminapi.HostGroupCreate{Name: "rack1", SlotCapacity: 2})
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, r.StatusCode(), string(r.Body))
			var addr string
			require.NoError(t, env.DB.QueryRow(`SELECT remote_addr FROM judge_audit WHERE action = 'host_group.create'`).Scan(&addr))
			require.Equal(t, tc.want, addr)
		})
	}
}
