package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/manifest"
	"gopkg.in/yaml.v3"
)

// The admin's whole first session against a real control plane on MariaDB:
// resources by name, -o everywhere, verify/enable --wait.
func TestKecectlEndToEnd(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	c := ctl{t: t, env: map[string]string{"KECE_ADMIN_URL": env.URL, "KECE_ADMIN_TOKEN": env.Admin}}

	// Host groups, addressed by name.
	out := c.ok("host-group", "create", "--name", "rack-1", "--slots", "4")
	require.Contains(t, out, "rack-1, 4 slots, revision 1")
	gid := strings.Fields(out)[2]
	require.Regexp(t, `(?m)^`+gid+`\s+rack-1\s+4\s+0\s+0\s+1`, c.ok("host-group", "list"))
	c.ok("host-group", "resize", "rack-1", "--slots", "6")
	c.fails(exitFailed, "REVISION_STALE", "host-group", "resize", "rack-1", "--slots", "5", "--revision", "1")
	c.fails(exitFailed, `no host group named "rack-9"`, "host-group", "resize", "rack-9", "--slots", "5")
	groups := decode[adminapi.HostGroupList](t, c.ok("-o", "json", "host-group", "list"))
	require.Equal(t, int32(6), groups.HostGroups[0].SlotCapacity)
	var y map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(c.ok("host-group", "list", "-o", "yaml")), &y))
	require.Equal(t, "rack-1", y["hostGroups"].([]any)[0].(map[string]any)["name"])

	// A node from registration to enabled, by name, with a chosen code lifetime.
	out = c.ok("node", "create", "--name", "judge-1", "--pool", "cpp", "--group", "rack-1", "--slots", "2", "--code-ttl", "48h")
	require.Contains(t, out, "PENDING_VERIFICATION")
	require.Regexp(t, `on the host: kece-node join --control-url `+regexp.QuoteMeta(env.URL)+` --pool cpp --join-code kjc_\S+ --credential-file /var/lib/kece/node-judge-1/credential\n`, out)
	code := joinCodeRE.FindString(out)
	require.NotEmpty(t, code, out)
	nid := strings.Fields(out)[1]
	created := decode[adminapi.JudgerCreated](t, c.ok("node", "create", "--name", "judge-2", "--pool", "java", "--group", gid, "--slots", "1", "-o", "json"))
	require.WithinDuration(t, created.Node.CreatedAt.Add(60*60e9), created.JoinCodeExpiresAt, 60e9, "default lifetime 1h")
	require.Regexp(t, `(?m)^`+nid+`\s+judge-1\s+cpp\s+`+gid+`\s+PENDING_VERIFICATION\s+no\s+never`, c.ok("node", "list"))
	c.fails(exitFailed, "NAME_TAKEN", "node", "create", "--name", "judge-1", "--pool", "cpp", "--group", "rack-1", "--slots", "1")

	node := joinNode(t, env.URL, code, "cpp", "boot-kecectl-1")
	c.fails(exitFailed, "NODE_ALREADY_JOINED", "node", "join-code", "judge-1")
	require.Contains(t, c.ok("node", "join-code", "judge-2", "--code-ttl", "72h"), "new join code for node")

	o := c.fails(exitFailed, "CHECK_REQUIRED (HTTP 409)", "node", "enable", "judge-1", "--reason", "too early")
	require.Contains(t, o.stderr, "hint: run 'kecectl node verify NODE --wait' first")

	// verify --wait follows the check while the node runs it.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			jobs := node.claimWaiting(1, 2000)
			if len(jobs) == 1 {
				node.pass(jobs[0])
				return
			}
		}
	}()
	out = c.ok("node", "verify", "judge-1", "--reason", "new host", "--wait")
	<-done
	require.Regexp(t, `self-check \d+ PASSED`, out)

	// enable --wait returns once the node heartbeated after enabling.
	node.heartbeatUntilDone()
	out = c.ok("node", "enable", "judge-1", "--reason", "check passed", "--wait")
	require.Contains(t, out, "is ENABLED and online")
	out = c.ok("node", "show", "judge-1")
	require.Contains(t, out, "PASSED")
	require.Contains(t, out, "node.enable")
	require.Contains(t, out, "check passed")
	require.Contains(t, out, "runtime: kece-node v9.8.7; g++ 12")
	require.Regexp(t, `(?m)^`+nid+`\s+judge-1\s+cpp\s+\S+\s+ENABLED\s+yes\s+\S+\s+v9\.8\.7`, c.ok("node", "list", "--state", "enabled"))
	detail := decode[adminapi.JudgerDetail](t, c.ok("node", "show", nid, "-o", "json"))
	require.Equal(t, "judge-1", detail.Node.Name)

	c.ok("node", "resize", "judge-1", "--slots", "1", "--reason", "smaller host")
	c.fails(exitFailed, "REVISION_STALE", "node", "resize", "judge-1", "--slots", "2", "--reason", "x", "--revision", "1")

	// Jobs.
	manID := env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 100})
	jobID := strconv.FormatInt(env.Enqueue("ALGO", "k-1", "cpp17", "int main(){}", manID), 10)
	require.Regexp(t, `(?m)^`+jobID+`\s+SUBMISSION\s+ALGO/k-1\s+1\s+cpp\s+QUEUED`, c.ok("job", "list", "--type", "ALGO"))
	require.Contains(t, c.ok("job", "show", jobID), "attempts:")
	out = c.ok("job", "rejudge", jobID, "--reason", "tests fixed")
	require.Contains(t, out, "generation 2")
	c.fails(exitFailed, "JOB_NOT_CURRENT", "job", "rejudge", jobID, "--reason", "again")
	newID := regexp.MustCompile(`job (\d+)`).FindStringSubmatch(out)[1]
	require.Contains(t, c.ok("job", "cancel", newID, "--reason", "not needed"), "CANCELLED")
	c.fails(exitFailed, "JOB_NOT_FOUND", "job", "show", "999999")

	// Following a job: the node judges it while `job show --follow` watches
	// (JSON lines in a pipe), and `rejudge --wait` follows the new
	// generation to its verdict.
	judge := func(id string) chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				for _, j := range node.claimWaiting(1, 2000) {
					node.pass(j)
					if j.JobId == id {
						return
					}
				}
			}
		}()
		return done
	}
	followID := strconv.FormatInt(env.Enqueue("ALGO", "k-2", "cpp17", "int main(){}", manID), 10)
	judged := judge(followID)
	out = c.ok("job", "show", followID, "--follow")
	<-judged
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := decode[adminapi.JudgeJob](t, lines[len(lines)-1])
	require.Equal(t, adminapi.JobStateCompleted, last.State, out)
	require.Equal(t, adminapi.VerdictStatusAC, *last.Verdict)
	for _, l := range lines {
		require.Equal(t, followID, decode[adminapi.JudgeJob](t, l).JobId, "one JSON object per line")
	}
	// The job's phases, as its node sent them with the result.
	require.Regexp(t, `(?m)^phases:\n\s+LEASE\s+QUEUE\s+DOWNLOAD\s+SANDBOX\s+COMPILE\s+CHECKER\s+RUN\s+CHECK\s+EXECUTOR\s+TOTAL\s+CACHED\n`+
		`\s+1\s+\d+ms\s+4ms\s+210ms\s+1\.25s\s+0ms\s+30ms\s+2ms\s+1\.50s\s+1\.50s\s+checker\n`, c.ok("job", "show", followID))
	shown := decode[adminapi.JudgeJobDetail](t, c.ok("job", "show", followID, "-o", "json"))
	require.NotNil(t, shown.Attempts[0].Phases)
	require.EqualValues(t, 1250, shown.Attempts[0].Phases.CompileMs)
	require.NotContains(t, c.ok("job", "show", jobID), "phases:", "none for a job no node judged")
	// The node judges whatever it is given while rejudge --wait follows
	// the new generation (its id is known only once rejudge answers).
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, j := range node.claimWaiting(1, 500) {
				node.pass(j)
			}
		}
	}()
	rj := c.run("job", "rejudge", followID, "--reason", "follow it", "--wait", "-o", "json")
	close(stop)
	<-stopped
	require.Equal(t, exitOK, rj.code, rj.stderr)
	final := decode[adminapi.JudgeJobDetail](t, rj.stdout)
	require.Equal(t, adminapi.JobStateCompleted, final.Job.State)
	require.EqualValues(t, 2, final.Job.Generation)
	require.Contains(t, rj.stderr, "COMPLETED, 1/1 cases, verdict AC", "the progress goes to stderr with -o json")
	// A followed job that ends CANCELLED is exit 1; so is a timeout.
	c.fails(exitFailed, "the job did not complete: job "+newID, "job", "show", newID, "--follow")
	quiet := strconv.FormatInt(env.Enqueue("ALGO", "k-3", "cpp17", "int main(){}", manID), 10)
	c.fails(exitFailed, "gave up waiting after 200ms (--timeout): job "+quiet, "job", "show", quiet, "--follow", "--timeout", "200ms")

	// Search, the job page's generations and audit, the audit log, the verdict mix.
	out = c.ok("job", "list", "--submission", "ALGO/k-1")
	require.Regexp(t, `(?m)^`+newID+`\s+SUBMISSION\s+ALGO/k-1\s+2\s+cpp\s+CANCELLED\s+-`, out)
	require.Regexp(t, `(?m)^`+jobID+`\s+SUBMISSION\s+ALGO/k-1\s+1\s+cpp\s+`, out)
	found := decode[adminapi.JudgeJobList](t, c.ok("job", "list", "--submission", "ALGO/k-1", "--since", "1h", "-o", "json"))
	require.Len(t, found.Jobs, 2)
	require.Empty(t, decode[adminapi.JudgeJobList](t, c.ok("job", "list", "--until", "1h", "-o", "json")).Jobs)
	c.fails(exitUsage, "want TYPE/ID", "job", "list", "--submission", "k-1")
	c.fails(exitUsage, "--since \"yesterday\"", "job", "list", "--since", "yesterday")
	c.fails(exitFailed, "REQUEST_INVALID", "job", "list", "--verdict", "nope")
	require.Contains(t, c.ok("job", "show", newID), "generations:")
	out = c.ok("audit", "list", "--action", "job.cancel")
	require.Regexp(t, `(?m)^\d+\s+\S+\s+ADMIN:\S+\s+127\.0\.0\.1\s+job\.cancel\s+-\s+`+newID+`\s+not needed`, out)
	require.Contains(t, c.ok("audit", "list", "--node", "judge-1"), "node.create")
	require.Regexp(t, `(?m)^cpp\s+[1-9]\d*\s+\S+\s+.*CANCELLED [1-9]`, c.ok("pool", "verdicts"))
	c.fails(exitUsage, "--minutes must be 1..1440", "pool", "verdicts", "--minutes", "0")

	// Languages: the catalog, with the ready cpp node.
	out = c.ok("language", "list")
	require.Regexp(t, `(?m)^LANGUAGE\s+POOL\s+STANDARD`, out)
	require.Regexp(t, `(?m)^cpp17\s+cpp\s+`, out)
	langs := decode[adminapi.LanguageList](t, c.ok("language", "list", "-o", "json"))
	require.NotEmpty(t, langs.Languages)

	// Business tokens: scoped to types, in a consumer group; the secret
	// alone on stdout.
	o = c.run("token", "create", "--name", "algo-backend", "--submission-types", "ALGO", "--consumer-group", "algo")
	require.Equal(t, exitOK, o.code, o.stderr)
	require.Regexp(t, `^kbt_\S+\n$`, o.stdout)
	require.Contains(t, o.stderr, "types ALGO, consumer group algo")
	require.Regexp(t, `(?m)^algo-backend\s+ACTIVE\s+ALGO\s+algo\s+`, c.ok("token", "list"))
	require.Regexp(t, `(?m)^business-\d+\s+ACTIVE\s+\*\s+default\s+`, c.ok("token", "list"))
	c.fails(exitFailed, "NAME_TAKEN", "token", "create", "--name", "algo-backend")
	c.fails(exitFailed, "REQUEST_INVALID", "token", "create", "--name", "x", "--submission-types", "KECE_CHECK")
	// Its request budget: its own, changed, unlimited, back to the default.
	c.run("token", "create", "--name", "importer", "--rate", "5", "--burst", "20")
	require.Regexp(t, `(?m)^importer\s+ACTIVE\s+\*\s+default\s+5/s burst 20\s+`, c.ok("token", "list"))
	require.Contains(t, c.ok("token", "update", "importer", "--rate", "0.5", "--burst", "2"), "rate limit 0.5/s burst 2")
	require.Contains(t, c.ok("token", "update", "importer", "--rate", "0", "--burst", "0"), "rate limit unlimited")
	require.Contains(t, c.ok("token", "update", "importer", "--default-rate-limit"), "rate limit default")
	require.Regexp(t, `(?m)^importer\s+ACTIVE\s+\*\s+default\s+default\s+`, c.ok("token", "list"))
	c.fails(exitFailed, "rateLimit.burst", "token", "update", "importer", "--rate", "5", "--burst", "0")
	c.fails(exitUsage, "--rate and --burst go together", "token", "update", "importer", "--rate", "5")
	c.fails(exitUsage, "--rate R --burst B, or --default-rate-limit", "token", "update", "importer")
	c.fails(exitFailed, "TOKEN_NOT_FOUND", "token", "update", "nobody", "--default-rate-limit")
	require.Contains(t, c.ok("token", "revoke", "algo-backend", "--reason", "retired"), "is REVOKED")
	c.fails(exitFailed, "TOKEN_NOT_FOUND", "token", "revoke", "algo-backend", "--reason", "again")

	// Dead letters.
	require.NotContains(t, c.ok("events", "dead"), "ALGO/")
	require.Regexp(t, `(?m)^EVENT\s+GROUP\s+JOB`, c.ok("events", "dead", "--consumer-group", "algo"))
	c.fails(exitFailed, "EVENT_NOT_FOUND", "events", "redeliver", "999999", "--reason", "x")

	// Drain (nothing running: --wait returns at once), disable, rotate, revoke.
	require.Contains(t, c.ok("node", "drain", "judge-1", "--reason", "maintenance", "--wait"), "is drained: no lease left")
	// With -o json stdout carries only the final node; progress goes to stderr.
	o = c.run("node", "drain", "judge-1", "--reason", "again", "--wait", "-o", "json")
	require.Equal(t, exitOK, o.code, o.stderr)
	require.Equal(t, adminapi.DesiredStateDraining, decode[adminapi.Judger](t, o.stdout).DesiredState)
	require.Contains(t, o.stderr, "is drained")
	require.Contains(t, c.ok("node", "disable", "judge-1", "--reason", "maintenance"), "DISABLED")
	rot := decode[adminapi.JoinCodeIssued](t, c.ok("node", "rotate", "judge-1", "--reason", "credential leaked", "--code-ttl", "48h", "-o", "json"))
	require.Regexp(t, `^kjc_`, rot.JoinCode)
	require.WithinDuration(t, time.Now().Add(48*time.Hour), rot.JoinCodeExpiresAt, time.Minute)
	require.Contains(t, c.ok("node", "revoke", "judge-1", "--reason", "host retired"), "revoked")
	c.fails(exitFailed, "NODE_REVOKED", "node", "enable", "judge-1", "--reason", "x")
	c.fails(exitFailed, "NO_ADDRESS", "node", "probe", "judge-1")
	c.fails(exitFailed, `no node named "judge-9"`, "node", "show", "judge-9")

	// Reconcile: clean, then a planted violation gives exit 3.
	require.Contains(t, c.ok("reconcile"), "0 violations")
	rep := decode[adminapi.ReconcileReport](t, c.ok("reconcile", "-o", "json"))
	require.True(t, rep.Ok)
	_, err := env.DB.ExecContext(env.Ctx, `UPDATE judge_submission SET current_job_id = ? WHERE submission_id = 'k-1'`, jobID)
	require.NoError(t, err)
	o = c.run("reconcile")
	require.Equal(t, exitViolation, o.code, o.stderr)
	require.Contains(t, o.stdout, "POINTER_NOT_HIGHEST_GENERATION")
}

// drain --wait --deadline: the control plane takes the leases back when the
// deadline passes; the CLI sees the node DISABLED and the jobs queued again
// with their attempt not counted.
func TestDrainDeadlineWait(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	c := ctl{t: t, env: map[string]string{"KECE_ADMIN_URL": env.URL, "KECE_ADMIN_TOKEN": env.Admin}}
	n := env.NewNode("cpp", 2, 4)
	node := joinNode(t, env.URL, n.JoinCode, "cpp", "boot-drain-deadline")
	env.ForceEnable(n.ID)
	node.heartbeatUntilDone()
	manID := env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1\n", Out: "1\n", Weight: 100})
	env.Enqueue("ALGO", "dd-1", "cpp17", "int main(){}", manID)
	env.Enqueue("ALGO", "dd-2", "cpp17", "int main(){}", manID)
	jobs := node.claim(2)
	require.Len(t, jobs, 2)
	id := strconv.FormatInt(n.ID, 10)

	out := c.ok("node", "drain", id, "--reason", "kernel update", "--deadline", "1s", "--wait")
	require.Contains(t, out, "draining node")
	require.Contains(t, out, "2 leases in flight, deadline ")
	require.Contains(t, out, "is DISABLED")

	list := decode[adminapi.JudgeJobList](t, c.ok("job", "list", "--type", "ALGO", "-o", "json"))
	require.Len(t, list.Jobs, 2)
	for _, j := range list.Jobs {
		require.Equal(t, adminapi.JobStateQueued, j.State)
		require.Equal(t, int32(0), j.AttemptCount, "a taken-back lease is not an attempt")
		require.Equal(t, "DRAIN_DEADLINE", *j.LastErrorCode)
	}
	show := c.ok("node", "show", id)
	require.Contains(t, show, "node.drain_deadline")
	require.Contains(t, show, "DISABLED")
	// The old lease is fenced: its result is refused.
	res, err := node.nc.SubmitResultWithResponse(env.Ctx, jobs[0].JobId, machineapi.ResultRequest{LeaseEpoch: jobs[0].LeaseEpoch,
		Outcome: machineapi.OutcomeError, Error: &machineapi.InfraError{Code: machineapi.InfraErrorCodeCancelled, Message: "late"}})
	require.NoError(t, err)
	require.Equal(t, 409, res.StatusCode(), string(res.Body))
}

func TestKecectlConfigurationErrors(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	c := ctl{t: t, env: map[string]string{"KECE_ADMIN_URL": env.URL, "KECE_ADMIN_TOKEN": env.Admin}}

	// A business token in the token file is refused by the admin API.
	tf := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tf, []byte(env.Business+"\n"), 0o600))
	o := c.fails(exitFailed, "UNAUTHENTICATED (HTTP 401)", "--token-file", tf, "host-group", "list")
	require.Contains(t, o.stderr, "hint:")
	// The admin token from a file works, by flag or by KECE_ADMIN_TOKEN_FILE.
	require.NoError(t, os.WriteFile(tf, []byte(env.Admin+"\n"), 0o600))
	c.ok("--token-file", tf, "host-group", "list")
	viaEnv := ctl{t: t, env: map[string]string{"KECE_ADMIN_URL": env.URL, "KECE_ADMIN_TOKEN_FILE": tf}}
	viaEnv.ok("host-group", "list")

	// Nothing listens here: a network error names the URL to fix.
	dead := ctl{t: t, env: map[string]string{"KECE_ADMIN_URL": "http://127.0.0.1:1", "KECE_ADMIN_TOKEN": env.Admin}}
	dead.fails(exitFailed, "cannot reach the control plane at http://127.0.0.1:1", "reconcile")

	// Shell completion of node names asks the control plane.
	c.ok("host-group", "create", "--name", "g1", "--slots", "2")
	c.ok("node", "create", "--name", "py-1", "--pool", "python", "--group", "g1", "--slots", "1")
	require.Contains(t, c.ok("__complete", "node", "show", ""), "py-1\tpython, PENDING_VERIFICATION")
	require.Contains(t, c.ok("__complete", "node", "create", "--group", ""), "g1")
}

// verify --wait exits 1 when the self-check fails, naming the check, and a
// --timeout that passes is exit 1 too.
func TestVerifyWaitFailureAndTimeout(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	c := ctl{t: t, env: map[string]string{"KECE_ADMIN_URL": env.URL, "KECE_ADMIN_TOKEN": env.Admin}}
	n := env.NewNode("cpp", 1, 2)
	node := joinNode(t, env.URL, n.JoinCode, "cpp", "boot-verify-fails")
	id := strconv.FormatInt(n.ID, 10)

	// Nobody runs the check yet: the wait gives up at --timeout.
	o := c.fails(exitFailed, "gave up waiting after 200ms (--timeout)", "node", "verify", id, "--reason", "first", "--wait", "--timeout", "200ms")
	require.Contains(t, o.stdout, "PENDING")

	// The node judges its check wrong: FAILED, exit 1.
	jobs := node.claim(1)
	require.Len(t, jobs, 1)
	v := &machineapi.Verdict{Status: machineapi.VerdictStatusWA, MaxScore: 0}
	for _, cs := range jobs[0].Manifest.Cases {
		v.Cases = append(v.Cases, machineapi.CaseResult{CaseId: cs.CaseId, Status: machineapi.VerdictStatusWA})
		v.MaxScore += cs.Weight
	}
	res, err := node.nc.SubmitResultWithResponse(env.Ctx, jobs[0].JobId, machineapi.ResultRequest{LeaseEpoch: jobs[0].LeaseEpoch,
		Outcome: machineapi.OutcomeVerdict, Verdict: v})
	require.NoError(t, err)
	require.Equal(t, 200, res.StatusCode(), string(res.Body))
	checks := decode[adminapi.JudgerDetail](t, c.ok("node", "show", id, "-o", "json")).Checks
	require.Len(t, checks, 1)
	require.Equal(t, adminapi.CheckStateFailed, checks[0].State)
	// A new verify, whose check fails too.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			js := node.claimWaiting(1, 2000)
			if len(js) == 1 {
				_, _ = node.nc.SubmitResultWithResponse(env.Ctx, js[0].JobId, machineapi.ResultRequest{LeaseEpoch: js[0].LeaseEpoch,
					Outcome: machineapi.OutcomeVerdict, Verdict: v})
				return
			}
		}
	}()
	o = c.fails(exitFailed, "failed", "node", "verify", id, "--reason", "again", "--wait")
	<-done
	require.Contains(t, o.stdout, "FAILED")
	require.Contains(t, o.stderr, "kecectl node show "+id)
}
