package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/worker"
	"github.com/kece-oj/kece/worker/faultproxy"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := worker.Config{Pool: "cpp", ControlURL: "http://127.0.0.1:1", CredentialFile: "/x/cred", LocalSlots: 2,
		CacheDir: "/x/cache", NewBackend: func(context.Context, string) (worker.Backend, error) { return nil, nil }}
	require.NoError(t, ok.Validate())
	for name, c := range map[string]struct {
		mut  func(*worker.Config)
		want string
	}{
		"unknown pool":    {func(c *worker.Config) { c.Pool = "rust" }, "KECE_POOL"},
		"zero slots":      {func(c *worker.Config) { c.LocalSlots = 0 }, "KECE_LOCAL_SLOTS"},
		"no credential":   {func(c *worker.Config) { c.CredentialFile = "" }, "KECE_CREDENTIAL_FILE"},
		"relative cache":  {func(c *worker.Config) { c.CacheDir = "cache" }, "KECE_CACHE_DIR"},
		"bad url":         {func(c *worker.Config) { c.ControlURL = "ftp://x" }, "KECE_CONTROL_URL"},
		"claim wait long": {func(c *worker.Config) { c.ClaimWait = time.Minute }, "claim wait"},
	} {
		c2 := ok
		c.mut(&c2)
		err := c2.Validate()
		require.Error(t, err, name)
		require.Contains(t, err.Error(), c.want, name)
	}
}

// The timings are checked against one another at start, and every broken
// relation is reported at once (cmd/kece-node then exits 2).
func TestConfigTimingRelations(t *testing.T) {
	t.Parallel()
	c := worker.Config{Pool: "cpp", ControlURL: "http://127.0.0.1:1", CredentialFile: "/x/cred", LocalSlots: 2,
		CacheDir: "/x/cache", NewBackend: func(context.Context, string) (worker.Backend, error) { return nil, nil },
		RequestTimeout: time.Second, ClaimSlack: 2 * time.Second, RetryBase: time.Second, RenewInterval: 500 * time.Millisecond,
		HeartbeatInterval: 800 * time.Millisecond, RetryMax: 2 * time.Second, SafetyMargin: 100 * time.Millisecond,
		ClaimWait: time.Second, LivenessInterval: 5 * time.Second}
	err := c.Validate()
	require.Error(t, err)
	for _, want := range []string{"claim slack 2s must not exceed the request timeout 1s", "retry base 1s must not exceed the renew interval 500ms",
		"retry base 1s must not exceed the heartbeat interval 800ms", "safety margin 100ms must be 0 (the default) or at least 200ms",
		"liveness interval 5s must be shorter than a claim's deadline 3s", "liveness interval 5s must not exceed the request timeout 1s"} {
		require.Contains(t, err.Error(), want)
	}
	c.LivenessInterval = 50 * time.Millisecond
	require.ErrorContains(t, c.Validate(), "liveness interval 50ms must be at least 100ms")
	// The defaults hold together, and so do the test timings.
	c.RequestTimeout, c.ClaimSlack, c.RetryBase, c.RenewInterval, c.HeartbeatInterval, c.RetryMax, c.SafetyMargin = 0, 0, 0, 0, 0, 0, 0
	c.ClaimWait, c.LivenessInterval = 0, 0
	require.NoError(t, c.Validate())
	c.RequestTimeout = 200 * time.Millisecond // the claim slack default follows it down
	require.NoError(t, c.Validate())
}

// A node joins, judges a job with a legitimately empty expected output,
// reports health and progress, and exposes /healthz and /metrics.
func TestNodeJudgesAndReports(t *testing.T) {
	t.Parallel()
	e := env(t, 3*time.Second)
	man := publishEcho(e)
	nd := e.NewNode("cpp", 2, 4)
	e.ForceEnable(nd.ID)
	fake := newFake(false)
	n := runNode(t, nodeConfig(t, e.URL, "cpp", nd.JoinCode, fake))

	jobID := enqueue(e, "cpp17", man)
	j := waitJob(t, e, jobID, 10*time.Second, "completed", completed)
	require.Equal(t, "AC", j.Verdict)
	var res struct {
		Verdict struct {
			Score float64 `json:"score"`
			Cases []struct {
				CaseID string `json:"caseId"`
				Status string `json:"status"`
			} `json:"cases"`
		} `json:"verdict"`
	}
	require.NoError(t, json.Unmarshal(j.Result, &res))
	require.Equal(t, float64(100), res.Verdict.Score)
	require.Len(t, res.Verdict.Cases, 2, "the empty expected output is judged like any other case")
	require.Equal(t, 1, eventsFor(t, e, jobID))

	node, err := e.Store.Nodes().GetNode(e.Ctx, nd.ID)
	require.NoError(t, err)
	require.Contains(t, node.RuntimeVersion, "fake-runtime 1.0")
	require.Contains(t, string(node.Health), `"fake"`)

	// The heartbeat's language reports reach the control plane's catalog.
	require.Eventually(t, func() bool {
		cat, err := e.Store.Nodes().Languages(e.Ctx)
		require.NoError(t, err)
		for _, l := range cat.Languages {
			if l.ID == "cpp17" && l.ReadyNodes == 1 {
				return l.Variants[0].Version == "fake-runtime 1.0" && l.Variants[0].CompileCommand == `fakecc -o main 'it'\''s main.cpp'`
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond)

	// The job's slot is freed once its result's answer is back, which may be
	// a moment after the commit the test saw.
	require.Eventually(t, func() bool { return healthz(t, n).SlotsBusy == 0 }, 10*time.Second, 10*time.Millisecond)
	st := healthz(t, n)
	require.Equal(t, worker.Status{ProtocolVersion: 1, NodeID: idStr(nd.ID), Pool: "cpp", Runtime: "fake-runtime 1.0",
		Dependencies: []worker.Dependency{{Name: "fake", Healthy: true}}, Languages: fake.Health(e.Ctx).Languages,
		Features: fakeFeatures, SlotsBusy: 0, SlotsTotal: 1}, st)
	resp, err := http.Get("http://" + n.Addr() + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), `kece_node_results_accepted_total{pool="cpp"} 1`)
	// /healthz offers nothing to run.
	resp, err = http.Post("http://"+n.Addr()+"/healthz", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// T06: the claim answer is lost after the server leased the job. The node
// never runs a job it does not know; the lease is reaped and another node
// judges it.
func TestT06ClaimResponseLost(t *testing.T) {
	t.Parallel()
	e := env(t, 2*time.Second)
	man := publishEcho(e)
	jobID := enqueue(e, "cpp17", man)
	a, b := e.NewNode("cpp", 1, 4), e.NewNode("cpp", 1, 4)
	e.ForceEnable(a.ID)
	e.ForceEnable(b.ID)

	px := faultproxy.New(e.URL)
	t.Cleanup(px.Close)
	dropped := px.Add(faultproxy.Rule{Method: "POST", PathContains: "/jobs/claim", Action: faultproxy.DropResponse, Times: 1})
	// Afterwards A's claims never reach the server, so only B can take the job.
	px.Add(faultproxy.Rule{Method: "POST", PathContains: "/jobs/claim", Action: faultproxy.Block})
	fa := newFake(false)
	runNode(t, nodeConfig(t, px.URL(), "cpp", a.JoinCode, fa))
	<-dropped.Fired()
	j := waitJob(t, e, jobID, 5*time.Second, "leased to A", func(j store.Job) bool { return j.NodeID == a.ID })
	require.Equal(t, store.StateRunning, j.State)

	fb := newFake(false)
	runNode(t, nodeConfig(t, e.URL, "cpp", b.JoinCode, fb))
	j = waitJob(t, e, jobID, 15*time.Second, "completed by B", completed)
	require.Equal(t, b.ID, j.NodeID)
	require.Equal(t, 0, fa.totalRuns(), "A never runs a job whose claim answer it did not get")
	require.Equal(t, 1, fb.ran(idStr(jobID)))
	att, err := e.Store.Jobs().Attempts(e.Ctx, jobID)
	require.NoError(t, err)
	require.Len(t, att, 2)
	require.Equal(t, a.ID, att[0].NodeID)
	require.Equal(t, b.ID, att[1].NodeID)
	require.Equal(t, 1, eventsFor(t, e, jobID))
}

// T07: the result's answer is lost after it committed. The node resends the
// same payload, gets ALREADY_COMMITTED, and there is one settlement.
func TestT07ResultAckLost(t *testing.T) {
	t.Parallel()
	e := env(t, 3*time.Second)
	man := publishEcho(e)
	nd := e.NewNode("cpp", 1, 4)
	e.ForceEnable(nd.ID)
	px := faultproxy.New(e.URL)
	t.Cleanup(px.Close)
	lost := px.Add(faultproxy.Rule{Method: "POST", PathContains: "/result", Action: faultproxy.DropResponse, Times: 1})
	fake := newFake(false)
	n := runNode(t, nodeConfig(t, px.URL(), "cpp", nd.JoinCode, fake))

	jobID := enqueue(e, "cpp17", man)
	<-lost.Fired()
	waitJob(t, e, jobID, 10*time.Second, "completed", completed)
	require.Eventually(t, func() bool { return n.Metrics().ResultsAlreadyCommitted == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 2, px.Count("POST", "/jobs/"+idStr(jobID)+"/result"), "the same payload was sent twice")
	require.Equal(t, int64(0), n.Metrics().ResultsAccepted, "the first (committed) answer never arrived")
	require.Equal(t, 1, fake.ran(idStr(jobID)))
	require.Equal(t, 1, eventsFor(t, e, jobID), "one settlement")
	att, err := e.Store.Jobs().Attempts(e.Ctx, jobID)
	require.NoError(t, err)
	require.Len(t, att, 1)
}

// T07 with the slot cycle: the lost answer also carried the next job's
// lease. The resent call (same payload, same claim request id) answers
// ALREADY_COMMITTED and that same lease: the next job runs once, on its
// first attempt, and no lease is left to expire.
func TestT07ResultAckLostWithItsClaim(t *testing.T) {
	t.Parallel()
	e := env(t, 3*time.Second)
	man := publishEcho(e)
	nd := e.NewNode("cpp", 1, 1)
	e.ForceEnable(nd.ID)
	px := faultproxy.New(e.URL)
	t.Cleanup(px.Close)
	lost := px.Add(faultproxy.Rule{Method: "POST", PathContains: "/result", Action: faultproxy.DropResponse, Times: 1})
	fake := newFake(false)
	first := enqueue(e, "cpp17", man)
	second := enqueue(e, "cpp17", man)
	n := runNode(t, nodeConfig(t, px.URL(), "cpp", nd.JoinCode, fake))

	<-lost.Fired()
	waitJob(t, e, first, 10*time.Second, "completed", completed)
	j := waitJob(t, e, second, 10*time.Second, "completed", completed)
	require.Equal(t, 1, j.AttemptCount, "the replayed lease, not a second one")
	require.Equal(t, 2, px.Count("POST", "/jobs/"+idStr(first)+"/result"), "the same payload was sent twice")
	require.Equal(t, 1, fake.ran(idStr(second)))
	require.Equal(t, int64(1), n.Metrics().CycleJobs)
	require.Equal(t, 1, eventsFor(t, e, first))
	require.Equal(t, 1, eventsFor(t, e, second))
}

// T08: renewals never reach the server. The node cancels execution at its
// local deadline — before the server's lease ends — and posts nothing;
// another node's result stands.
func TestT08RenewalsBlocked(t *testing.T) {
	t.Parallel()
	e := env(t, 2*time.Second)
	man := publishEcho(e)
	jobID := enqueue(e, "cpp17", man)
	a, b := e.NewNode("cpp", 1, 4), e.NewNode("cpp", 1, 4)
	e.ForceEnable(a.ID)
	e.ForceEnable(b.ID)
	px := faultproxy.New(e.URL)
	t.Cleanup(px.Close)
	px.Add(faultproxy.Rule{Method: "POST", PathContains: "/jobs/renew", Action: faultproxy.Block})
	px.Add(faultproxy.Rule{Method: "POST", PathContains: "/jobs/claim", Action: faultproxy.Pass, Times: 1})
	px.Add(faultproxy.Rule{Method: "POST", PathContains: "/jobs/claim", Action: faultproxy.Block})
	fa := newFake(true) // runs until cancelled
	na := runNode(t, nodeConfig(t, px.URL(), "cpp", a.JoinCode, fa))
	require.Equal(t, idStr(jobID), fa.waitStarted(t, 10*time.Second))

	select {
	case id := <-fa.cancelled:
		require.Equal(t, idStr(jobID), id)
	case <-time.After(10 * time.Second):
		t.Fatal("A did not cancel its execution")
	}
	// Cancelled before the server-side lease ended: still A's, still running.
	j, err := e.Store.Jobs().GetJob(e.Ctx, jobID)
	require.NoError(t, err)
	require.Equal(t, store.StateRunning, j.State)
	require.Equal(t, a.ID, j.NodeID)
	require.Equal(t, int64(1), j.LeaseEpoch)
	require.Positive(t, j.LeaseRemaining, "the node stops before the server's lease ends")
	require.Positive(t, px.Count("POST", "/jobs/renew"), "A did try to renew")

	fb := newFake(false)
	runNode(t, nodeConfig(t, e.URL, "cpp", b.JoinCode, fb))
	j = waitJob(t, e, jobID, 15*time.Second, "completed by B", completed)
	require.Equal(t, b.ID, j.NodeID)
	require.Equal(t, "AC", j.Verdict)
	require.Equal(t, 0, px.Count("POST", "/result"), "A posted nothing")
	require.Equal(t, int64(1), na.Metrics().DeadlineCancels)
	att, err := e.Store.Jobs().Attempts(e.Ctx, jobID)
	require.NoError(t, err)
	require.Len(t, att, 2)
	require.Equal(t, a.ID, att[0].NodeID)
	require.Empty(t, att[0].ReceiptDigest, "no result from A")
	require.Equal(t, b.ID, att[1].NodeID)
}

// T10: drain lets running jobs finish and claims nothing new; the node
// reports drained; a resize reaches it; a restart of the same node opens a
// new session and the old process is refused and stops.
func TestT10DrainResizeRestart(t *testing.T) {
	t.Parallel()
	e := env(t, 3*time.Second)
	man := publishEcho(e)
	nd := e.NewNode("cpp", 2, 4)
	e.ForceEnable(nd.ID)
	fake := newFake(true)
	cfg := nodeConfig(t, e.URL, "cpp", nd.JoinCode, fake)
	cfg.LocalSlots = 4
	n := runNode(t, cfg)
	j1, j2 := enqueue(e, "cpp17", man), enqueue(e, "cpp17", man)
	fake.waitStarted(t, 10*time.Second)
	fake.waitStarted(t, 10*time.Second)
	require.Equal(t, 2, healthz(t, n).SlotsBusy)

	_, err := e.Store.Nodes().Drain(e.Ctx, nd.ID, "test", "maintenance")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return healthz(t, n).Draining }, 5*time.Second, 10*time.Millisecond)
	j3 := enqueue(e, "cpp17", man)
	fake.release(idStr(j1))
	fake.release(idStr(j2))
	waitJob(t, e, j1, 10*time.Second, "completed", completed)
	waitJob(t, e, j2, 10*time.Second, "completed", completed)
	// Drained: nothing busy, and the node says so in its heartbeats.
	require.Eventually(t, func() bool {
		node, err := e.Store.Nodes().GetNode(e.Ctx, nd.ID)
		require.NoError(t, err)
		return healthz(t, n).SlotsBusy == 0 && node.ReportedSlotsBusy == 0
	}, 5*time.Second, 10*time.Millisecond)
	hb := n.Metrics().Heartbeats
	require.Eventually(t, func() bool { return n.Metrics().Heartbeats >= hb+3 }, 5*time.Second, 10*time.Millisecond)
	j, err := e.Store.Jobs().GetJob(e.Ctx, j3)
	require.NoError(t, err)
	require.Equal(t, store.StateQueued, j.State, "a draining node claims nothing new")

	// Resize down (through the admin store call); the node learns it.
	node, err := e.Store.Nodes().GetNode(e.Ctx, nd.ID)
	require.NoError(t, err)
	_, err = e.Store.Nodes().ResizeNode(e.Ctx, nd.ID, 1, node.Revision, "test", "smaller host")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return healthz(t, n).SlotsTotal == 1 }, 5*time.Second, 10*time.Millisecond)

	// Restart: a second process with the same credential file takes over.
	cfg2 := nodeConfig(t, e.URL, "cpp", "", newFake(false))
	cfg2.CredentialFile = cfg.CredentialFile
	n2 := runNode(t, cfg2)
	require.NotEqual(t, n.BootID(), n2.BootID())
	err = n.wait(t, 10*time.Second)
	require.ErrorIs(t, err, worker.ErrSuperseded, "the old process stops instead of fighting")
	node, err = e.Store.Nodes().GetNode(e.Ctx, nd.ID)
	require.NoError(t, err)
	require.Equal(t, int64(2), node.SessionEpoch)
	// The new process is draining too (the admin's state), so j3 stays queued
	// until the node is enabled again.
	e.ForceEnable(nd.ID)
	waitJob(t, e, j3, 10*time.Second, "completed by the new process", completed)
}

// T11: the server sends wrong bytes for an artifact. The node does not
// execute, reports an infrastructure error, and the job is judged elsewhere.
func TestT11CorruptArtifact(t *testing.T) {
	t.Parallel()
	e := env(t, 3*time.Second)
	man := publishEcho(e)
	jobID := enqueue(e, "cpp17", man)
	a, b := e.NewNode("cpp", 1, 4), e.NewNode("cpp", 1, 4)
	e.ForceEnable(a.ID)
	e.ForceEnable(b.ID)
	px := faultproxy.New(e.URL)
	t.Cleanup(px.Close)
	px.Add(faultproxy.Rule{Method: "GET", PathContains: "/artifacts/", Action: faultproxy.Rewrite, Body: func(b []byte) []byte {
		for i := range b {
			b[i] ^= 0x20
		}
		return b
	}})
	px.Add(faultproxy.Rule{Method: "POST", PathContains: "/jobs/claim", Action: faultproxy.Pass, Times: 1})
	px.Add(faultproxy.Rule{Method: "POST", PathContains: "/jobs/claim", Action: faultproxy.Block})
	fa := newFake(false)
	na := runNode(t, nodeConfig(t, px.URL(), "cpp", a.JoinCode, fa))
	j := waitJob(t, e, jobID, 10*time.Second, "A's attempt closed", func(j store.Job) bool { return j.LastErrorCode != "" })
	require.Equal(t, "CORRUPT_INPUT", j.LastErrorCode)
	require.Equal(t, 0, fa.totalRuns(), "nothing executes on corrupt test data")
	require.Positive(t, na.Metrics().CorruptDownloads)
	// A's results carry claims for the slot they free (the slot cycle),
	// which the proxy's claim block does not stop: A could lease the job
	// again once its retry backoff (10–50 ms here) has passed, and fail it
	// each time until its attempts run out. Stop A.
	na.cancel()
	require.NoError(t, na.wait(t, 10*time.Second))

	fb := newFake(false)
	runNode(t, nodeConfig(t, e.URL, "cpp", b.JoinCode, fb))
	j = waitJob(t, e, jobID, 15*time.Second, "completed by B", completed)
	require.Equal(t, b.ID, j.NodeID)
	require.Equal(t, "AC", j.Verdict, "B judges with verified files, the empty expected output included")
	att, err := e.Store.Jobs().Attempts(e.Ctx, jobID)
	require.NoError(t, err)
	// One attempt on A, or two when A leased the job again before it
	// stopped; then B's.
	require.GreaterOrEqual(t, len(att), 2)
	require.Equal(t, "CORRUPT_INPUT", att[0].ErrorClass)
	for _, x := range att[:len(att)-1] {
		require.Equal(t, a.ID, x.NodeID, "epoch %d", x.LeaseEpoch)
		require.NotEqual(t, "COMPLETED", x.Outcome, "epoch %d", x.LeaseEpoch)
	}
	require.Equal(t, b.ID, att[len(att)-1].NodeID)
}

// Two nodes of a pool share its queue; a node of another pool gets none of it.
func TestPoolsShareAndIsolate(t *testing.T) {
	t.Parallel()
	e := env(t, 3*time.Second)
	man := publishEcho(e)
	a, b, c := e.NewNode("cpp", 1, 4), e.NewNode("cpp", 1, 4), e.NewNode("python", 1, 4)
	for _, x := range []controltest.Node{a, b, c} {
		e.ForceEnable(x.ID)
	}
	fa, fb, fc := newFake(true), newFake(true), newFake(true)
	runNode(t, nodeConfig(t, e.URL, "cpp", a.JoinCode, fa))
	runNode(t, nodeConfig(t, e.URL, "cpp", b.JoinCode, fb))
	runNode(t, nodeConfig(t, e.URL, "python", c.JoinCode, fc))
	j1, j2 := enqueue(e, "cpp17", man), enqueue(e, "cpp17", man)
	// One slot each: both cpp nodes must be running one job at once.
	ja, jb := fa.waitStarted(t, 10*time.Second), fb.waitStarted(t, 10*time.Second)
	require.ElementsMatch(t, []string{idStr(j1), idStr(j2)}, []string{ja, jb})
	fa.release(ja)
	fb.release(jb)
	waitJob(t, e, j1, 10*time.Second, "completed", completed)
	waitJob(t, e, j2, 10*time.Second, "completed", completed)
	require.Equal(t, 0, fc.totalRuns(), "the python node never receives cpp jobs")

	// And the python node does take python work.
	jp := enqueue(e, "python3", man)
	require.Equal(t, idStr(jp), fc.waitStarted(t, 10*time.Second))
	fc.release(idStr(jp))
	waitJob(t, e, jp, 10*time.Second, "completed", completed)
}

// A join code works once; the credential file is 0600; a readable credential
// file, a missing code and a pool mismatch are refused with clear errors.
func TestJoinCodeAndCredentialFile(t *testing.T) {
	t.Parallel()
	e := env(t, 3*time.Second)
	nd := e.NewNode("cpp", 1, 4)
	cfg := nodeConfig(t, e.URL, "cpp", nd.JoinCode, newFake(false))
	n := runNode(t, cfg)
	st, err := os.Stat(cfg.CredentialFile)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	raw, err := os.ReadFile(cfg.CredentialFile)
	require.NoError(t, err)
	require.Contains(t, string(raw), idStr(nd.ID))
	n.cancel()
	require.NoError(t, n.wait(t, 10*time.Second))

	run := func(c worker.Config) error {
		w, err := worker.New(c)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return w.Run(ctx)
	}
	// The same code on a fresh host (no credential file): used.
	again := nodeConfig(t, e.URL, "cpp", nd.JoinCode, newFake(false))
	err = run(again)
	require.ErrorIs(t, err, worker.ErrJoinCodeSpent)
	_, statErr := os.Stat(again.CredentialFile)
	require.ErrorIs(t, statErr, os.ErrNotExist, "nothing stored on a refused join")
	// No credential and no code.
	none := nodeConfig(t, e.URL, "cpp", "", newFake(false))
	require.ErrorContains(t, run(none), "KECE_JOIN_CODE is empty")
	// A credential file others can read.
	require.NoError(t, os.Chmod(cfg.CredentialFile, 0o644))
	loose := nodeConfig(t, e.URL, "cpp", "", newFake(false))
	loose.CredentialFile = cfg.CredentialFile
	require.ErrorContains(t, run(loose), "must be 0600")
	require.NoError(t, os.Chmod(cfg.CredentialFile, 0o600))
	// The credential of a cpp node under KECE_POOL=python.
	wrong := nodeConfig(t, e.URL, "python", "", newFake(false))
	wrong.CredentialFile = cfg.CredentialFile
	require.ErrorContains(t, run(wrong), `belongs to a "cpp" node`)
	// Unknown code.
	bogus := nodeConfig(t, e.URL, "cpp", "kjc_not-a-real-code-000000", newFake(false))
	require.ErrorIs(t, run(bogus), worker.ErrJoinCodeInvalid)
}

// A job cancelled by the business while it runs: the renew answer stops the
// sandbox and nothing is posted.
func TestCancelledJobStops(t *testing.T) {
	t.Parallel()
	e := env(t, 3*time.Second)
	man := publishEcho(e)
	nd := e.NewNode("cpp", 1, 4)
	e.ForceEnable(nd.ID)
	fake := newFake(true)
	n := runNode(t, nodeConfig(t, e.URL, "cpp", nd.JoinCode, fake))
	jobID := enqueue(e, "cpp17", man)
	fake.waitStarted(t, 10*time.Second)
	// Progress travels with the renewals.
	waitJob(t, e, jobID, 5*time.Second, "progress reported", func(j store.Job) bool { return j.Phase == "JUDGING" && j.CasesTotal == 2 })
	_, err := e.Store.Jobs().CancelJob(e.Ctx, jobID, "test", "withdrawn")
	require.NoError(t, err)
	select {
	case id := <-fake.cancelled:
		require.Equal(t, idStr(jobID), id)
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled job kept running")
	}
	require.Eventually(t, func() bool { return n.Metrics().LeasesLost == 1 }, 5*time.Second, 10*time.Millisecond)
	m := n.Metrics()
	require.Zero(t, m.ResultsAccepted+m.ResultsAlreadyCommitted+m.ResultsAbandoned, "nothing posted")
}

// Drain (SIGTERM): the running job finishes and is posted, Run returns nil;
// with a short grace a job that does not finish is cancelled and reported as
// an infrastructure error so it is retried elsewhere.
func TestGracefulDrain(t *testing.T) {
	t.Parallel()
	e := env(t, 3*time.Second)
	man := publishEcho(e)
	nd := e.NewNode("cpp", 1, 4)
	e.ForceEnable(nd.ID)
	fake := newFake(true)
	n := runNode(t, nodeConfig(t, e.URL, "cpp", nd.JoinCode, fake))
	j1 := enqueue(e, "cpp17", man)
	fake.waitStarted(t, 10*time.Second)
	n.Drain()
	require.Eventually(t, func() bool { return healthz(t, n).Draining }, 5*time.Second, 10*time.Millisecond)
	fake.release(idStr(j1))
	require.NoError(t, n.wait(t, 10*time.Second))
	j, err := e.Store.Jobs().GetJob(e.Ctx, j1)
	require.NoError(t, err)
	require.Equal(t, store.StateCompleted, j.State)

	nd2 := e.NewNode("cpp", 1, 4)
	e.ForceEnable(nd2.ID)
	fake2 := newFake(true)
	cfg := nodeConfig(t, e.URL, "cpp", nd2.JoinCode, fake2)
	cfg.DrainGrace = 200 * time.Millisecond
	n2 := runNode(t, cfg)
	j2 := enqueue(e, "cpp17", man)
	fake2.waitStarted(t, 10*time.Second)
	n2.Drain()
	require.NoError(t, n2.wait(t, 10*time.Second))
	require.Equal(t, idStr(j2), <-fake2.cancelled)
	j = waitJob(t, e, j2, 5*time.Second, "attempt closed", func(j store.Job) bool { return j.LastErrorCode != "" })
	require.Equal(t, "CANCELLED", j.LastErrorCode)
	require.Equal(t, store.StateQueued, j.State, "retried elsewhere")
}

// 401 SESSION_INVALID (the session token was reissued to the same boot):
// the node reopens its session with the same boot id, keeps its epoch and
// goes on judging.
func TestSessionInvalidReopens(t *testing.T) {
	t.Parallel()
	e := env(t, 3*time.Second)
	man := publishEcho(e)
	nd := e.NewNode("cpp", 1, 4)
	e.ForceEnable(nd.ID)
	cfg := nodeConfig(t, e.URL, "cpp", nd.JoinCode, newFake(false))
	n := runNode(t, cfg)
	raw, err := os.ReadFile(cfg.CredentialFile)
	require.NoError(t, err)
	var cred worker.Credential
	require.NoError(t, json.Unmarshal(raw, &cred))
	// Reissue this boot's session token behind the node's back.
	c, err := machineapi.NewClientWithResponses(e.URL, machineapi.WithRequestEditorFn(controltest.Bearer(cred.Secret)))
	require.NoError(t, err)
	s, err := c.OpenSessionWithResponse(e.Ctx, machineapi.SessionRequest{BootId: n.BootID(), ProtocolVersion: 1})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, s.StatusCode(), string(s.Body))
	require.Equal(t, int64(1), s.JSON200.SessionEpoch)
	failures := n.Metrics().HeartbeatFailures + n.Metrics().ClaimFailures
	require.Eventually(t, func() bool { return n.Metrics().HeartbeatFailures+n.Metrics().ClaimFailures > failures },
		5*time.Second, 10*time.Millisecond, "the old token is refused")

	jobID := enqueue(e, "cpp17", man)
	waitJob(t, e, jobID, 10*time.Second, "completed after the reopen", completed)
	node, err := e.Store.Nodes().GetNode(e.Ctx, nd.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), node.SessionEpoch, "same boot, same session epoch")
	select {
	case <-n.done:
		t.Fatalf("node stopped: %v", n.err)
	default:
	}
}

// A revoked node stops at once (403 NODE_REVOKED), cancelling its job.
func TestRevokedNodeStops(t *testing.T) {
	t.Parallel()
	e := env(t, 3*time.Second)
	man := publishEcho(e)
	nd := e.NewNode("cpp", 1, 4)
	e.ForceEnable(nd.ID)
	fake := newFake(true)
	n := runNode(t, nodeConfig(t, e.URL, "cpp", nd.JoinCode, fake))
	jobID := enqueue(e, "cpp17", man)
	fake.waitStarted(t, 10*time.Second)
	_, err := e.Store.Nodes().Revoke(e.Ctx, nd.ID, "test", "stolen host")
	require.NoError(t, err)
	require.ErrorIs(t, n.wait(t, 10*time.Second), worker.ErrRevoked)
	require.Equal(t, idStr(jobID), <-fake.cancelled)
	m := n.Metrics()
	require.Zero(t, m.ResultsAccepted+m.ResultsAlreadyCommitted, "nothing posted")
}

// 422 RESULT_INVALID: the payload is never retried as is; the node reports
// its own defect and closes the lease with an INTERNAL error instead.
func TestRefusedResultIsNotRetried(t *testing.T) {
	t.Parallel()
	// The error report requeues the job after the retry backoff; a long
	// one keeps its next attempt (a new verdict, not a loop) out of the
	// count below. With the 500 ms default a loaded CI run saw it.
	e := envWith(t, store.Config{LeaseTTL: 3 * time.Second, BackoffBase: time.Minute, BackoffMax: time.Minute})
	man := publishEcho(e)
	nd := e.NewNode("cpp", 1, 4)
	e.ForceEnable(nd.ID)
	fake := newFake(false)
	fake.badCase = true
	px := faultproxy.New(e.URL)
	t.Cleanup(px.Close)
	n := runNode(t, nodeConfig(t, px.URL(), "cpp", nd.JoinCode, fake))
	jobID := enqueue(e, "cpp17", man)
	j := waitJob(t, e, jobID, 10*time.Second, "attempt closed", func(j store.Job) bool { return j.LastErrorCode != "" })
	require.Equal(t, "INTERNAL", j.LastErrorCode)
	require.Eventually(t, func() bool { return n.Metrics().ResultsAccepted == 1 }, 5*time.Second, 10*time.Millisecond)
	m := n.Metrics()
	require.Equal(t, int64(1), m.NodeDefects)
	require.Equal(t, 2, px.Count("POST", "/jobs/"+idStr(jobID)+"/result"), "one refused verdict, one error report, no loop")
}

// A node that is not ENABLED gets no pool work but still runs the CHECK jobs
// an admin binds to it (verify), pending verification or draining alike.
func TestCheckJobsInAnyState(t *testing.T) {
	t.Parallel()
	e := env(t, 3*time.Second)
	man := publishEcho(e)
	nd := e.NewNode("cpp", 1, 4) // PENDING_VERIFICATION
	fake := newFake(false)
	n := runNode(t, nodeConfig(t, e.URL, "cpp", nd.JoinCode, fake))
	pool := enqueue(e, "cpp17", man)
	chk, err := e.Store.Nodes().StartCheck(e.Ctx, store.CheckRequest{NodeID: nd.ID, ManifestID: man, Language: "cpp17", Source: "x"}, "test", "verify")
	require.NoError(t, err)
	require.Equal(t, "AC", waitJob(t, e, chk.JobID, 10*time.Second, "check completed", completed).Verdict)

	_, err = e.Store.Nodes().Drain(e.Ctx, nd.ID, "test", "maintenance")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return healthz(t, n).Draining }, 5*time.Second, 10*time.Millisecond)
	chk2, err := e.Store.Nodes().StartCheck(e.Ctx, store.CheckRequest{NodeID: nd.ID, ManifestID: man, Language: "cpp17", Source: "x"}, "test", "verify")
	require.NoError(t, err)
	waitJob(t, e, chk2.JobID, 10*time.Second, "check completed while draining", completed)
	j, err := e.Store.Jobs().GetJob(e.Ctx, pool)
	require.NoError(t, err)
	require.Equal(t, store.StateQueued, j.State, "no pool work for a node that is not ENABLED")
	require.Zero(t, fake.ran(idStr(pool)))
}

// 503 and 429 on a result: the same payload is sent again (after
// Retry-After for the 429) and accepted once.
func TestResultRetriedOn5xxAnd429(t *testing.T) {
	t.Parallel()
	e := env(t, 5*time.Second)
	man := publishEcho(e)
	nd := e.NewNode("cpp", 1, 4)
	e.ForceEnable(nd.ID)
	px := faultproxy.New(e.URL)
	t.Cleanup(px.Close)
	errBody := func(code string) func([]byte) []byte {
		return func([]byte) []byte { return []byte(`{"code":"` + code + `","message":"injected"}`) }
	}
	jsonHdr := http.Header{"Content-Type": {"application/json"}}
	px.Add(faultproxy.Rule{Method: "POST", PathContains: "/result", Action: faultproxy.Respond, Times: 1,
		Status: http.StatusServiceUnavailable, Header: jsonHdr, Body: errBody("UNAVAILABLE")})
	limited := px.Add(faultproxy.Rule{Method: "POST", PathContains: "/result", Action: faultproxy.Respond, Times: 1,
		Status: http.StatusTooManyRequests, Header: http.Header{"Content-Type": {"application/json"}, "Retry-After": {"1"}},
		Body: errBody("RATE_LIMITED")})
	n := runNode(t, nodeConfig(t, px.URL(), "cpp", nd.JoinCode, newFake(false)))
	jobID := enqueue(e, "cpp17", man)
	<-limited.Fired()
	limitedAt := time.Now()
	waitJob(t, e, jobID, 10*time.Second, "completed", completed)
	require.GreaterOrEqual(t, time.Since(limitedAt), time.Second, "Retry-After honoured")
	require.Eventually(t, func() bool { return n.Metrics().ResultsAccepted == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, int64(2), n.Metrics().ResultRetries)
	require.Equal(t, 3, px.Count("POST", "/jobs/"+idStr(jobID)+"/result"))
	require.Equal(t, 1, eventsFor(t, e, jobID))
}

// A claim answer that arrives after the node decided to stop is not run:
// the lease it carried expires and the job is requeued.
func TestClaimAfterStopIsNotRun(t *testing.T) {
	t.Parallel()
	e := env(t, 2*time.Second)
	man := publishEcho(e)
	jobID := enqueue(e, "cpp17", man)
	nd := e.NewNode("cpp", 1, 4)
	e.ForceEnable(nd.ID)
	px := faultproxy.New(e.URL)
	t.Cleanup(px.Close)
	slow := px.Add(faultproxy.Rule{Method: "POST", PathContains: "/jobs/claim", Action: faultproxy.DelayResponse, Delay: 3 * time.Second})
	fake := newFake(false)
	n := runNode(t, nodeConfig(t, px.URL(), "cpp", nd.JoinCode, fake))
	<-slow.Fired()
	waitJob(t, e, jobID, 5*time.Second, "leased by the slow claim", func(j store.Job) bool { return j.NodeID == nd.ID })
	n.Drain()
	require.NoError(t, n.wait(t, 10*time.Second))
	j := waitJob(t, e, jobID, 10*time.Second, "requeued after the lease", func(j store.Job) bool { return j.State == store.StateQueued })
	require.Equal(t, "LEASE_EXPIRED", j.LastErrorCode)
	require.Zero(t, fake.totalRuns(), "never run")
}

// An unhealthy dependency is reported in heartbeats and makes /healthz 503.
func TestUnhealthyDependencyReported(t *testing.T) {
	t.Parallel()
	e := env(t, 3*time.Second)
	nd := e.NewNode("cpp", 1, 4)
	fake := newFake(false)
	fake.sick.Store(true)
	n := runNode(t, nodeConfig(t, e.URL, "cpp", nd.JoinCode, fake))
	resp, err := http.Get("http://" + n.Addr() + "/healthz")
	require.NoError(t, err)
	var st worker.Status
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, []worker.Dependency{{Name: "fake", Healthy: false, Detail: "daemon unreachable"}}, st.Dependencies)
	require.Eventually(t, func() bool {
		node, err := e.Store.Nodes().GetNode(e.Ctx, nd.ID)
		require.NoError(t, err)
		return strings.Contains(string(node.Health), `"healthy":false`) && strings.Contains(string(node.Health), "daemon unreachable")
	}, 5*time.Second, 10*time.Millisecond)
}

// A node whose Docker daemon goes down does not keep leasing jobs only to
// fail them (each failure burns an attempt, and with every node of a pool
// broken the jobs would end as SYSTEM_ERROR): the first DAEMON_UNREACHABLE
// stops its claiming, the job is retried elsewhere, and a probe that passes
// again resumes claiming.
func TestDependencyDownStopsClaiming(t *testing.T) {
	t.Parallel()
	e := env(t, 3*time.Second)
	nd := e.NewNode("cpp", 1, 4)
	e.ForceEnable(nd.ID)
	fake := newFake(false)
	n := runNode(t, nodeConfig(t, e.URL, "cpp", nd.JoinCode, fake))
	require.False(t, n.Status().DependencyPaused)
	man := publishEcho(e)

	fake.sick.Store(true) // the daemon goes; the node's last probe was healthy
	first := enqueue(e, "cpp17", man)
	j := waitJob(t, e, first, 10*time.Second, "failed once and requeued", func(j store.Job) bool {
		return j.State == store.StateQueued && j.LastErrorCode == "DAEMON_UNREACHABLE"
	})
	require.Equal(t, 1, j.AttemptCount)
	second := enqueue(e, "cpp17", man)
	require.Eventually(t, func() bool { return n.Status().DependencyPaused }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, int64(1), n.Metrics().DependencyPauses)
	st := healthz(t, n)
	require.True(t, st.DependencyPaused)
	require.Equal(t, []worker.Dependency{{Name: "fake", Healthy: false, Detail: "daemon unreachable"}}, st.Dependencies)

	// Paused: both jobs wait (the first is due again after its backoff) and
	// no attempt is spent. Absence is shown over a bounded window.
	time.Sleep(2 * time.Second) // absence over a bounded window
	require.Equal(t, 1, fake.totalRuns(), "nothing leased while the daemon is down")
	for _, id := range []int64{first, second} {
		j, err := e.Store.Jobs().GetJob(e.Ctx, id)
		require.NoError(t, err)
		require.Equal(t, store.StateQueued, j.State, "job %d", id)
	}

	fake.sick.Store(false) // back: the next probe (within 5 s) resumes claiming
	for _, id := range []int64{first, second} {
		j := waitJob(t, e, id, 15*time.Second, "judged once the daemon is back", completed)
		require.Equal(t, "AC", j.Verdict, "job %d", id)
	}
	require.False(t, n.Status().DependencyPaused)
	require.Equal(t, 1, fake.ran(idStr(second)), "the second job ran once, after the pause")
}

// Leases a node receives while a dependency is down are given back at once
// as DEPENDENCY_DOWN: requeued, no attempt counted, the reason on the job.
// Here the lease is the job that a result leased with its slot-cycle claim,
// whose answer the fault proxy holds back while another job fails on the
// daemon. Once the daemon answers again every job is judged.
func TestLeasesGivenBackWhileDependencyDown(t *testing.T) {
	t.Parallel()
	e := env(t, 5*time.Second)
	man := publishEcho(e)
	nd := e.NewNode("cpp", 2, 4)
	e.ForceEnable(nd.ID)
	px := faultproxy.New(e.URL)
	t.Cleanup(px.Close)
	fake := newFake(true)
	cfg := nodeConfig(t, px.URL(), "cpp", nd.JoinCode, fake)
	cfg.LocalSlots = 2
	n := runNode(t, cfg)

	a, b := enqueue(e, "cpp17", man), enqueue(e, "cpp17", man)
	started := map[string]bool{<-fake.started: true, <-fake.started: true}
	require.Equal(t, map[string]bool{idStr(a): true, idStr(b): true}, started)
	next := enqueue(e, "cpp17", man) // waits: both slots are busy

	held := px.Add(faultproxy.Rule{Method: "POST", PathContains: "/jobs/" + idStr(a) + "/result",
		Action: faultproxy.DelayResponse, Delay: 3 * time.Second, Times: 1})
	fake.release(idStr(a)) // AC; its result's claim leases next, the answer held back
	<-held.Fired()
	fake.sick.Store(true)
	fake.release(idStr(b)) // DAEMON_UNREACHABLE: the node pauses
	require.Eventually(t, func() bool { return n.Status().DependencyPaused }, 5*time.Second, 5*time.Millisecond)

	// a's claim leases the oldest job ready: next, or b itself when both
	// results commit in one batch and b is requeued at once.
	var back store.Job
	require.Eventually(t, func() bool {
		for _, id := range []int64{b, next} {
			j, err := e.Store.Jobs().GetJob(e.Ctx, id)
			require.NoError(t, err)
			if j.State == store.StateQueued && j.LastErrorCode == "DEPENDENCY_DOWN" {
				back = j
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the job a's result leased comes back as DEPENDENCY_DOWN")
	attempts := 0
	if back.ID == b {
		attempts = 1 // its own failure on the daemon
	}
	require.Equal(t, attempts, back.AttemptCount, "a lease given back before judging counts no attempt")
	require.Zero(t, fake.ran(idStr(next)))
	require.Equal(t, 1, fake.ran(idStr(b)))
	// The node counts the release once its answer is back.
	require.Eventually(t, func() bool { return n.Metrics().LeasesReleased == 1 }, 5*time.Second, 5*time.Millisecond)

	fake.release(idStr(next))
	fake.sick.Store(false)
	for _, id := range []int64{a, b, next} {
		j := waitJob(t, e, id, 15*time.Second, "judged once the daemon is back", completed)
		require.Equal(t, "AC", j.Verdict, "job %d", id)
	}
}

// SIGTERM while the control plane is unreachable: the session retries end
// and Run returns nil (nothing to finish).
func TestDrainBeforeSession(t *testing.T) {
	t.Parallel()
	e := env(t, 3*time.Second)
	nd := e.NewNode("cpp", 1, 4)
	px := faultproxy.New(e.URL)
	t.Cleanup(px.Close)
	refused := px.Add(faultproxy.Rule{Method: "POST", PathContains: "/session", Action: faultproxy.Block})
	w, err := worker.New(nodeConfig(t, px.URL(), "cpp", nd.JoinCode, newFake(false)))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	<-refused.Fired()
	w.Drain()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run kept retrying after Drain")
	}
	require.Positive(t, refused.Hits())
}
