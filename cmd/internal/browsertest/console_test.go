package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/cmd/internal/problems"
	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/control/dbtest"
	"github.com/kece-oj/kece/control/store"
)

// TestConsoleInBrowser is an admin's first day in the console, in a real
// browser against a real control plane and a real mysql-pool node: log in,
// create a host group and a node, join and start the node with the command
// the console shows, watch its self-check pass, enable it, see a submission
// enqueued through the business API appear and finish, drain the node with
// a deadline, rejudge, find the audit entries, log out and be refused. Every
// page visited is checked at 1280 and 390 px, for labels and for keyboard
// reach.
func TestConsoleInBrowser(t *testing.T) {
	exe := chromium(t)
	need(t, "control MariaDB", "127.0.0.1:33061", "KECE_REQUIRE_MYSQL")
	need(t, "judge MariaDB", "127.0.0.1:33062", "KECE_REQUIRE_MYSQL")
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	bin := build(t, "../../kece-control", "../../kece-node")
	db, dsn := dbtest.Open(t)
	st, err := store.New(db, store.Config{})
	require.NoError(t, err)
	adminTok, err := st.Tokens().CreateToken(ctx, store.TokenAdmin, "browser-admin")
	require.NoError(t, err)
	bizTok, err := st.Tokens().CreateToken(ctx, store.TokenBusiness, "browser-oj")
	require.NoError(t, err)

	addr := freeAddr(t)
	base := "http://" + addr
	start(t, "control", filepath.Join(bin, "kece-control"), []string{"serve", "--listen", addr, "--artifact-dir", t.TempDir(),
		"--mysql-dsn", dsn, "--lease-ttl", "10s", "--reap-interval", "500ms", "--heartbeat-interval", "1s", "--renew-interval", "3s",
		"--log-format", "text"}, nil)
	waitHTTP(t, ctx, base+"/healthz")

	b := newBrowser(t, exe, base)

	// Public status page, no session.
	b.open("/status")
	require.Contains(t, b.text("main"), "pools ready")
	b.checkPage("status")

	// Every console page needs a session.
	b.requireLogin("/console/")
	b.checkPage("login")
	b.fill("#token", bizTok)
	require.EqualValues(t, http.StatusUnauthorized, b.submit("form[action='/console/login'] button"))
	require.Contains(t, b.text(".error"), "UNAUTHENTICATED", "a business token cannot log in")
	b.fill("#token", adminTok)
	require.EqualValues(t, http.StatusOK, b.submit("form[action='/console/login'] button"))
	require.Contains(t, b.text("header"), "browser-admin")

	// Host group, then a node: its join code shown once, with the command.
	b.open("/console/host-groups")
	b.fill("#hg-name", "rack1-host01", "#hg-cap", "4")
	require.EqualValues(t, http.StatusOK, b.submit("form[action='/console/host-groups'] button"))
	require.Contains(t, b.text(".notice"), "Host group created")
	require.Contains(t, b.text("#groups-live"), "rack1-host01")
	b.checkPage("host-groups")

	b.open("/console/nodes")
	b.fill("#n-name", "mysql-01", "#n-pool", "mysql", "#n-slots", "2")
	require.EqualValues(t, http.StatusOK, b.submit("form[action='/console/nodes'] button"))
	cmdLine := eval[string](b, `document.getElementById("join-cmd").value`)
	m := regexp.MustCompile(`^kece-node join --control-url (\S+) --pool mysql --join-code (kjc_\S+) --credential-file /var/lib/kece/node-mysql-01/credential$`).FindStringSubmatch(cmdLine)
	require.NotNil(t, m, "join command %q", cmdLine)
	require.Equal(t, base, m[1])
	b.checkPage("join-code")
	nodeURL := eval[string](b, `document.querySelector("main a[href^='/console/nodes/']").getAttribute("href")`)

	// The host operator runs exactly that command (with the credential in
	// the test's directory instead of /var/lib/kece: the last flag wins),
	// then starts the node.
	dir := t.TempDir()
	cred := filepath.Join(dir, "credential")
	args := append(strings.Fields(cmdLine)[1:], "--credential-file", cred)
	out, err := runOut(ctx, filepath.Join(bin, "kece-node"), args...)
	require.NoError(t, err, out)
	judgeDSN := filepath.Join(dir, "judge-dsn")
	require.NoError(t, os.WriteFile(judgeDSN, []byte("root@tcp(127.0.0.1:33062)/\n"), 0o600))
	start(t, "node", filepath.Join(bin, "kece-node"), nil, []string{"KECE_POOL=mysql", "KECE_CONTROL_URL=" + base,
		"KECE_CREDENTIAL_FILE=" + cred, "KECE_LOCAL_SLOTS=2", "KECE_WORKSPACE=" + filepath.Join(dir, "work"),
		"KECE_CACHE_DIR=" + filepath.Join(dir, "cache"), "KECE_LISTEN=" + freeAddr(t), "KECE_JUDGE_MYSQL_DSN_FILE=" + judgeDSN})

	// The node page follows it live: online, then the self-check passes.
	b.open(nodeURL)
	require.NotContains(t, b.text("body"), m[2], "the join code is never shown again")
	b.waitFor("node online", `document.querySelector("#node-live").innerText.includes("online")`, time.Minute)
	require.EqualValues(t, http.StatusOK, b.submit("form[action$='/verify'] button"))
	require.Contains(t, b.text(".notice"), "Self-check queued")
	b.waitFor("self-check passed", `document.querySelector("#checks").innerText.includes("PASSED")`, 2*time.Minute)
	b.fill("#enable-reason", "verified in the browser test")
	require.EqualValues(t, http.StatusOK, b.submit("form[action$='/enable'] button"))
	require.Equal(t, "ENABLED", b.text("#desired-state"))
	b.checkPage("node")

	// A submission through the business API appears on the jobs page and finishes.
	biz, err := businessapi.NewClientWithResponses(base, businessapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+bizTok)
		return nil
	}))
	require.NoError(t, err)
	pm, err := biz.PublishManifestWithResponse(ctx, problems.BigCities())
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, pm.StatusCode(), string(pm.Body))
	b.open("/console/jobs?kind=SUBMISSION")
	en, err := biz.EnqueueSubmissionWithResponse(ctx, &businessapi.EnqueueSubmissionParams{}, businessapi.SubmissionCreate{
		SubmissionType: "DATABASE", SubmissionId: "browser-1", Language: "mysql", Source: problems.BigCitiesAnswer, ManifestId: pm.JSON201.ManifestId})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, en.StatusCode(), string(en.Body))
	b.waitFor("the job to appear and finish", `document.querySelector("#jobs-live").innerText.includes("browser-1") &&
		document.querySelector("#jobs-live").innerText.includes("COMPLETED")`, 2*time.Minute)
	b.checkPage("jobs")
	// Search by submission: type and id, verdict.
	b.fill("#f-type", "DATABASE", "#f-sub", "browser-1", "#f-verdict", "AC")
	require.EqualValues(t, http.StatusOK, b.submit("form[action='/console/jobs'] button"))
	require.Contains(t, b.text("#jobs-live"), "DATABASE/browser-1")
	jobURL := eval[string](b, `document.querySelector("#jobs-live a[href^='/console/jobs/']").getAttribute("href")`)
	b.open(jobURL)
	require.Equal(t, "AC", b.text("#verdict"))
	require.Contains(t, b.text("main"), "Attempts timeline")
	require.NotContains(t, b.text("#job-phases"), "No attempt reported", "the mysql node sent the job's phases")
	b.checkPage("job")

	// Drain with a deadline: asked to confirm, with the leases in flight.
	b.open(nodeURL)
	b.fill("#drain-reason", "host maintenance", "#drain-deadline", "2m")
	require.EqualValues(t, http.StatusOK, b.submit("form[action$='/drain'] button"))
	require.Contains(t, b.text("main"), "leases in flight")
	b.checkPage("confirm")
	require.EqualValues(t, http.StatusOK, b.submit("main form button[type=submit]"))
	require.Contains(t, b.text(".notice"), "Node draining")
	require.Equal(t, "DRAINING", b.text("#desired-state"))
	require.NotContains(t, b.text("#node-live"), "Drain deadline\n—", "the deadline is shown")

	// Rejudge: a new generation (queued: the only node drains).
	b.open(jobURL)
	b.fill("#rejudge-reason", "checker fixed")
	require.EqualValues(t, http.StatusOK, b.submit("form[action$='/rejudge'] button"))
	require.EqualValues(t, http.StatusOK, b.submit("main form button[type=submit]"))
	require.Contains(t, b.text(".notice"), "Rejudge queued")
	require.Contains(t, b.text("#job-live"), "2 (current)")
	// The jobs list tells the generations apart: generation 2 is marked
	// current, generation 1 old, and the old one's AC keeps its green badge.
	b.open("/console/jobs?submissionType=DATABASE&submissionId=browser-1")
	gens := eval[[]map[string]string](b, `[...document.querySelectorAll("#jobs-live tbody tr")].map(r => ({
		gen: r.querySelector("td.gen").innerText,
		marker: (r.querySelector("td.gen span") || {className: ""}).className,
		badge: (r.querySelector("span.verdict") || {className: ""}).className}))`)
	require.Len(t, gens, 2, "%v", gens)
	require.Equal(t, "2 current", gens[0]["gen"])
	require.Equal(t, "badge ok gen-current", gens[0]["marker"])
	require.Equal(t, "1 old", gens[1]["gen"])
	require.Equal(t, "muted gen-old", gens[1]["marker"])
	require.Equal(t, "badge verdict ok", gens[1]["badge"], "AC is the ok badge, not the bad one")
	b.checkPage("jobs-rejudged")

	// The audit trail names the admin token behind the session.
	b.open(nodeURL)
	audit := b.text("#node-live")
	for _, action := range []string{"node.create", "node.verify", "node.enable", "node.drain"} {
		require.Regexp(t, regexp.MustCompile(`ADMIN:browser-admin#\d+\s+`+regexp.QuoteMeta(action)), audit, action)
	}
	// The audit log: who, what, when, from where.
	b.open("/console/audit")
	log := b.text("#audit-live")
	for _, action := range []string{"console.login", "node.create", "node.verify", "node.enable", "node.drain", "job.rejudge"} {
		require.Regexp(t, regexp.MustCompile(`ADMIN:browser-admin#\d+\s+`+regexp.QuoteMeta(action)+`\s.*127\.0\.0\.1`), log, action)
	}
	b.checkPage("audit")
	b.fill("#a-action", "job.rejudge")
	require.EqualValues(t, http.StatusOK, b.submit("form[action='/console/audit'] button"))
	require.NotContains(t, b.text("#audit-live"), "node.drain")
	require.Contains(t, b.text("#audit-live"), "job.rejudge")

	// The overview counts the finished submission in its verdict mix.
	b.open("/console/")
	require.Regexp(t, `mysql[^\n]*AC 1`, b.text("#overview-live"))
	// Its per-pool chart: one bar of completions and one queue-wait p95
	// point for mysql, drawn by the server (no script).
	require.Equal(t, 1, eval[int](b, `[...document.querySelectorAll("#chart-mysql .rate rect")].filter(r => r.getAttribute("height") > 0).length`))
	require.Equal(t, 1, eval[int](b, `document.querySelectorAll("#chart-mysql .wait circle").length`))
	require.Equal(t, 0, eval[int](b, `document.querySelectorAll("#chart-cpp .wait circle").length`))
	require.Contains(t, eval[string](b, `document.querySelector("#chart-mysql svg").getAttribute("aria-label")`), "queue-wait p95 up to")
	b.checkPage("overview")

	// The remaining pages.
	for _, p := range []struct{ name, path string }{
		{"nodes", "/console/nodes"}, {"events", "/console/events"}, {"reconcile", "/console/reconcile?run=1"},
	} {
		b.open(p.path)
		b.checkPage(p.name)
	}
	require.Contains(t, b.text("#reconcile-result"), "OK")

	// Log out: the session is gone, every page refuses.
	require.EqualValues(t, http.StatusOK, b.submit("form[action='/console/logout'] button"))
	b.requireLogin("/console/nodes")
	b.requireLogin(jobURL)
	fmt.Fprintf(os.Stderr, "browser test: screenshots in %s\n", b.shots)
}
