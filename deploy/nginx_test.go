package deploy

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/control/httpapi"
)

func TestNginx(t *testing.T) {
	t.Parallel()
	http := loadNginx(t)
	geos := map[string]*ngxDirective{}
	for _, g := range http.find("geo") {
		geos[g.args[0]] = g
	}
	for _, v := range []string{"$kece_judge_net", "$kece_admin_net", "$kece_business_net"} {
		g := geos[v]
		require.NotNil(t, g, "geo %s", v)
		require.Equal(t, "0", g.value("default"), "%s denies by default", v)
		require.NotEmpty(t, networks(g), "%s lists at least one network", v)
	}
	ups := http.find("upstream")
	require.Len(t, ups, 1)
	require.NotEmpty(t, ups[0].find("server"))
	require.Equal(t, "kece_control", ups[0].args[0])

	servers := http.find("server")
	require.Len(t, servers, 1, "one TLS server, no plain-HTTP listener")
	srv := servers[0]
	for _, l := range srv.find("listen") {
		require.Contains(t, l.args, "ssl", "every listener terminates TLS")
	}
	require.NotEmpty(t, srv.value("ssl_certificate"))
	require.NotEmpty(t, srv.value("ssl_certificate_key"))
	require.NotContains(t, srv.value("ssl_protocols"), "TLSv1.1")
	def, err := ngxSize(srv.value("client_max_body_size"))
	require.NoError(t, err)
	require.Equal(t, int64(httpapi.MaxBodyBytesDefault), def, "server-wide body limit = the API's 8 MiB bound")

	sha := strings.Repeat("ab", 32)
	cases := []struct {
		uri      string
		gate     string // geo variable; "" = public
		maxBody  int64
		stream   bool // proxy_buffering off
		longPoll bool
		notFound bool
		limited  string // limit_req zone; "" = never limited at the edge
	}{
		{uri: "/api/v1/internal/judgers/join", gate: "$kece_judge_net", maxBody: def},
		{uri: "/api/v1/internal/judgers/session", gate: "$kece_judge_net", maxBody: def},
		{uri: "/api/v1/internal/judgers/heartbeat", gate: "$kece_judge_net", maxBody: def},
		{uri: "/api/v1/internal/judgers/jobs/claim", gate: "$kece_judge_net", maxBody: def, longPoll: true},
		{uri: "/api/v1/internal/judgers/jobs/renew", gate: "$kece_judge_net", maxBody: def},
		{uri: "/api/v1/internal/judgers/jobs/123/result", gate: "$kece_judge_net", maxBody: def},
		{uri: "/api/v1/internal/judgers/jobs/123/artifacts/" + sha, gate: "$kece_judge_net", maxBody: def, stream: true},
		{uri: "/api/v1/internal/judgers/unknown", gate: "$kece_judge_net", maxBody: def},
		{uri: "/api/v1/admin/judgers", gate: "$kece_admin_net", maxBody: def},
		{uri: "/api/v1/admin/judgers/5/verify", gate: "$kece_admin_net", maxBody: def},
		{uri: "/api/v1/admin/reconcile", gate: "$kece_admin_net", maxBody: def},
		{uri: "/api/v1/artifacts/" + sha, gate: "$kece_business_net", maxBody: artifact.StoreMaxArtifactBytesDefault, limited: "kece_business"},
		{uri: "/api/v1/manifests", gate: "$kece_business_net", maxBody: def, limited: "kece_business"},
		{uri: "/api/v1/submissions", gate: "$kece_business_net", maxBody: def, limited: "kece_business"},
		{uri: "/api/v1/settlement-events/claim", gate: "$kece_business_net", maxBody: def, limited: "kece_business"},
		{uri: "/api/v1/system/judgers/summary", gate: "", maxBody: def, limited: "kece_public"},
		{uri: "/openapi/business.yaml", gate: "", maxBody: def},
		{uri: "/docs/admin", gate: "", maxBody: def},
		{uri: "/console/", gate: "$kece_admin_net", maxBody: def},
		{uri: "/console/nodes/5/drain", gate: "$kece_admin_net", maxBody: def},
		{uri: "/console/static/app.js", gate: "$kece_admin_net", maxBody: def},
		{uri: "/status", gate: "", maxBody: def, limited: "kece_public"},
		{uri: "/status/x", notFound: true},
		{uri: "/metrics", notFound: true},
		{uri: "/healthz", notFound: true},
		{uri: "/", notFound: true},
	}
	for _, c := range cases {
		l := ngxRoute(t, srv, c.uri)
		where := fmt.Sprintf("%s -> location %s", c.uri, strings.Join(l.args, " "))
		if c.notFound {
			require.Equal(t, "404", l.value("return"), where)
			continue
		}
		require.Equal(t, "http://kece_control", l.value("proxy_pass"), where)
		require.Equal(t, c.gate, gate(l), where)
		zone, _, _ := strings.Cut(strings.TrimPrefix(l.value("limit_req"), "zone="), " ")
		require.Equal(t, c.limited, zone, "%s: limit_req (nodes and admins are never limited)", where)
		body := def
		if v := l.value("client_max_body_size"); v != "" {
			body, err = ngxSize(v)
			require.NoError(t, err)
		}
		require.Equal(t, c.maxBody, body, "%s body limit", where)
		if body > def {
			require.Equal(t, "off", l.value("proxy_request_buffering"), "%s: large uploads stream to the replica", where)
		}
		require.Equal(t, c.stream, l.value("proxy_buffering") == "off", "%s proxy_buffering", where)
		if c.stream {
			require.Equal(t, "0", l.value("proxy_max_temp_file_size"), where)
		}
		read := srv.value("proxy_read_timeout")
		if v := l.value("proxy_read_timeout"); v != "" {
			read = v
		}
		d, err := time.ParseDuration(read)
		require.NoError(t, err)
		require.Greater(t, d, httpapi.ClaimWaitMaxDefault+5*time.Second, "%s: read timeout must outlast a long-poll", where)
		if c.longPoll {
			require.GreaterOrEqual(t, d, 20*time.Second, where)
			require.Equal(t, "=", l.args[0], "the claim long-poll has its own exact location")
		}
	}
	// Over a limit, nginx answers as the contract says a replica does.
	require.Equal(t, "429", srv.value("limit_req_status"))
	require.Equal(t, "429 = @kece_rate_limited", srv.value("error_page"))
	rl := ngxNamed(t, srv, "@kece_rate_limited")
	require.Equal(t, "Retry-After 1 always", rl.value("add_header"))
	require.Contains(t, rl.value("return"), `"code":"RATE_LIMITED"`)
	zones := map[string]bool{}
	for _, z := range http.find("limit_req_zone") {
		zones[strings.TrimSuffix(strings.TrimPrefix(z.args[1], "zone="), ":10m")] = true
	}
	require.Equal(t, map[string]bool{"kece_business": true, "kece_public": true}, zones)
	// Judge hosts must not reach admin: the example lists share no network.
	for _, n := range networks(geos["$kece_judge_net"]) {
		require.NotContains(t, networks(geos["$kece_admin_net"]), n, "a judge network may not reach admin")
	}
}

// TestNginxSyntax runs `nginx -t` on the file (wrapped in a minimal main
// config with a throwaway certificate) when nginx is installed, or when
// KECE_NGINX names its binary. Optional tooling: skipped otherwise.
func TestNginxSyntax(t *testing.T) {
	t.Parallel()
	bin := os.Getenv("KECE_NGINX")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("nginx"); err != nil {
			t.Skip("nginx not installed (set KECE_NGINX to a binary to run this check)")
		}
	}
	dir := t.TempDir()
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeSelfSigned(t, crt, key)
	data, err := os.ReadFile(repo(nginxConf))
	require.NoError(t, err)
	site := strings.NewReplacer("/etc/nginx/tls/control.example.org.crt", crt, "/etc/nginx/tls/control.example.org.key", key).Replace(string(data))
	require.NotEqual(t, string(data), site, "certificate paths in the example changed; update this test")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "site.conf"), []byte(site), 0o644))
	var main strings.Builder
	fmt.Fprintf(&main, "pid %s/nginx.pid;\nerror_log %s/error.log;\nevents {}\nhttp {\n", dir, dir)
	for _, d := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&main, "  %s_temp_path %s/%s;\n", d, dir, d)
	}
	fmt.Fprintf(&main, "  access_log off;\n  include %s/site.conf;\n}\n", dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main.String()), 0o644))
	out, err := exec.Command(bin, "-t", "-p", dir, "-c", filepath.Join(dir, "nginx.conf")).CombinedOutput()
	require.NoError(t, err, "nginx -t: %s", out)
	require.Contains(t, string(out), "test is successful")
}

func writeSelfSigned(t *testing.T, crtPath, keyPath string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "control.example.org"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"control.example.org"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(k)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(crtPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
}

// TestNginxLive runs the proxy for real on loopback (when nginx is available,
// like TestNginxSyntax) in front of a recording upstream: judge routes pass
// from a judge network, admin routes are refused from elsewhere, bodies over
// 8 MiB are refused except artifact uploads, and unknown paths are 404.
func TestNginxLive(t *testing.T) {
	t.Parallel()
	bin := os.Getenv("KECE_NGINX")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("nginx"); err != nil {
			t.Skip("nginx not installed (set KECE_NGINX to a binary to run this check)")
		}
	}
	type seen struct {
		path string
		n    int64
	}
	got := make(chan seen, 16)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		got <- seen{r.URL.Path, n}
		fmt.Fprintf(w, "upstream %s %d", r.URL.Path, n)
	}))
	t.Cleanup(up.Close)

	dir := t.TempDir()
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeSelfSigned(t, crt, key)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	data, err := os.ReadFile(repo(nginxConf))
	require.NoError(t, err)
	site := string(data)
	for old, repl := range map[string]string{
		"/etc/nginx/tls/control.example.org.crt":                     crt,
		"/etc/nginx/tls/control.example.org.key":                     key,
		"    server 10.10.0.11:8080;\n    server 10.10.0.12:8080;\n": "    server " + strings.TrimPrefix(up.URL, "http://") + ";\n",
		"    listen 443 ssl;\n    listen [::]:443 ssl;\n":            "    listen " + addr + " ssl;\n",
		// Loopback is a judge and a business network here, not an admin one.
		"    10.20.0.0/16 1;": "    127.0.0.1/32 1;",
		"    10.40.0.0/16 1;": "    127.0.0.1/32 1;",
	} {
		require.Contains(t, site, old, "the example changed; update this test")
		site = strings.Replace(site, old, repl, 1)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "site.conf"), []byte(site), 0o644))
	var main strings.Builder
	fmt.Fprintf(&main, "daemon off;\nmaster_process off;\npid %s/nginx.pid;\nerror_log %s/error.log;\nevents {}\nhttp {\n", dir, dir)
	for _, d := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&main, "  %s_temp_path %s/%s;\n", d, dir, d)
	}
	fmt.Fprintf(&main, "  access_log off;\n  include %s/site.conf;\n}\n", dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main.String()), 0o644))

	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	pool := x509.NewCertPool()
	crtPEM, err := os.ReadFile(crt)
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(crtPEM))
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "control.example.org"}}}
	base := "https://" + addr

	// Wait until nginx accepts connections (or report why it exited).
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("nginx exited: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}

	sha := strings.Repeat("ab", 32)
	do := func(method, path string, size int) int {
		t.Helper()
		req, err := http.NewRequest(method, base+path, bytes.NewReader(make([]byte, size)))
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		method, path string
		size         int
		status       int
	}{
		{"POST", "/api/v1/internal/judgers/heartbeat", 1 << 10, 200},
		{"POST", "/api/v1/internal/judgers/jobs/claim", 1 << 10, 200},
		{"GET", "/api/v1/internal/judgers/jobs/7/artifacts/" + sha, 0, 200},
		{"GET", "/api/v1/admin/judgers", 0, 403},
		{"POST", "/api/v1/admin/judgers/7/revoke", 1 << 10, 403},
		{"GET", "/api/v1/system/judgers/summary", 0, 200},
		{"POST", "/api/v1/submissions", 1 << 10, 200},
		{"POST", "/api/v1/submissions", 9 << 20, 413},
		{"POST", "/api/v1/internal/judgers/jobs/7/result", 9 << 20, 413},
		{"PUT", "/api/v1/artifacts/" + sha, 9 << 20, 200},
		{"GET", "/metrics", 0, 404},
		{"GET", "/console/", 0, 403},
		{"POST", "/console/login", 1 << 10, 403},
		{"GET", "/status", 0, 200},
	} {
		require.Equal(t, c.status, do(c.method, c.path, c.size), "%s %s (%d bytes)", c.method, c.path, c.size)
		if c.status == 200 {
			s := <-got
			require.Equal(t, c.path, s.path)
			require.Equal(t, int64(c.size), s.n, "the upstream got the whole body")
		}
	}
	select {
	case s := <-got:
		t.Fatalf("a refused request reached the upstream: %+v", s)
	default:
	}

	// A burst over the edge budget gets the contract's 429 (JSON
	// RATE_LIMITED, Retry-After) from nginx; a node's burst is never
	// limited. The upstream's record is drained meanwhile.
	stop, drained := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(drained)
		for {
			select {
			case <-got:
			case <-stop:
				return
			}
		}
	}()
	limited := 0
	for range 40 {
		resp, err := client.Get(base + "/status")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			limited++
			require.Equal(t, "1", resp.Header.Get("Retry-After"))
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			require.Contains(t, string(body), `"code":"RATE_LIMITED"`)
			continue
		}
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	}
	require.Positive(t, limited, "40 requests at once are over a burst of 20")
	for range 40 {
		require.Equal(t, http.StatusOK, do("POST", "/api/v1/internal/judgers/heartbeat", 16), "nodes are never limited")
	}
	close(stop)
	<-drained
}
