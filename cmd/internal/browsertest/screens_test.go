package browsertest

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
// in real sandboxes), then a rejudge, a draining node and a dead-lettered
// settlement event (a webhook to an endpoint that refuses, one attempt).
// It runs only when KECE_SCREENSHOT_DIR says where the pictures go: it
// needs Docker with the runtime images and takes minutes.
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

	// The demo's control plane delivers group "shots" by webhook to a port
	// nobody listens on, giving up after one attempt; the demo's own
	// events (group default) are pulled as always.
	secret, err := runOut(ctx, filepath.Join(bin, "kece-control"), "webhook-secret", "new")
	require.NoError(t, err, secret)
	const database = "kece_screenshots"
	logPath := startDemo(t, filepath.Join(bin, "kece-demo"), []string{"-bin", bin, "-work", filepath.Join(t.TempDir(), "demo"),
		"-database", database, "-keep", "-timeout", "14m"}, []string{"KECE_WEBHOOK_URL=http://" + freeAddr(t) + "/hook",
		"KECE_WEBHOOK_SECRET=" + strings.TrimSpace(secret), "KECE_WEBHOOK_GROUP=shots", "KECE_WEBHOOK_MAX_ATTEMPTS=1"})
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
	deadLetter(t, ctx, bin, base, database, admin)
	rejudged := rejudgeOne(t, ctx, admin)
	draining := drainOne(t, ctx, admin, "python")

	b := newBrowser(t, exe, base)
	b.open("/status")
	b.checkPage("status")
	b.requireLogin("/console/")
	b.checkPage("login")
	b.fill("#token", adminTok)
	require.EqualValues(t, http.StatusOK, b.submit("form[action='/console/login'] button"))
	b.waitFor("every pool ready but the draining one", `document.querySelector("#overview-live").innerText.includes("4 of 5")`, time.Minute)
	b.checkPage("overview")
	for _, p := range []struct{ name, path string }{
		{"host-groups", "/console/host-groups"}, {"nodes", "/console/nodes"}, {"node", "/console/nodes/" + draining},
		{"jobs", "/console/jobs"}, {"job", "/console/jobs/" + rejudged}, {"events", "/console/events?state=DEAD"},
		{"audit", "/console/audit"}, {"reconcile", "/console/reconcile?run=1"},
	} {
		b.open(p.path)
		b.checkPage(p.name)
	}
	require.Contains(t, b.text("main"), "OK", "reconcile finds nothing on the populated system")
}

// deadLetter makes one settlement event of group "shots" go DEAD: a
// business token of that group publishes and enqueues one mysql
// submission; the webhook's only attempt is refused.
func deadLetter(t *testing.T, ctx context.Context, bin, base, database string, admin *adminapi.ClientWithResponses) {
	t.Helper()
	tok, err := runOut(ctx, filepath.Join(bin, "kece-control"), "token", "create", "--kind", "business", "--name", "shots-oj",
		"--consumer-group", "shots", "--mysql-dsn", "root@tcp(127.0.0.1:33061)/"+database)
	require.NoError(t, err, tok)
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
		return err == nil && r.JSON200 != nil && len(r.JSON200.Events) > 0
	}, 3*time.Minute, time.Second, "the webhook event never went DEAD")
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

// drainOne drains the node of pool with an hour's deadline and returns
// its id.
func drainOne(t *testing.T, ctx context.Context, admin *adminapi.ClientWithResponses, pool string) string {
	t.Helper()
	l, err := admin.ListJudgersWithResponse(ctx, &adminapi.ListJudgersParams{})
	require.NoError(t, err)
	for _, n := range l.JSON200.Judgers {
		if string(n.Pool) != pool {
			continue
		}
		hour := int64(3600)
		d, err := admin.DrainJudgerWithResponse(ctx, n.NodeId, adminapi.DrainRequest{Reason: "host maintenance", DeadlineSeconds: &hour})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, d.StatusCode(), string(d.Body))
		return n.NodeId
	}
	t.Fatalf("no %s node", pool)
	return ""
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
