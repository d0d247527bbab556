// Package examples_test runs the example clients in examples/ against a real
// control plane (MariaDB through control/controltest), so they cannot rot.
package examples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/ratelimit"
	"github.com/kece-oj/kece/control/replica"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/control/webhook"
	"github.com/kece-oj/kece/engine"
)

const client = "python/kece_client.py"

// tool returns the path of a command the examples need; CI
// (KECE_REQUIRE_MYSQL=1) installs them, so there a missing one fails.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("KECE_REQUIRE_MYSQL") == "1" {
			t.Fatalf("%s is required for the example tests", name)
		}
		t.Skipf("%s not installed", name)
	}
	return p
}

// python3 returns the interpreter the Python example runs with.
func python3(t *testing.T) string { return tool(t, "python3") }

// testNode is a judge node speaking the machine protocol over HTTP: it
// claims, downloads each case's input and expected output by digest, runs
// the Python submission on the host with python3 (no sandbox: the subject
// here is the business API, not the engine) and posts the verdict.
func testNode(t *testing.T, env *controltest.Env, py string, done <-chan struct{}) {
	t.Helper()
	n := env.NewNode("python", 1, 1)
	anon, err := machineapi.NewClientWithResponses(env.URL)
	require.NoError(t, err)
	j, err := anon.JoinNodeWithResponse(env.Ctx, machineapi.JoinRequest{JoinCode: n.JoinCode})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, j.StatusCode(), string(j.Body))
	cc, err := machineapi.NewClientWithResponses(env.URL, machineapi.WithRequestEditorFn(controltest.Bearer(j.JSON201.Credential)))
	require.NoError(t, err)
	s, err := cc.OpenSessionWithResponse(env.Ctx, machineapi.SessionRequest{BootId: "example-boot", ProtocolVersion: 1})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, s.StatusCode(), string(s.Body))
	env.ForceEnable(n.ID)
	c, err := machineapi.NewClientWithResponses(env.URL, machineapi.WithRequestEditorFn(controltest.Bearer(s.JSON200.SessionToken)))
	require.NoError(t, err)
	raw, err := machineapi.NewClient(env.URL, machineapi.WithRequestEditorFn(controltest.Bearer(s.JSON200.SessionToken)))
	require.NoError(t, err)
	// This stand-in node judges classic and subtask problems, and says so: a
	// node is handed only jobs whose problem types it reported.
	hb, err := c.SendHeartbeatWithResponse(env.Ctx, machineapi.HeartbeatRequest{RuntimeVersion: "native python",
		LocalSlots: 1, Dependencies: []machineapi.Dependency{},
		Features: &[]machineapi.Feature{machineapi.FeatureBatch, machineapi.FeatureSubtasks}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, hb.StatusCode(), string(hb.Body))

	download := func(job machineapi.ClaimedJob, sha string) []byte {
		resp, err := raw.DownloadArtifact(env.Ctx, job.JobId, sha, &machineapi.DownloadArtifactParams{XKeceLeaseEpoch: job.LeaseEpoch})
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
		return b
	}
	go func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			r, err := c.ClaimJobsWithResponse(env.Ctx, machineapi.ClaimRequest{FreeSlots: 1, WaitMs: 1000})
			if err != nil || r.JSON200 == nil {
				continue
			}
			for _, job := range r.JSON200.Jobs {
				v := judgeNatively(t, job, func(cs machineapi.ManifestCase) bool {
					in, want := download(job, cs.InputSha256), download(job, cs.OutputSha256)
					cmd := exec.Command(py, "-c", job.Submission.Source)
					cmd.Stdin = bytes.NewReader(in)
					got, _ := cmd.Output()
					return strings.TrimSpace(string(got)) == strings.TrimSpace(string(want))
				})
				res, err := c.SubmitResultWithResponse(env.Ctx, job.JobId, machineapi.ResultRequest{LeaseEpoch: job.LeaseEpoch,
					Outcome: machineapi.OutcomeVerdict, Verdict: &v})
				if err != nil || res.StatusCode() != http.StatusOK {
					t.Errorf("result of job %s refused: %v %s", job.JobId, err, res.Body)
				}
			}
		}
	}()
}

// judgeNatively judges a claimed job with pass (AC or WA per case) by the
// engine's own rules: subtasks in order (a min subtask stops at its first
// WA, a dependent of a subtask that is not AC is skipped), scores and the
// job status, so the control plane's result check sees what a node sends.
func judgeNatively(t *testing.T, job machineapi.ClaimedJob, pass func(machineapi.ManifestCase) bool) machineapi.Verdict {
	m := job.Manifest
	task := engine.Task{}
	index := map[string]int{}
	for i, cs := range m.Cases {
		task.Cases = append(task.Cases, engine.Case{ID: cs.CaseId, Weight: cs.Weight})
		index[cs.CaseId] = i
	}
	run := func(i int) (engine.CaseResult, error) {
		if pass(m.Cases[i]) {
			return engine.CaseResult{ID: m.Cases[i].CaseId, Status: engine.StatusAccepted, Fraction: 1, Score: float64(m.Cases[i].Weight)}, nil
		}
		return engine.CaseResult{ID: m.Cases[i].CaseId, Status: engine.StatusWrongAnswer}, nil
	}
	var cases []engine.CaseResult
	var subs []engine.SubtaskResult
	if m.Subtasks != nil {
		for _, st := range *m.Subtasks {
			s := engine.Subtask{ID: st.SubtaskId, Scoring: engine.Scoring(st.Scoring)}
			for _, id := range st.Cases {
				s.Cases = append(s.Cases, index[id])
			}
			if st.DependsOn != nil {
				s.DependsOn = *st.DependsOn
			}
			task.Subtasks = append(task.Subtasks, s)
		}
		var err error
		cases, subs, err = engine.JudgeSubtasks(task, run, func() {})
		require.NoError(t, err)
	} else {
		for i := range m.Cases {
			cr, _ := run(i)
			cases = append(cases, cr)
		}
	}
	v := machineapi.Verdict{Status: machineapi.VerdictStatus(engine.JobStatus(cases)), Cases: []machineapi.CaseResult{}, Score: engine.SumScores(cases)}
	for _, c := range task.Cases {
		v.MaxScore += c.Weight
	}
	for _, c := range cases {
		v.Cases = append(v.Cases, machineapi.CaseResult{CaseId: c.ID, Status: machineapi.VerdictStatus(c.Status), Score: c.Score, TimeMs: 1, WallMs: 1, Message: c.Message})
	}
	if subs != nil {
		v.Score = engine.SumSubtasks(subs)
		wire := []machineapi.SubtaskResult{}
		for _, st := range subs {
			wire = append(wire, machineapi.SubtaskResult{SubtaskId: st.ID, Status: machineapi.VerdictStatus(st.Status), Score: st.Score, MaxScore: st.MaxScore})
		}
		v.Subtasks = &wire
	}
	return v
}

// TestPythonQuickstart runs examples/python/kece_client.py quickstart — the
// business flow of docs/business.md: artifacts, manifest, idempotent
// enqueue, status, settlement event — against a real control plane and a
// node that judges through the machine API.
func TestPythonQuickstart(t *testing.T) {
	t.Parallel()
	py := python3(t)
	// A lease long enough for python3 runs on a loaded machine; this node
	// does not renew. The token's budget (2 requests, 2/s) is below what the
	// flow sends at once: the client must wait out some 429s.
	env := controltest.Start(t, controltest.Options{Store: store.Config{LeaseTTL: time.Minute},
		Replica: replica.Config{RateLimit: &ratelimit.Config{Default: ratelimit.Limit{Rate: 2, Burst: 2}}}})
	done := make(chan struct{})
	defer close(done)
	testNode(t, env, py, done)

	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(env.Business+"\n"), 0o600))
	ctx, cancel := context.WithTimeout(env.Ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, client, "--url", env.URL, "--token-file", tokenFile, "quickstart", "--id", "py-1", "--timeout", "60")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", out, stderr.String())
	require.Contains(t, stderr.String(), `"code": "RATE_LIMITED"`, "the client was limited, waited and went on")

	steps := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		steps[m["step"].(string)] = m
	}
	require.Equal(t, "AC", steps["status"]["status"], string(out))
	require.EqualValues(t, 100, steps["status"]["score"])
	require.Equal(t, map[string]any{"small": "AC 40/40", "large": "AC 60/60"}, steps["status"]["subtasks"], string(out))
	require.Equal(t, "AC", steps["event"]["status"])

	// What the client did is what the control plane holds.
	st, err := env.Store.Jobs().SubmissionStatus(env.Ctx, "ALGO", "py-1")
	require.NoError(t, err)
	require.Equal(t, steps["enqueued"]["jobId"], strconv.FormatInt(st.JobID, 10))
	var acked string
	require.NoError(t, env.DB.QueryRow(`SELECT state FROM judge_settlement_event WHERE job_id = ?`, st.JobID).Scan(&acked))
	require.Equal(t, store.EventDelivered, acked, "the example acknowledged its event")
}

// TestPythonVerifiesWebhooks: the example's Standard Webhooks verifier
// accepts real deliveries of the webhook sender — signed with a whsec_
// secret and with an older raw secret — and refuses a tampered body.
func TestPythonVerifiesWebhooks(t *testing.T) {
	t.Parallel()
	py := python3(t)
	for _, secretText := range []string{webhook.NewSecret().String(), "an-old-raw-secret-file-of-32-bytes"} {
		env := controltest.Start(t, controltest.Options{})
		_, err := env.DB.Exec(`INSERT INTO judge_settlement_event (job_id, event_type, submission_type, submission_id, generation, payload)
			VALUES (7, 'SETTLED', 'ALGO', 's-7', 1, '{"jobId":"7","submissionType":"ALGO","submissionId":"s-7","generation":1,"status":"CANCELLED"}')`)
		require.NoError(t, err)
		type delivery struct {
			h    http.Header
			body []byte
		}
		got := make(chan delivery, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			select {
			case got <- delivery{r.Header.Clone(), b}:
			default:
			}
		}))
		t.Cleanup(srv.Close)
		secrets, err := webhook.ParseSecrets(secretText)
		require.NoError(t, err)
		sender, err := webhook.New(webhook.Config{URL: srv.URL, Secrets: secrets, PollInterval: 10 * time.Millisecond}, env.Store, nil)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(env.Ctx)
		stopped := make(chan struct{})
		go func() { defer close(stopped); sender.Run(ctx) }()
		var d delivery
		select {
		case d = <-got:
		case <-time.After(20 * time.Second):
			t.Fatal("no delivery")
		}
		cancel()
		<-stopped

		verify := func(body []byte) (string, error) {
			cmd := exec.Command(py, client, "verify-webhook", "--secret", secrets[0].String(),
				"--id", d.h.Get("webhook-id"), "--timestamp", d.h.Get("webhook-timestamp"), "--signature", d.h.Get("webhook-signature"))
			cmd.Stdin = bytes.NewReader(body)
			out, err := cmd.Output()
			return strings.TrimSpace(string(out)), err
		}
		out, err := verify(d.body)
		require.NoError(t, err, out)
		require.Equal(t, "valid", out)
		out, err = verify(bytes.Replace(d.body, []byte("CANCELLED"), []byte("AC"), 1))
		require.Error(t, err, "a tampered body is refused")
		require.Equal(t, "invalid", out)
	}
}

// quickstartBlock returns the first sh block under "## Quick start" in
// docs/business.md: the session users copy.
func quickstartBlock(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/business.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(doc), "\n## Quick start")
	require.True(t, ok, "docs/business.md has a Quick start section")
	_, rest, ok = strings.Cut(rest, "```sh\n")
	require.True(t, ok, "the Quick start has an sh block")
	block, _, ok := strings.Cut(rest, "\n```")
	require.True(t, ok)
	return block
}

// TestCurlQuickstartInDocs runs the curl session that opens
// docs/business.md, as pasted into bash, against a real control plane with
// a node judging through the machine API.
func TestCurlQuickstartInDocs(t *testing.T) {
	t.Parallel()
	py := python3(t)
	bash, _ := tool(t, "bash"), tool(t, "curl")
	env := controltest.Start(t, controltest.Options{Store: store.Config{LeaseTTL: time.Minute}})
	done := make(chan struct{})
	defer close(done)
	testNode(t, env, py, done)

	ctx, cancel := context.WithTimeout(env.Ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "-euo", "pipefail", "-c", quickstartBlock(t))
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "KECE="+env.URL, "TOKEN="+env.Business)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	text := string(out)
	require.Contains(t, text, `"manifestId":"`)
	require.Regexp(t, `\{"generation":1,"jobId":"\d+","status":"PENDING"\}`, text)
	require.Regexp(t, `"status":"AC","statusVersion"`, text, "the verdict is printed")
	require.Regexp(t, `"eventType":"SETTLED"`, text)
	require.Regexp(t, `\{"acked":\["\d+"\],"notHeld":\[\]\}`, text, "the event is acknowledged")
	var left int
	require.NoError(t, env.DB.QueryRow(`SELECT COUNT(*) FROM judge_settlement_event WHERE state <> 'DELIVERED'`).Scan(&left))
	require.Zero(t, left)
}
