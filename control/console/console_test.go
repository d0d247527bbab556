package console_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/console"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/replica"
	"github.com/kece-oj/kece/control/store"
)

// testBundle is a real control replica (fresh database) with the console
// mounted, and a browser-like client that keeps cookies and does not follow
// redirects (tests look at them).
type testBundle struct {
	t   *testing.T
	env *controltest.Env
	hc  *http.Client
}

func mountConsole(t *testing.T, cfg console.Config) func(*httpapi.Server, *replica.Replica) {
	return func(srv *httpapi.Server, rep *replica.Replica) {
		con, err := console.New(cfg, rep.Store(), srv.Handler(), nil)
		require.NoError(t, err)
		srv.Mount(console.Prefix, con.Handler())
		srv.Mount(console.StatusPath, con.Handler())
	}
}

func setup(t *testing.T, cfg console.Config) *testBundle {
	t.Helper()
	env := controltest.Start(t, controltest.Options{Mount: mountConsole(t, cfg)})
	return &testBundle{t: t, env: env, hc: newClient(t)}
}

func newClient(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type page struct {
	status int
	header http.Header
	body   string
}

func (b *testBundle) do(method, path string, form url.Values, hdr ...string) page {
	b.t.Helper()
	return do(b.t, b.hc, b.env.URL, method, path, form, hdr...)
}

func do(t *testing.T, hc *http.Client, base, method, path string, form url.Values, hdr ...string) page {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, base+path, body)
	require.NoError(t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := hc.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return page{status: res.StatusCode, header: res.Header, body: string(raw)}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`)

func csrfOf(t *testing.T, p page) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(p.body)
	require.NotNil(t, m, "no csrf field in page:\n%s", p.body)
	return m[1]
}

// login logs the bundle's client in with token and returns the session's
// CSRF token.
func (b *testBundle) login(token string) string {
	b.t.Helper()
	lp := b.do("GET", "/console/login", nil)
	require.Equal(b.t, http.StatusOK, lp.status)
	res := b.do("POST", "/console/login", url.Values{"csrf": {csrfOf(b.t, lp)}, "token": {token}})
	require.Equal(b.t, http.StatusSeeOther, res.status, res.body)
	require.Equal(b.t, "/console/", res.header.Get("Location"))
	home := b.do("GET", "/console/", nil)
	require.Equal(b.t, http.StatusOK, home.status, home.body)
	return csrfOf(b.t, home)
}

// consoleRoutes is every route behind the session check, with a request
// that would succeed with a session.
var consoleRoutes = []struct{ method, path string }{
	{"GET", "/console/"},
	{"GET", "/console/host-groups"},
	{"POST", "/console/host-groups"},
	{"POST", "/console/host-groups/1/resize"},
	{"GET", "/console/nodes"},
	{"POST", "/console/nodes"},
	{"GET", "/console/nodes/1"},
	{"POST", "/console/nodes/1/verify"},
	{"POST", "/console/nodes/1/enable"},
	{"POST", "/console/nodes/1/drain"},
	{"POST", "/console/nodes/1/disable"},
	{"POST", "/console/nodes/1/revoke"},
	{"POST", "/console/nodes/1/rotate"},
	{"POST", "/console/nodes/1/resize"},
	{"POST", "/console/nodes/1/join-code"},
	{"GET", "/console/jobs"},
	{"GET", "/console/jobs/1"},
	{"POST", "/console/jobs/1/rejudge"},
	{"POST", "/console/jobs/1/cancel"},
	{"GET", "/console/events"},
	{"POST", "/console/events/1/redeliver"},
	{"GET", "/console/webhooks"},
	{"POST", "/console/webhooks"},
	{"POST", "/console/webhooks/default/rotate"},
	{"POST", "/console/webhooks/default/delete"},
	{"GET", "/console/reconcile"},
	{"GET", "/console/reconcile?run=1"},
	{"GET", "/console/audit"},
	{"GET", "/console/audit?action=node.drain"},
	{"GET", "/console/jobs?submissionType=ALGO&submissionId=1"},
	{"POST", "/console/logout"},
	{"GET", "/console/no-such-page"},
}

func TestEveryRouteRefusesWithoutSession(t *testing.T) {
	t.Parallel()
	b := setup(t, console.Config{})
	counts := func() (n int) {
		require.NoError(t, b.env.DB.QueryRow(`SELECT (SELECT COUNT(*) FROM judge_host_group) + (SELECT COUNT(*) FROM judge_audit)
			+ (SELECT COUNT(*) FROM judge_console_session)`).Scan(&n))
		return n
	}
	before := counts()
	forged := newClient(t)
	u, _ := url.Parse(b.env.URL)
	forged.Jar.SetCookies(u, []*http.Cookie{{Name: "kece_console", Value: "kcs_forged-session-id", Path: "/console/"}})
	for name, hc := range map[string]*http.Client{"no cookie": b.hc, "forged cookie": forged} {
		for _, rt := range consoleRoutes {
			form := url.Values{"csrf": {strings.Repeat("a", 64)}, "reason": {"r"}, "name": {"x"}, "slotCapacity": {"1"},
				"revision": {"1"}, "confirmed": {"1"}}
			if rt.method == "GET" {
				form = nil
			}
			p := do(t, hc, b.env.URL, rt.method, rt.path, form)
			if rt.method == "GET" {
				require.Equal(t, http.StatusSeeOther, p.status, "%s: %s %s", name, rt.method, rt.path)
				require.Equal(t, "/console/login", p.header.Get("Location"))
			} else {
				require.Equal(t, http.StatusUnauthorized, p.status, "%s: %s %s", name, rt.method, rt.path)
				require.Contains(t, p.body, "UNAUTHENTICATED")
			}
		}
	}
	// Nothing was done: no host group, no audit row, no session.
	require.Equal(t, before, counts())
}

func TestOnlyAdminTokensLogIn(t *testing.T) {
	t.Parallel()
	b := setup(t, console.Config{})
	node := b.env.NewNode("cpp", 1, 1)
	for name, tok := range map[string]string{
		"business token": b.env.Business,
		"join code":      node.JoinCode,
		"garbage":        "kat_not-a-token",
		"empty":          "",
	} {
		lp := b.do("GET", "/console/login", nil)
		res := b.do("POST", "/console/login", url.Values{"csrf": {csrfOf(t, lp)}, "token": {tok}})
		require.Equal(t, http.StatusUnauthorized, res.status, name)
		require.Contains(t, res.body, "UNAUTHENTICATED", name)
		for _, c := range b.hc.Jar.Cookies(mustURL(t, b.env.URL+"/console/")) {
			require.NotEqual(t, "kece_console", c.Name, name)
		}
	}
	// A login form without its CSRF token is refused even with a good token.
	res := b.do("POST", "/console/login", url.Values{"token": {b.env.Admin}})
	require.Equal(t, http.StatusForbidden, res.status)
	require.Contains(t, res.body, "CSRF_INVALID")
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

func TestSessionCookieAndHeaders(t *testing.T) {
	t.Parallel()
	loopback := netip.MustParsePrefix("127.0.0.1/32")
	for name, tc := range map[string]struct {
		proxies []netip.Prefix
		secure  bool
	}{
		"header from an untrusted peer is ignored":  {nil, false},
		"header from the trusted proxy is believed": {[]netip.Prefix{loopback}, true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, console.Config{TrustedProxies: tc.proxies})
			lp := b.do("GET", "/console/login", nil, "X-Forwarded-Proto", "https")
			res := b.do("POST", "/console/login", url.Values{"csrf": {csrfOf(t, lp)}, "token": {b.env.Admin}}, "X-Forwarded-Proto", "https")
			require.Equal(t, http.StatusSeeOther, res.status, res.body)
			var set string
			for _, v := range res.header.Values("Set-Cookie") {
				if strings.HasPrefix(v, "kece_console=") {
					set = v
				}
			}
			require.NotEmpty(t, set)
			require.Contains(t, set, "HttpOnly")
			require.Contains(t, set, "SameSite=Strict")
			require.Contains(t, set, "Path=/console/")
			require.Equal(t, tc.secure, strings.Contains(set, "Secure"), set)
			require.NotContains(t, set, b.env.Admin)
		})
	}
	b := setup(t, console.Config{})
	for _, path := range []string{"/console/login", "/status"} {
		p := b.do("GET", path, nil)
		require.Equal(t, http.StatusOK, p.status, path)
		csp := p.header.Get("Content-Security-Policy")
		require.Contains(t, csp, "script-src 'self'")
		require.Contains(t, csp, "frame-ancestors 'none'")
		require.NotContains(t, csp, "unsafe-inline")
		require.Equal(t, "DENY", p.header.Get("X-Frame-Options"))
		require.Equal(t, "nosniff", p.header.Get("X-Content-Type-Options"))
		require.Equal(t, "no-store", p.header.Get("Cache-Control"))
		// No inline script or style, so the CSP costs nothing.
		require.NotRegexp(t, `<script>|<script [^>]*>[^<]|<style|style="|onclick=|onload=`, p.body)
	}
}

func TestActionsGoThroughTheAdminAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, console.Config{})
	csrf := b.login(b.env.Admin)

	// A state-changing request without the session's CSRF token is refused.
	p := b.do("POST", "/console/host-groups", url.Values{"name": {"rack1"}, "slotCapacity": {"4"}})
	require.Equal(t, http.StatusForbidden, p.status)
	require.Contains(t, p.body, "CSRF_INVALID")
	p = b.do("POST", "/console/host-groups", url.Values{"csrf": {strings.Repeat("0", 64)}, "name": {"rack1"}, "slotCapacity": {"4"}})
	require.Equal(t, http.StatusForbidden, p.status)

	p = b.do("POST", "/console/host-groups", url.Values{"csrf": {csrf}, "name": {"rack1"}, "slotCapacity": {"4"}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	// The API's validation and codes, shown with the status.
	p = b.do("POST", "/console/host-groups", url.Values{"csrf": {csrf}, "name": {"rack1"}, "slotCapacity": {"4"}})
	require.Equal(t, http.StatusConflict, p.status)
	require.Contains(t, p.body, "NAME_TAKEN")
	p = b.do("POST", "/console/host-groups", url.Values{"csrf": {csrf}, "name": {"Bad Name"}, "slotCapacity": {"4"}})
	require.Equal(t, http.StatusBadRequest, p.status)
	require.Contains(t, p.body, "REQUEST_INVALID")

	// Create a node: the join code is shown once, with the exact command.
	groups := b.do("GET", "/console/host-groups", nil)
	gid := regexp.MustCompile(`/console/host-groups/(\d+)/resize`).FindStringSubmatch(groups.body)[1]
	p = b.do("POST", "/console/nodes", url.Values{"csrf": {csrf}, "name": {"mysql-1"}, "pool": {"mysql"}, "hostGroupId": {gid}, "slots": {"2"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	code := regexp.MustCompile(`kjc_[A-Za-z0-9_-]+`).FindString(p.body)
	require.NotEmpty(t, code)
	require.Contains(t, p.body, "kece-node join --control-url "+b.env.URL+" --pool mysql --join-code "+code+
		" --credential-file /var/lib/kece/node-mysql-1/credential")
	// Durations as the CLI takes them: a join code for 2 days, not 172800
	// seconds; a bad one is refused with what to write.
	p = b.do("POST", "/console/nodes", url.Values{"csrf": {csrf}, "name": {"mysql-2"}, "pool": {"mysql"}, "hostGroupId": {gid}, "slots": {"1"}, "ttl": {"2d"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	until := regexp.MustCompile(`until <time>([^<]+)</time>`).FindStringSubmatch(p.body)
	require.NotNil(t, until, p.body)
	exp, err := time.Parse("2006-01-02 15:04:05Z", until[1])
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(48*time.Hour), exp, 5*time.Minute, "2d is two days")
	p = b.do("POST", "/console/nodes", url.Values{"csrf": {csrf}, "name": {"mysql-3"}, "pool": {"mysql"}, "hostGroupId": {gid}, "slots": {"1"}, "ttl": {"3600"}})
	require.Equal(t, http.StatusBadRequest, p.status)
	require.Contains(t, p.body, "ttl must be a duration in whole seconds such as 90s, 15m, 24h or 7d")
	nodeID := regexp.MustCompile(`/console/nodes/(\d+)`).FindStringSubmatch(p.body)[1]
	for _, path := range []string{"/console/nodes", "/console/nodes/" + nodeID, "/console/"} {
		p := b.do("GET", path, nil)
		require.Equal(t, http.StatusOK, p.status, path)
		require.NotContains(t, p.body, code, path)
		require.NotContains(t, p.body, "kjc_", path)
		require.NotContains(t, p.body, b.env.Admin, path)
		require.NotContains(t, p.body, b.env.DSN, path)
	}

	// A destructive action asks first, and does nothing until confirmed.
	p = b.do("POST", "/console/nodes/"+nodeID+"/revoke", url.Values{"csrf": {csrf}, "reason": {"decommissioned"}})
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, `name="confirmed" value="1"`)
	require.Contains(t, b.do("GET", "/console/nodes/"+nodeID, nil).body, "PENDING_VERIFICATION")
	require.NotContains(t, b.do("GET", "/console/nodes/"+nodeID, nil).body, ">REVOKED<")
	// Enable refused by the API's rule, with its code.
	p = b.do("POST", "/console/nodes/"+nodeID+"/enable", url.Values{"csrf": {csrf}, "reason": {"try"}})
	require.Equal(t, http.StatusConflict, p.status)
	require.Contains(t, p.body, "HEARTBEAT_STALE")
	p = b.do("POST", "/console/nodes/"+nodeID+"/revoke", url.Values{"csrf": {csrf}, "reason": {"decommissioned"}, "confirmed": {"1"}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	detail := b.do("GET", "/console/nodes/"+nodeID, nil)
	require.Contains(t, detail.body, ">REVOKED<")

	// Audited as the admin token that opened the session.
	var actor string
	require.NoError(t, b.env.DB.QueryRow(`SELECT actor FROM judge_audit WHERE action = 'node.revoke'`).Scan(&actor))
	require.Regexp(t, `^ADMIN:admin-\d+#\d+$`, actor)
	require.Contains(t, detail.body, actor)

	// The audit page lists it with the browser's address; its filters are
	// the API's, errors and all.
	p = b.do("GET", "/console/audit?action=node.revoke", nil)
	require.Equal(t, http.StatusOK, p.status)
	require.Regexp(t, `node.revoke</td>\s*<td><a href="/console/nodes/`+nodeID+`">`, p.body)
	require.Contains(t, p.body, "<td>127.0.0.1</td>")
	require.NotContains(t, p.body, "node.create</td>")
	p = b.do("GET", "/console/audit?action=Not+An+Action", nil)
	require.Equal(t, http.StatusBadRequest, p.status)
	require.Contains(t, p.body, "REQUEST_INVALID")
	p = b.do("GET", "/console/jobs?createdAfter=yesterday", nil)
	require.Equal(t, http.StatusBadRequest, p.status)
	require.Contains(t, p.body, "REQUEST_INVALID")
	p = b.do("GET", "/console/jobs?submissionId=42", nil)
	require.Equal(t, http.StatusBadRequest, p.status, "the API's rule: a submission id needs its type")
	require.Contains(t, p.body, "REQUEST_INVALID")
}

func TestOverviewAndJobSearch(t *testing.T) {
	t.Parallel()
	b := setup(t, console.Config{})
	man := b.env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 256, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 100})
	b.env.Enqueue("ALGO", "s-77", "python3", "print(3)", man)
	b.env.Enqueue("ALGO", "s-78", "python3", "print(3)", man)
	b.login(b.env.Admin)
	p := b.do("GET", "/console/jobs?submissionType=ALGO&submissionId=s-77", nil)
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "ALGO/s-77")
	require.NotContains(t, p.body, "s-78")
	p = b.do("GET", "/console/?minutes=60", nil)
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "Finished (60 min)")
	require.Contains(t, p.body, `<option value="60" selected>`)
	require.Contains(t, p.body, "NO_READY_NODE", "python submissions wait with no python node")

	// A ready python node that reported no language can run neither: the
	// overview says why they wait and what is missing.
	n := b.env.NewNode("python", 1, 1)
	b.env.ForceEnable(n.ID)
	_, err := b.env.DB.ExecContext(b.env.Ctx,
		`UPDATE judge_node SET caps_languages = 0, last_heartbeat_at = NOW(6) WHERE id = ?`, n.ID)
	require.NoError(t, err)
	p = b.do("GET", "/console/", nil)
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "NO_CAPABLE_NODE")
	require.Contains(t, p.body, "2 no ready node can run; missing: python3")
	p = b.do("GET", "/console/?minutes=0", nil)
	require.Equal(t, http.StatusBadRequest, p.status)
	require.Contains(t, p.body, "REQUEST_INVALID")
}

func TestSessionsAcrossReplicasAndLogout(t *testing.T) {
	t.Parallel()
	b := setup(t, console.Config{})
	// The second replica serves the console too, over the same database.
	other := b.env.SecondReplica()
	csrf := b.login(b.env.Admin)
	u := mustURL(t, b.env.URL+"/console/")
	cookies := b.hc.Jar.Cookies(u)
	hc2 := newClient(t)
	hc2.Jar.SetCookies(mustURL(t, other.URL+"/console/"), cookies)
	p := do(t, hc2, other.URL, "GET", "/console/nodes", nil)
	require.Equal(t, http.StatusOK, p.status, "a session opened on one replica works on another")

	p = b.do("POST", "/console/logout", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, p.status)
	// The old cookie is refused everywhere once logged out.
	p = do(t, hc2, other.URL, "GET", "/console/nodes", nil)
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Equal(t, "/console/login", p.header.Get("Location"))
}

func TestStatusPageIsPublic(t *testing.T) {
	t.Parallel()
	b := setup(t, console.Config{})
	b.env.NewNode("python", 1, 1)
	p := b.do("GET", "/status", nil)
	require.Equal(t, http.StatusOK, p.status)
	for _, want := range []string{"pools ready", "python", "mysql", "as of"} {
		require.Contains(t, p.body, want)
	}
	require.NotContains(t, p.body, "/console/nodes", "the public page names no node")
}

// A self-check under way shows how far its CHECK job got on the node page
// (phase and steps, from the job the admin API reports), and its result once
// it ends.
func TestNodePageShowsCheckProgress(t *testing.T) {
	t.Parallel()
	b := setup(t, console.Config{})
	b.login(b.env.Admin)
	env := b.env
	manID := env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "exact"},
		controltest.Case{In: "1\n", Out: "1\n", Weight: 1})
	n := env.NewNode("cpp", 2, 2)
	chk, err := env.Store.Nodes().StartCheck(env.Ctx, store.CheckRequest{NodeID: n.ID, ManifestID: manID, Language: "cpp17", Source: "x"}, "test", "verify")
	require.NoError(t, err)
	page := "/console/nodes/" + strconv.FormatInt(n.ID, 10)

	// Queued: the node has not started it.
	require.Contains(t, b.do("GET", page, nil).body, "waiting for the node to start it")
	// The node reports its phase and steps as it judges (what a renew
	// writes; set here directly, since the subject is the page).
	_, err = env.DB.ExecContext(env.Ctx, `UPDATE judge_job SET phase = 'JUDGING', cases_done = 1, cases_total = 3 WHERE id = ?`, chk.JobID)
	require.NoError(t, err)
	require.Contains(t, b.do("GET", page, nil).body, "JUDGING, 1 of 3 steps")
}

// A session lasts only while the API accepts the admin secret that opened
// it: after `token rotate --overlap 0s`, and after a rotation's overlap
// ends, the session's next request — a CSRF-protected write included — is
// refused, writes nothing, and the session is ended and audited.
func TestSessionEndsWithItsSecret(t *testing.T) {
	t.Parallel()
	b := setup(t, console.Config{})
	secret, err := b.env.Store.Tokens().CreateToken(b.env.Ctx, store.TokenAdmin, "ops-rotating")
	require.NoError(t, err)
	rotate := func(overlap time.Duration) string {
		s, err := b.env.Store.Tokens().RotateToken(b.env.Ctx, store.RotateSpec{Kind: store.TokenAdmin, Name: "ops-rotating", Overlap: overlap})
		require.NoError(t, err)
		return s
	}
	createGroup := func(hc *http.Client, csrf, name string) page {
		return do(t, hc, b.env.URL, "POST", "/console/host-groups", url.Values{"csrf": {csrf}, "name": {name}, "slotCapacity": {"4"}})
	}
	refused := func(hc *http.Client, csrf, name string, ended int) {
		t.Helper()
		p := createGroup(hc, csrf, name)
		require.Equal(t, http.StatusUnauthorized, p.status, p.body)
		require.Contains(t, p.body, "UNAUTHENTICATED")
		var n int
		require.NoError(t, b.env.DB.QueryRow(`SELECT COUNT(*) FROM judge_host_group WHERE name = ?`, name).Scan(&n))
		require.Zero(t, n, "the refused write wrote nothing")
		require.NoError(t, b.env.DB.QueryRow(`SELECT COUNT(*) FROM judge_audit WHERE action = 'console.session_ended'
			AND reason LIKE '%rotated out%'`).Scan(&n))
		require.Equal(t, ended, n, "each ended session is audited once")
		p = do(t, hc, b.env.URL, "GET", "/console/", nil)
		require.Equal(t, http.StatusSeeOther, p.status, "the cookie is gone: back to the login")
		require.Equal(t, "/console/login", p.header.Get("Location"))
	}

	// Path 1: rotation with no overlap ends the session at once.
	csrf := b.login(secret)
	require.Equal(t, http.StatusSeeOther, createGroup(b.hc, csrf, "before-rotation").status)
	fresh := rotate(0)
	refused(b.hc, csrf, "after-rotation", 1)

	// Path 2: with an overlap the session keeps working until the overlap
	// ends, then it is refused; a session of the new secret goes on.
	old := newClient(t)
	ob := &testBundle{t: t, env: b.env, hc: old}
	oldCSRF := ob.login(fresh)
	newer := rotate(time.Hour)
	require.Equal(t, http.StatusSeeOther, createGroup(old, oldCSRF, "inside-overlap").status, "inside the overlap the old secret is accepted")
	nb := &testBundle{t: t, env: b.env, hc: newClient(t)}
	newCSRF := nb.login(newer)
	_, err = b.env.DB.Exec(`UPDATE judge_api_token SET prev_valid_until = NOW(6) - INTERVAL 1 SECOND WHERE name = 'ops-rotating'`)
	require.NoError(t, err)
	refused(old, oldCSRF, "after-overlap", 2)
	require.Equal(t, http.StatusSeeOther, createGroup(nb.hc, newCSRF, "new-secret").status, "the new secret's session is unaffected")
}
