package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/manifest"
)

type ctl struct {
	t   *testing.T
	env map[string]string
}

type outcome struct {
	code           int
	stdout, stderr string
}

func (c ctl) run(args ...string) outcome {
	c.t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb, func(k string) string { return c.env[k] })
	return outcome{code, out.String(), errb.String()}
}

// ok runs a command that must succeed.
func (c ctl) ok(args ...string) string {
	c.t.Helper()
	o := c.run(args...)
	require.Equal(c.t, exitOK, o.code, "kecectl %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), o.stdout, o.stderr)
	return o.stdout
}

// fails runs a command that must exit with code and name want on stderr.
func (c ctl) fails(code int, want string, args ...string) outcome {
	c.t.Helper()
	o := c.run(args...)
	require.Equal(c.t, code, o.code, "kecectl %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), o.stdout, o.stderr)
	require.Contains(c.t, o.stderr, want)
	return o
}

var joinCodeRE = regexp.MustCompile(`kjc_[A-Za-z0-9_-]+`)

func machine(t *testing.T, url, token string) *machineapi.ClientWithResponses {
	t.Helper()
	c, err := machineapi.NewClientWithResponses(url, machineapi.WithRequestEditorFn(controltest.Bearer(token)))
	require.NoError(t, err)
	return c
}

// joinNode joins with a code, opens a session and heartbeats.
func joinNode(t *testing.T, url, code, boot string) *machineapi.ClientWithResponses {
	t.Helper()
	ctx := context.Background()
	j, err := machine(t, url, "").JoinNodeWithResponse(ctx, machineapi.JoinRequest{JoinCode: code})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, j.StatusCode(), string(j.Body))
	s, err := machine(t, url, j.JSON201.Credential).OpenSessionWithResponse(ctx, machineapi.SessionRequest{BootId: boot, ProtocolVersion: 1})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, s.StatusCode(), string(s.Body))
	nc := machine(t, url, s.JSON200.SessionToken)
	hb, err := nc.SendHeartbeatWithResponse(ctx, machineapi.HeartbeatRequest{RuntimeVersion: "g++ 12",
		Dependencies: []machineapi.Dependency{{Name: "docker", Healthy: true}}, LocalSlots: 2})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, hb.StatusCode(), string(hb.Body))
	return nc
}

func passCheck(t *testing.T, nc *machineapi.ClientWithResponses) {
	t.Helper()
	ctx := context.Background()
	r, err := nc.ClaimJobsWithResponse(ctx, machineapi.ClaimRequest{FreeSlots: 1, WaitMs: 0})
	require.NoError(t, err)
	require.Len(t, r.JSON200.Jobs, 1)
	job := r.JSON200.Jobs[0]
	require.Equal(t, machineapi.JobKindCheck, job.Kind)
	v := &machineapi.Verdict{Status: machineapi.VerdictStatusAC}
	for _, c := range job.Manifest.Cases {
		v.Cases = append(v.Cases, machineapi.CaseResult{CaseId: c.CaseId, Status: machineapi.VerdictStatusAC, Score: float64(c.Weight)})
		v.Score += float64(c.Weight)
	}
	v.MaxScore = int64(v.Score)
	res, err := nc.SubmitResultWithResponse(ctx, job.JobId, machineapi.ResultRequest{LeaseEpoch: job.LeaseEpoch,
		Outcome: machineapi.OutcomeVerdict, Verdict: v})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode(), string(res.Body))
}

func TestKecectlEndToEnd(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	c := ctl{t: t, env: map[string]string{"KECE_ADMIN_URL": env.URL, "KECE_ADMIN_TOKEN": env.Admin}}

	// Host groups.
	out := c.ok("host-group", "create", "--name", "rack-1", "--slots", "4")
	require.Contains(t, out, "rack-1, 4 slots, revision 1")
	gid := strings.Fields(out)[2]
	out = c.ok("host-group", "list")
	require.Regexp(t, `(?m)^ID\s+NAME\s+CAPACITY`, out)
	require.Regexp(t, `(?m)^`+gid+`\s+rack-1\s+4\s+0\s+0\s+1`, out)
	c.ok("host-group", "resize", gid, "--slots", "6")
	c.fails(exitFailed, "REVISION_STALE", "host-group", "resize", gid, "--slots", "5", "--revision", "1")
	var groups adminapi.HostGroupList
	require.NoError(t, json.Unmarshal([]byte(c.ok("--json", "host-group", "list")), &groups))
	require.Equal(t, int32(6), groups.HostGroups[0].SlotCapacity)

	// A node from registration to enabled.
	out = c.ok("node", "create", "--name", "judge-1", "--pool", "cpp", "--group", gid, "--slots", "2")
	require.Contains(t, out, "PENDING_VERIFICATION")
	code := joinCodeRE.FindString(out)
	require.NotEmpty(t, code, out)
	nid := strings.Fields(out)[1]
	require.Regexp(t, `(?m)^`+nid+`\s+judge-1\s+cpp\s+`+gid+`\s+PENDING_VERIFICATION\s+no\s+never`, c.ok("node", "list"))
	nc := joinNode(t, env.URL, code, "boot-kecectl-1")
	c.fails(exitFailed, "NODE_ALREADY_JOINED", "node", "join-code", nid)

	o := c.fails(exitFailed, "CHECK_REQUIRED (HTTP 409)", "node", "enable", nid, "--reason", "too early")
	require.Contains(t, o.stderr, "hint: run 'kecectl node verify ID'")
	c.fails(exitUsage, "--reason is required", "node", "verify", nid)
	require.Contains(t, c.ok("node", "verify", nid, "--reason", "new host"), "queued as job")
	passCheck(t, nc)
	require.Contains(t, c.ok("node", "enable", nid, "--reason", "check passed"), "ENABLED")
	out = c.ok("node", "show", nid)
	require.Contains(t, out, "PASSED")
	require.Contains(t, out, "node.enable")
	require.Contains(t, out, "check passed")
	require.Contains(t, out, "docker")
	require.Regexp(t, `(?m)^`+nid+`\s+judge-1\s+cpp\s+\S+\s+ENABLED\s+yes`, c.ok("node", "list", "--state", "enabled"))

	c.ok("node", "resize", nid, "--slots", "1", "--reason", "smaller host")
	c.fails(exitFailed, "REVISION_STALE", "node", "resize", nid, "--slots", "2", "--reason", "x", "--revision", "1")

	// Jobs.
	manID := env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 100})
	jobID := strconv.FormatInt(env.Enqueue("ALGO", "k-1", "cpp17", "int main(){}", manID), 10)
	out = c.ok("job", "list", "--type", "ALGO")
	require.Regexp(t, `(?m)^`+jobID+`\s+SUBMISSION\s+ALGO/k-1\s+1\s+cpp\s+QUEUED`, out)
	require.Contains(t, c.ok("job", "show", jobID), "attempts:")
	out = c.ok("job", "rejudge", jobID, "--reason", "tests fixed")
	require.Contains(t, out, "generation 2")
	c.fails(exitFailed, "JOB_NOT_CURRENT", "job", "rejudge", jobID, "--reason", "again")
	newID := regexp.MustCompile(`job (\d+)`).FindStringSubmatch(out)[1]
	require.Contains(t, c.ok("job", "cancel", newID, "--reason", "not needed"), "CANCELLED")
	c.fails(exitFailed, "JOB_NOT_FOUND", "job", "show", "999999")
	c.fails(exitUsage, "not an id", "job", "show", "abc")

	// Dead letters.
	require.NotContains(t, c.ok("events", "dead"), "ALGO/")
	c.fails(exitFailed, "EVENT_NOT_FOUND", "events", "redeliver", "999999", "--reason", "x")

	// Drain, disable, rotate, revoke.
	require.Contains(t, c.ok("node", "drain", nid, "--reason", "maintenance"), "DRAINING")
	require.Contains(t, c.ok("node", "disable", nid, "--reason", "maintenance"), "DISABLED")
	require.Regexp(t, `kjc_`, c.ok("node", "rotate", nid, "--reason", "credential leaked"))
	require.Contains(t, c.ok("node", "revoke", nid, "--reason", "host retired"), "revoked")
	c.fails(exitFailed, "NODE_REVOKED", "node", "enable", nid, "--reason", "x")
	c.fails(exitFailed, "NO_ADDRESS", "node", "probe", nid)

	// Reconcile: clean, then a planted violation gives exit 3.
	require.Contains(t, c.ok("reconcile"), "0 violations")
	var rep adminapi.ReconcileReport
	require.NoError(t, json.Unmarshal([]byte(c.ok("reconcile", "--json")), &rep))
	require.True(t, rep.Ok)
	_, err := env.DB.ExecContext(env.Ctx, `UPDATE judge_submission SET current_job_id = ? WHERE submission_id = 'k-1'`, jobID)
	require.NoError(t, err)
	o = c.run("reconcile")
	require.Equal(t, exitViolation, o.code, o.stderr)
	require.Contains(t, o.stdout, "POINTER_NOT_HIGHEST_GENERATION")
}

func TestKecectlConfigurationErrors(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	none := ctl{t: t, env: map[string]string{}}
	none.fails(exitUsage, "set KECE_ADMIN_URL or pass --url", "node", "list")
	none.fails(exitUsage, "no admin token", "--url", env.URL, "node", "list")
	require.Contains(t, none.ok("help"), "node create --name NAME")
	none.fails(exitUsage, "no command given")

	c := ctl{t: t, env: map[string]string{"KECE_ADMIN_URL": env.URL, "KECE_ADMIN_TOKEN": env.Admin}}
	c.fails(exitUsage, "unknown resource", "nodes", "list")
	c.fails(exitUsage, "unknown verb", "node", "explode")
	c.fails(exitUsage, "needs a verb", "node")

	// A business token in the token file is refused by the admin API.
	tf := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tf, []byte(env.Business+"\n"), 0o600))
	o := c.fails(exitFailed, "UNAUTHENTICATED (HTTP 401)", "--token-file", tf, "host-group", "list")
	require.Contains(t, o.stderr, "hint:")
	// The admin token from a file works.
	require.NoError(t, os.WriteFile(tf, []byte(env.Admin+"\n"), 0o600))
	c.ok("--token-file", tf, "host-group", "list")
	c.fails(exitUsage, "cannot read --token-file", "--token-file", filepath.Join(t.TempDir(), "missing"), "host-group", "list")

	// Nothing listens here: a network error names the URL to fix.
	dead := ctl{t: t, env: map[string]string{"KECE_ADMIN_URL": "http://127.0.0.1:1", "KECE_ADMIN_TOKEN": env.Admin}}
	dead.fails(exitFailed, "cannot reach the control plane at http://127.0.0.1:1", "reconcile")
}
