package browsertest

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/cmd/internal/problems"
	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/control/controltest"
)

// TestConsoleScreenshotsPopulated takes the console's screenshots
// (docs/console/*.png, `make screenshots`) from a populated system: the
// demo (kece-demo -keep: one node per pool, every demo submission judged
// in real sandboxes), then a second python node on a second host group
// (joined, verified and enabled like any new node), a rejudge, the demo's
// python node draining (every pool keeps a ready node), and consumer group
// "shots" with a webhook (admin API, its secret sealed with the control
// plane's webhook key) whose endpoint refuses, so that the group's one
// settlement event goes DEAD after its only attempt. It runs only when
// KECE_SCREENSHOT_DIR says where the pictures go: it needs Docker with the
// runtime images and takes minutes.
func TestConsoleScreenshotsPopulated(t *testing.T) {
	if os.Getenv("KECE_SCREENSHOT_DIR") == "" {
		t.Skip("screenshots only: set KECE_SCREENSHOT_DIR (make screenshots)")
	}
	exe := chromium(t)
	need(t, "control MariaDB", "127.0.0.1:33061", "KECE_REQUIRE_MYSQL")
	need(t, "judge MariaDB", "127.0.0.1:33062", "KECE_REQUIRE_MYSQL")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bin := build(t, "../../kece-demo", "../../kece-control", "../../kece-node", "../../kecectl", "../../kece-sandbox-init")

	// The demo's control plane gets a webhook encryption key, as every
	// replica needs one to store a group's secrets (docs/operations.md,
	// "Webhook encryption key"); the demo's own events (group default) are
	// pulled as always.
	keyFile := webhookKeyFile(t, ctx, filepath.Join(bin, "kece-control"))
	const database = "kece_screenshots"
	logPath := startDemo(t, filepath.Join(bin, "kece-demo"), []string{"-bin", bin, "-work", filepath.Join(t.TempDir(), "demo"),
		"-database", database, "-keep", "-timeout", "14m"}, []string{"KECE_WEBHOOK_KEY_FILE=" + keyFile})
	var base, adminTok string
	consoleLine := regexp.MustCompile(`admin console: (\S+)/console/\s+\(log in with the admin token (\S+)\)`)
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(logPath)
		if bytes.Contains(b, []byte("demo failed")) {
			t.Fatalf("the demo failed:\n%s", b)
		}
		if m := consoleLine.FindSubmatch(b); m != nil {
			base, adminTok = string(m[1]), string(m[2])
		}
		return bytes.Contains(b, []byte("==> demo passed"))
	}, 12*time.Minute, time.Second, "the demo never passed")

	admin, err := adminapi.NewClientWithResponses(base, adminapi.WithRequestEditorFn(controltest.Bearer(adminTok)))
	require.NoError(t, err)
	hookURL := deadLetter(t, ctx, bin, base, database, admin)
	addNode(t, ctx, bin, base, adminTok, admin, "python", "python-02")
	rejudged := rejudgeOne(t, ctx, admin)
	draining := drainOne(t, ctx, admin, "demo-python")

	b := newBrowser(t, exe, base)
	b.open("/status")
	b.checkPage("status")
	b.requireLogin("/console/")
	b.checkPage("login")
	b.fill("#token", adminTok)
	require.EqualValues(t, http.StatusOK, b.submit("form[action='/console/login'] button"))
	b.waitFor("every pool ready, python on its second node", `document.querySelector("#overview-live").innerText.includes("5 of 5")`, time.Minute)
	b.checkPage("overview")
	for _, p := range []struct{ name, path string }{
		{"host-groups", "/console/host-groups"}, {"nodes", "/console/nodes"}, {"node", "/console/nodes/" + draining},
		{"jobs", "/console/jobs"}, {"job", "/console/jobs/" + rejudged}, {"events", "/console/events?state=DEAD"},
		{"webhooks", "/console/webhooks"}, {"audit", "/console/audit"}, {"reconcile", "/console/reconcile?run=1"},
	} {
		b.open(p.path)
		switch p.name {
		case "events":
			require.Contains(t, b.text("#events-live"), "shots-webhook", "the dead-lettered event is listed")
		case "webhooks":
			require.Contains(t, b.text("main table"), hookURL, "the webhook of group shots is listed")
		}
		b.checkPage(p.name)
	}
	require.Contains(t, b.text("main"), "OK", "reconcile finds nothing on the populated system")
}

// deadLetter makes one settlement event of group "shots" go DEAD, the way
// an operator sets a webhook up today (docs/operations.md, "Settlement
// webhook"): a business token joins group shots (DATABASE submissions
// only, so the rejudge's settlement is not the group's), the admin API
// gives the group a webhook (one attempt, to a port nobody listens on; the
// control plane generates the signing secret and seals it with the webhook
// key), and that token publishes and enqueues one mysql submission. It
// returns the webhook's URL.
func deadLetter(t *testing.T, ctx context.Context, bin, base, database string, admin *adminapi.ClientWithResponses) string {
	t.Helper()
	tok, err := runOut(ctx, filepath.Join(bin, "kece-control"), "token", "create", "--kind", "business", "--name", "shots-oj",
		"--consumer-group", "shots", "--submission-types", "DATABASE", "--mysql-dsn", "root@tcp(127.0.0.1:33061)/"+database)
	require.NoError(t, err, tok)
	hookURL := "http://" + freeAddr(t) + "/kece/events"
	one, conc, timeout := 1, 2, int64(5000)
	reason := adminapi.Reason("screenshots: the OJ's receiver for group shots")
	wr, err := admin.PutWebhookGroupWithResponse(ctx, "shots", adminapi.WebhookGroupPut{Url: hookURL, MaxAttempts: &one,
		Concurrency: &conc, TimeoutMs: &timeout, Reason: &reason})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, wr.StatusCode(), string(wr.Body))
	require.NotNil(t, wr.JSON201.Secret, "the control plane generates the group's first secret")
	require.Len(t, wr.JSON201.WebhookGroup.Secrets, 1)
	require.True(t, wr.JSON201.WebhookGroup.Secrets[0].Readable, "the secret opens with the control plane's key")
	biz, err := businessapi.NewClientWithResponses(base, businessapi.WithRequestEditorFn(controltest.Bearer(strings.TrimSpace(tok))))
	require.NoError(t, err)
	pm, err := biz.PublishManifestWithResponse(ctx, problems.BigCities())
	require.NoError(t, err)
	// The demo published the same problem: 200 "already published".
	published := pm.JSON201
	if published == nil {
		published = pm.JSON200
	}
	require.NotNil(t, published, "%d %s", pm.StatusCode(), pm.Body)
	en, err := biz.EnqueueSubmissionWithResponse(ctx, &businessapi.EnqueueSubmissionParams{}, businessapi.SubmissionCreate{
		SubmissionType: "DATABASE", SubmissionId: "shots-webhook", Language: "mysql", Source: problems.BigCitiesAnswer,
		ManifestId: published.ManifestId})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, en.StatusCode(), string(en.Body))
	dead := adminapi.DeliveryStateDead
	require.Eventually(t, func() bool {
		r, err := admin.ListSettlementEventsWithResponse(ctx, &adminapi.ListSettlementEventsParams{State: &dead})
		if err != nil || r.JSON200 == nil {
			return false
		}
		for _, e := range r.JSON200.Events {
			if e.SubmissionId == "shots-webhook" {
				return true
			}
		}
		return false
	}, 3*time.Minute, time.Second, "the webhook event never went DEAD")
	return hookURL
}

// webhookKeyFile writes a new webhook encryption key (kece-control
// webhook-key new) to a file only its owner reads, as the control plane
// requires of a secret file.
func webhookKeyFile(t *testing.T, ctx context.Context, kececontrol string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, kececontrol, "webhook-key", "new")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	key, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	require.True(t, bytes.HasPrefix(key, []byte("kecekey_")), "%s", key)
	f := filepath.Join(t.TempDir(), "webhook.key")
	require.NoError(t, os.WriteFile(f, key, 0o600))
	return f
}

// rejudgeOne rejudges the newest accepted cpp submission and returns the new
// generation's job id.
func rejudgeOne(t *testing.T, ctx context.Context, admin *adminapi.ClientWithResponses) string {
	t.Helper()
	st, kind, limit := adminapi.JobStateCompleted, adminapi.JobKind("SUBMISSION"), adminapi.Limit(1)
	pool, ac := adminapi.Pool("cpp"), adminapi.VerdictStatusAC
	l, err := admin.ListJudgeJobsWithResponse(ctx, &adminapi.ListJudgeJobsParams{State: &st, Kind: &kind, Pool: &pool, Verdict: &ac, Limit: &limit})
	require.NoError(t, err)
	require.NotEmpty(t, l.JSON200.Jobs)
	r, err := admin.RejudgeJudgeJobWithResponse(ctx, l.JSON200.Jobs[0].JobId, adminapi.ReasonRequest{Reason: "checker fixed"})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, r.StatusCode(), string(r.Body))
	require.Eventually(t, func() bool {
		j, err := admin.GetJudgeJobWithResponse(ctx, r.JSON202.JobId)
		return err == nil && j.JSON200 != nil && j.JSON200.Job.State == adminapi.JobStateCompleted
	}, 3*time.Minute, time.Second, "the rejudge never completed")
	return r.JSON202.JobId
}

// drainOne drains the named node with an hour's deadline and returns its
// id.
func drainOne(t *testing.T, ctx context.Context, admin *adminapi.ClientWithResponses, name string) string {
	t.Helper()
	l, err := admin.ListJudgersWithResponse(ctx, &adminapi.ListJudgersParams{})
	require.NoError(t, err)
	for _, n := range l.JSON200.Judgers {
		if n.Name != name {
			continue
		}
		hour := int64(3600)
		d, err := admin.DrainJudgerWithResponse(ctx, n.NodeId, adminapi.DrainRequest{Reason: "host maintenance", DeadlineSeconds: &hour})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, d.StatusCode(), string(d.Body))
		return n.NodeId
	}
	t.Fatalf("no node %s", name)
	return ""
}

// addNode brings up one more node of pool the way an operator does: a host
// group, the node with its join code (admin API), kece-node join, then
// kece-node itself, and kecectl node verify and enable, each waiting.
func addNode(t *testing.T, ctx context.Context, bin, base, adminTok string, admin *adminapi.ClientWithResponses, pool, name string) {
	t.Helper()
	hg, err := admin.CreateHostGroupWithResponse(ctx, adminapi.HostGroupCreate{Name: "rack2-host01", SlotCapacity: 4})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, hg.StatusCode(), string(hg.Body))
	cr, err := admin.CreateJudgerWithResponse(ctx, adminapi.JudgerCreate{Name: name, Pool: adminapi.Pool(pool),
		HostGroupId: hg.JSON201.HostGroupId, Slots: 2})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, cr.StatusCode(), string(cr.Body))
	dir := t.TempDir()
	cred := filepath.Join(dir, "credential")
	out, err := runOut(ctx, filepath.Join(bin, "kece-node"), "join", "--control-url", base, "--pool", pool,
		"--credential-file", cred, "--join-code", cr.JSON201.JoinCode)
	require.NoError(t, err, out)
	start(t, "node-"+name, filepath.Join(bin, "kece-node"), nil, []string{"KECE_POOL=" + pool, "KECE_CONTROL_URL=" + base,
		"KECE_CREDENTIAL_FILE=" + cred, "KECE_LOCAL_SLOTS=2", "KECE_WORKSPACE=" + filepath.Join(dir, "work"),
		"KECE_CACHE_DIR=" + filepath.Join(dir, "cache"), "KECE_CACHE_MAX_BYTES=" + strconv.Itoa(256<<20), "KECE_LISTEN=" + freeAddr(t)})
	require.Eventually(t, func() bool {
		r, err := admin.GetJudgerWithResponse(ctx, cr.JSON201.Node.NodeId)
		return err == nil && r.JSON200 != nil && r.JSON200.Node.Joined && r.JSON200.Node.Health.Online
	}, 2*time.Minute, time.Second, "node %s never came online", name)
	kecectl := func(args ...string) {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "kecectl"), args...)
		cmd.Env = append(os.Environ(), "KECE_ADMIN_URL="+base, "KECE_ADMIN_TOKEN="+adminTok)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "kecectl %s\n%s", strings.Join(args, " "), out)
	}
	kecectl("node", "verify", name, "--reason", "new host rack2-host01", "--wait", "--timeout", "5m")
	kecectl("node", "enable", name, "--reason", "check passed", "--wait", "--timeout", "2m")
}

// startDemo runs kece-demo until the test ends and returns its log. The
// demo stops its control plane and nodes on SIGTERM (up to 20 s each), so
// it gets a minute before it is killed.
func startDemo(t *testing.T, bin string, args, env []string) string {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "demo.log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("--- demo log (tail) ---\n%s", b[max(0, len(b)-6000):])
			}
		}
	})
	return logPath
}
