package worker_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/telemetry"
	"github.com/kece-oj/kece/worker"
	"github.com/kece-oj/kece/worker/faultproxy"
)

// freezable stands in front of a control replica and, once frozen, takes
// requests and never answers them (a replica stopped by SIGSTOP, or a load
// balancer backend that hangs): the client sees neither an answer nor an
// error, only its own deadline.
type freezable struct {
	srv    *httptest.Server
	frozen atomic.Bool
	// only, when set, limits the freeze to paths containing it.
	only string
	hung atomic.Int64
	// calls counts the requests held while frozen that are not liveness
	// checks: the node's own calls.
	calls atomic.Int64
	stop  chan struct{}
}

func newFreezable(t *testing.T, upstream string) *freezable {
	u, err := url.Parse(upstream)
	require.NoError(t, err)
	f := &freezable{stop: make(chan struct{})}
	rp := httputil.NewSingleHostReverseProxy(u)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.frozen.Load() && strings.Contains(r.URL.Path, f.only) {
			f.hung.Add(1)
			if r.URL.Path != contracts.LivenessPath {
				f.calls.Add(1)
			}
			select { // hang until the client gives up or the test ends
			case <-r.Context().Done():
			case <-f.stop:
			}
			return
		}
		// A call already forwarded when the freeze begins gets no answer
		// either: its answer is held like a stopped process would.
		rp.ServeHTTP(&heldWriter{ResponseWriter: w, f: f, r: r}, r)
	}))
	t.Cleanup(func() { close(f.stop); f.srv.CloseClientConnections(); f.srv.Close() })
	return f
}

// heldWriter holds an answer back while its freezable is frozen (on its
// paths), until the client gives up or the test ends.
type heldWriter struct {
	http.ResponseWriter
	f    *freezable
	r    *http.Request
	held bool
}

func (w *heldWriter) hold() bool {
	if w.held || !w.f.frozen.Load() || !strings.Contains(w.r.URL.Path, w.f.only) {
		return w.held
	}
	w.held = true
	w.f.hung.Add(1)
	select {
	case <-w.r.Context().Done():
	case <-w.f.stop:
	}
	return true
}

func (w *heldWriter) WriteHeader(code int) {
	if !w.hold() {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *heldWriter) Write(p []byte) (int, error) {
	if w.hold() {
		return 0, http.ErrHandlerTimeout
	}
	return w.ResponseWriter.Write(p)
}

// A node given two replicas keeps judging when the one it uses hangs: each
// call gives up at its deadline (the long-poll at its wait plus the request
// timeout) and the node moves to the other replica with the same session —
// session tokens are valid on every replica — instead of stalling behind
// the frozen one.
func TestNodeMovesOffAHungReplica(t *testing.T) {
	t.Parallel()
	a := env(t, 5*time.Second)
	b := a.SecondReplica()
	man := publishEcho(a)
	nd := a.NewNode("cpp", 1, 4)
	a.ForceEnable(nd.ID)
	front := newFreezable(t, a.URL)
	cfg := nodeConfig(t, front.srv.URL+", "+b.URL+"/", "cpp", nd.JoinCode, newFake(false))
	cfg.RequestTimeout, cfg.ClaimWait = 400*time.Millisecond, 500*time.Millisecond
	runNode(t, cfg)

	first := enqueue(a, "cpp17", man)
	waitJob(t, a, first, 10*time.Second, "completed through the first replica", completed)
	before, err := a.Store.Nodes().GetNode(a.Ctx, nd.ID)
	require.NoError(t, err)

	front.frozen.Store(true)
	start := time.Now()
	second := enqueue(b, "cpp17", man)
	// Within one long-poll deadline (0.9 s) plus a claim and a judging:
	// generous for a loaded machine, far below a stalled fleet.
	waitJob(t, b, second, 8*time.Second, "completed through the second replica", completed)
	t.Logf("judged %s after the freeze", time.Since(start))
	require.Positive(t, front.hung.Load(), "the node did call the frozen replica")
	after, err := a.Store.Nodes().GetNode(a.Ctx, nd.ID)
	require.NoError(t, err)
	require.Equal(t, before.SessionEpoch, after.SessionEpoch, "the session was kept")
}

// A node that is the only one told of a hung replica still gives up at its
// deadline: it never waits longer than the request timeout (plus the claim
// wait) for an answer, and tries again.
func TestEveryCallHasADeadline(t *testing.T) {
	t.Parallel()
	a := env(t, 5*time.Second)
	nd := a.NewNode("cpp", 1, 4)
	front := newFreezable(t, a.URL)
	front.frozen.Store(true)
	cfg := joined(t, a.URL, nd.JoinCode, nodeConfig(t, front.srv.URL, "cpp", "", newFake(false)))
	cfg.RequestTimeout = 200 * time.Millisecond
	n, err := worker.New(cfg)
	require.NoError(t, err)
	ctx, cancel := contextWithTimeout(t, 1500*time.Millisecond)
	defer cancel()
	_ = n.Run(ctx)
	// Opening the session is cut at 200 ms and tried again after a short
	// backoff: several attempts in 1.5 s, not one that hangs.
	require.GreaterOrEqual(t, front.hung.Load(), int64(3))
}

// While the control plane answers 503 UNAVAILABLE with Retry-After (its
// database is down), a node does not retry sooner than it is told: over
// 2.5 s with Retry-After: 1 it asks about three times, where the doubling
// backoff alone (20-200 ms) would ask a dozen times or more.
func TestNodeHonours503RetryAfter(t *testing.T) {
	t.Parallel()
	e := env(t, 5*time.Second)
	nd := e.NewNode("cpp", 1, 4)
	px := faultproxy.New(e.URL)
	t.Cleanup(px.Close)
	down := px.Add(faultproxy.Rule{PathContains: "/judgers/", Action: faultproxy.Respond, Status: http.StatusServiceUnavailable,
		Header: http.Header{"Retry-After": {"1"}, "Content-Type": {"application/json"}},
		Body:   func([]byte) []byte { return []byte(`{"code":"UNAVAILABLE","message":"database unavailable; retry"}`) }})
	cfg := joined(t, e.URL, nd.JoinCode, nodeConfig(t, px.URL(), "cpp", "", newFake(false)))
	n, err := worker.New(cfg)
	require.NoError(t, err)
	ctx, cancel := contextWithTimeout(t, 2500*time.Millisecond)
	defer cancel()
	_ = n.Run(ctx)
	require.GreaterOrEqual(t, down.Hits(), 2)
	require.LessOrEqual(t, down.Hits(), 4, "requests during 2.5 s of 503 Retry-After: 1")
}

// joined stores the node's credential by joining directly (not through the
// proxy under test) and returns cfg, which then only opens a session.
func joined(t *testing.T, url, code string, cfg worker.Config) worker.Config {
	t.Helper()
	_, err := worker.Join(t.Context(), worker.JoinConfig{ControlURL: url, Pool: cfg.Pool, Code: code, CredentialFile: cfg.CredentialFile})
	require.NoError(t, err)
	return cfg
}

// A replica that hangs on artifact downloads only (a stuck file system
// behind it): the download gives up at the request timeout and is fetched
// from the other replica, within the lease.
func TestDownloadMovesOffAHungReplica(t *testing.T) {
	t.Parallel()
	a := env(t, 5*time.Second)
	b := a.SecondReplica()
	man := publishEcho(a)
	nd := a.NewNode("cpp", 1, 4)
	a.ForceEnable(nd.ID)
	front := newFreezable(t, a.URL)
	front.only = "/artifacts/"
	front.frozen.Store(true)
	cfg := nodeConfig(t, front.srv.URL+","+b.URL, "cpp", nd.JoinCode, newFake(false))
	cfg.RequestTimeout = 400 * time.Millisecond
	runNode(t, cfg)
	job := enqueue(a, "cpp17", man)
	j := waitJob(t, a, job, 10*time.Second, "completed with inputs from the second replica", completed)
	require.Positive(t, front.hung.Load(), "the first download went to the hung replica")
	// Within the lease: the node's first lease judged it, none was lost.
	require.Equal(t, nd.ID, j.NodeID)
	require.Equal(t, int64(1), j.LeaseEpoch, "completed on its first lease")
	require.Equal(t, 1, j.AttemptCount)
	require.Zero(t, j.UnstartedAttempts, "no lease ended before judging started")
}

// A lease lives from when the replica that granted it answered. The claim
// goes first to a replica that hangs on claims for longer than the lease
// minus the margin, then to the other one, which leases the job: the node
// starts it (the old rule, counting from when the first try was sent, left
// such a lease to expire unstarted) and judges it on that first lease.
func TestClaimThatFailsOverKeepsItsLease(t *testing.T) {
	t.Parallel()
	a := env(t, 3*time.Second)
	b := a.SecondReplica()
	man := publishEcho(a)
	nd := a.NewNode("cpp", 1, 4)
	a.ForceEnable(nd.ID)
	job := enqueue(a, "cpp17", man)
	front := newFreezable(t, a.URL)
	front.only = "/jobs/claim"
	front.frozen.Store(true)
	cfg := nodeConfig(t, front.srv.URL+","+b.URL, "cpp", nd.JoinCode, newFake(false))
	// The first try hangs 0.5 + 2.5 = 3 s: past 3 s lease − 0.5 s margin.
	cfg.ClaimWait, cfg.ClaimSlack = 500*time.Millisecond, 2500*time.Millisecond
	n := runNode(t, cfg)
	j := waitJob(t, a, job, 15*time.Second, "completed through the second replica", completed)
	require.Positive(t, front.hung.Load(), "the first claim went to the hung replica")
	require.Equal(t, int64(1), j.LeaseEpoch, "judged on the lease the second replica granted")
	require.Equal(t, 1, j.AttemptCount)
	require.Zero(t, j.UnstartedAttempts, "no lease ended unstarted")
	m := n.Metrics()
	require.Zero(t, m.LeasesDroppedFresh)
	require.Positive(t, m.ReplicaMoves)
}

// When one call finds the replica in use hung (here a heartbeat, whose
// deadline is 1 s), the node moves at once and every call still waiting
// there — the claim long-poll — is abandoned and repeated on the next
// replica: work queued meanwhile is judged well before the long-poll's own
// deadline (wait + slack = 5 s) would have passed.
func TestHungReplicaAbandonsCallsInFlight(t *testing.T) {
	t.Parallel()
	a := env(t, 20*time.Second)
	b := a.SecondReplica()
	man := publishEcho(a)
	nd := a.NewNode("cpp", 1, 4)
	a.ForceEnable(nd.ID)
	front := newFreezable(t, a.URL)
	cfg := nodeConfig(t, front.srv.URL+","+b.URL, "cpp", nd.JoinCode, newFake(false))
	cfg.ClaimWait, cfg.ClaimSlack = 2*time.Second, 3*time.Second
	n := runNode(t, cfg)
	warm := enqueue(a, "cpp17", man)
	waitJob(t, a, warm, 10*time.Second, "completed through the first replica", completed)

	front.frozen.Store(true)
	start := time.Now()
	job := enqueue(b, "cpp17", man)
	// Judged, not only leased: the first replica may have leased it before
	// the held answer, which the node then gets replayed by the second.
	waitJob(t, b, job, 10*time.Second, "judged through the second replica", completed)
	took := time.Since(start)
	t.Logf("judged %s after the freeze", took)
	require.Less(t, took, 4*time.Second, "the long-poll was abandoned, not waited out")
	require.Positive(t, n.Metrics().ReplicaMoves)
}

// A replica that hangs on renewals only: a renew not answered within its
// hedge delay also goes to the other replica, which answers first; the node
// moves there, and a job running for longer than its lease keeps it.
func TestRenewHedgedToTheOtherReplica(t *testing.T) {
	t.Parallel()
	a := env(t, 3*time.Second)
	b := a.SecondReplica()
	man := publishEcho(a)
	nd := a.NewNode("cpp", 1, 4)
	a.ForceEnable(nd.ID)
	front := newFreezable(t, a.URL)
	front.only = "/renew"
	fake := newFake(true)
	cfg := nodeConfig(t, front.srv.URL+","+b.URL, "cpp", nd.JoinCode, fake)
	n := runNode(t, cfg)
	job := enqueue(a, "cpp17", man)
	started := fake.waitStarted(t, 10*time.Second)
	front.frozen.Store(true)
	// Well past the 3 s lease: it lives only if renewals reach replica B.
	require.Eventually(t, func() bool { return n.Metrics().RenewHedgesWon > 0 }, 5*time.Second, 20*time.Millisecond)
	require.Never(t, func() bool {
		j, err := a.Store.Jobs().GetJob(a.Ctx, job)
		return err != nil || j.LeaseEpoch != 1
	}, 4*time.Second, 100*time.Millisecond, "the first lease lives on")
	fake.release(started)
	j := waitJob(t, a, job, 10*time.Second, "completed on its first lease", completed)
	require.Equal(t, int64(1), j.LeaseEpoch)
	require.Positive(t, front.hung.Load(), "a renew went to the hung replica")
	m := n.Metrics()
	require.Positive(t, m.RenewHedges)
	require.Zero(t, m.LeasesLost)
	require.Zero(t, m.DeadlineCancels)
}

// With the default timings (heartbeat 10 s, claim wait 15 s, lease 60 s)
// a node parked in a claim long-poll on a replica that stops is not held
// until the long-poll's deadline (15 + 1 s) nor its next heartbeat's (10 s):
// the liveness check it sends the replica every second goes unanswered,
// the node abandons the long-poll and asks the other replica at once,
// which leases a job queued there (or replays the lease the stopped one
// granted) and the node judges it within about two seconds of the freeze.
func TestParkedClaimLeavesAFrozenReplicaAtDefaultTimings(t *testing.T) {
	t.Parallel()
	a, b, front, nd, man := frozenPairAtDefaults(t)
	n := runNode(t, front.defaultsNode(t, b, nd, newFake(false)))
	warm := enqueue(a, "cpp17", man)
	waitJob(t, a, warm, 20*time.Second, "completed through the first replica", completed)
	// The node's next long-poll (15 s) now waits on the first replica.
	require.Eventually(t, func() bool { return n.Metrics().LivenessChecks > 0 }, 5*time.Second, 10*time.Millisecond,
		"the replica holding the long-poll is checked while it waits")
	before, err := a.Store.Nodes().GetNode(a.Ctx, nd.ID)
	require.NoError(t, err)

	front.frozen.Store(true)
	start := time.Now()
	job := enqueue(b, "cpp17", man)
	// Judged, not only leased: the first replica may lease it for the
	// held long-poll, whose answer the second then replays to the node.
	waitJob(t, b, job, 20*time.Second, "judged through the second replica", completed)
	took := time.Since(start)
	t.Logf("judged %s after the freeze", took)
	require.Less(t, took, 4*time.Second, "the parked long-poll was left within a liveness check or two, not at its 16 s deadline")
	require.Positive(t, front.hung.Load(), "the node did call the frozen replica")
	require.Positive(t, n.Metrics().ReplicaMoves)
	after, err := a.Store.Nodes().GetNode(a.Ctx, nd.ID)
	require.NoError(t, err)
	require.Equal(t, before.SessionEpoch, after.SessionEpoch, "the session was kept")
}

// With the default timings a node whose slots are all busy asks for work
// only through the claim its next result carries, and that result's
// deadline is half the lease left (30 s at the 60 s lease). When the
// replica it goes to hangs, the liveness check every long call gets
// (not only a parked claim) fails within a second or two, the node moves
// to the other replica with its session, and the result and its claim are
// answered there: the queued job is judged within seconds, not after the
// result's half-minute deadline.
func TestResultLeavesAFrozenReplicaAtDefaultTimings(t *testing.T) {
	t.Parallel()
	a, b, front, nd, man := frozenPairAtDefaults(t)
	fake := newFake(true)
	n := runNode(t, front.defaultsNode(t, b, nd, fake))
	first := enqueue(a, "cpp17", man)
	running := fake.waitStarted(t, 20*time.Second)
	next := enqueue(a, "cpp17", man) // queued: the only slot is busy
	before, err := a.Store.Nodes().GetNode(a.Ctx, nd.ID)
	require.NoError(t, err)

	front.frozen.Store(true)
	start := time.Now()
	fake.release(running)
	done := fake.waitStarted(t, 20*time.Second)
	require.Equal(t, strconv.FormatInt(next, 10), done, "the queued job is the next one judged")
	took := time.Since(start)
	fake.release(done)
	t.Logf("next job started %s after the freeze", took)
	require.Less(t, took, 4*time.Second, "the result left the frozen replica within a liveness check or two, not at its 30 s deadline")
	waitJob(t, b, first, 10*time.Second, "the first result committed through the second replica", completed)
	waitJob(t, b, next, 10*time.Second, "judged through the second replica", completed)
	require.Positive(t, front.hung.Load(), "the node did call the frozen replica")
	require.Positive(t, n.Metrics().ReplicaMoves)
	after, err := a.Store.Nodes().GetNode(a.Ctx, nd.ID)
	require.NoError(t, err)
	require.Equal(t, before.SessionEpoch, after.SessionEpoch, "the session was kept")
}

// frozenPairAtDefaults is two replicas with the default 60 s lease, an
// enabled cpp node registered on the first, the first replica behind a
// freezable front, and an echo manifest.
func frozenPairAtDefaults(t *testing.T) (a, b *controltest.Env, front *freezable, nd controltest.Node, man int64) {
	a = controltest.Start(t, controltest.Options{Store: store.Config{LeaseTTL: 60 * time.Second},
		Replica: fastReap})
	b = a.SecondReplica()
	man = publishEcho(a)
	nd = a.NewNode("cpp", 1, 4)
	a.ForceEnable(nd.ID)
	return a, b, newFreezable(t, a.URL), nd, man
}

// defaultsNode is the config of a node with the default timings that lists
// the front first and replica b second.
func (f *freezable) defaultsNode(t *testing.T, b *controltest.Env, nd controltest.Node, be worker.Backend) worker.Config {
	cfg := nodeConfig(t, f.srv.URL+","+b.URL, "cpp", nd.JoinCode, be)
	cfg.HeartbeatInterval, cfg.RenewInterval, cfg.ClaimWait, cfg.SafetyMargin, cfg.RequestTimeout = 0, 0, 0, 0, 0
	return cfg
}

// A node that left a frozen replica does not go back to it while it stays
// frozen, however often the healthy replica cuts an answer: a cut answer is
// tried again there, and the frozen replica is not taken back before it
// answers a liveness check. (Issue 47: the hang was remembered for 5 s
// only, after which every cut answer sent the node back, and each return
// cost about 2 s of liveness checking — in a 40 s freeze each node used the
// frozen replica 24–27 s.) Once the frozen replica answers again and the
// other one fails, the node does go back to it.
func TestNoReturnToAFrozenReplicaWhileTheOtherCutsAnswers(t *testing.T) {
	t.Parallel()
	a := env(t, 5*time.Second)
	b := a.SecondReplica()
	man := publishEcho(a)
	nd := a.NewNode("cpp", 1, 4)
	a.ForceEnable(nd.ID)
	front := newFreezable(t, a.URL)
	px := faultproxy.New(b.URL)
	t.Cleanup(px.Close)
	cfg := nodeConfig(t, front.srv.URL+","+px.URL(), "cpp", nd.JoinCode, newFake(false))
	cfg.ClaimWait = 500 * time.Millisecond
	n := runNode(t, cfg)
	waitJob(t, a, enqueue(a, "cpp17", man), 10*time.Second, "completed through the first replica", completed)
	require.Equal(t, 1.0, replicaInUse(t, n, front.srv.URL))

	front.frozen.Store(true)
	// Every fifth answer of the healthy replica is cut: heartbeats alone
	// (every 200 ms) make that about one a second.
	cuts := px.Add(faultproxy.Rule{Method: http.MethodPost, Action: faultproxy.DropResponse, Every: 5})
	require.Eventually(t, func() bool { return n.Metrics().ReplicaMoves == 1 }, 10*time.Second, 10*time.Millisecond,
		"the node left the frozen replica")
	// The window for calls that chose the frozen replica just before the
	// move to arrive there; none may come after it.
	time.Sleep(time.Second)
	callsWhenLeft := front.calls.Load()

	// 12 s of work through the healthy replica (more than twice the old
	// 5 s memory), sampling which replica the node uses.
	var jobs []int64
	onFrozen, samples := 0.0, 0
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); samples++ {
		jobs = append(jobs, enqueue(b, "cpp17", man))
		onFrozen += replicaInUse(t, n, front.srv.URL)
		time.Sleep(100 * time.Millisecond) // the pace of submissions and samples
	}
	t.Logf("answers cut: %d; samples on the frozen replica: %.0f of %d; node calls held by it after the move: %d",
		cuts.Hits(), onFrozen, samples, front.calls.Load()-callsWhenLeft)
	require.GreaterOrEqual(t, cuts.Hits(), 5, "the healthy replica did cut answers")
	require.Equal(t, int64(1), n.Metrics().ReplicaMoves, "moved only once: never back to the frozen replica")
	require.Zero(t, onFrozen, "the frozen replica was never the one in use again")
	require.Equal(t, callsWhenLeft, front.calls.Load(), "no call of the node went to the frozen replica after it left")
	for _, j := range jobs {
		waitJob(t, b, j, 20*time.Second, "completed through the healthy replica", completed)
	}

	// The frozen replica answers again, and the other cuts every request:
	// the node goes back.
	front.frozen.Store(false)
	px.Remove(cuts)
	px.Add(faultproxy.Rule{Action: faultproxy.Block})
	waitJob(t, a, enqueue(a, "cpp17", man), 15*time.Second, "completed through the first replica again", completed)
	require.Equal(t, int64(2), n.Metrics().ReplicaMoves)
	require.Equal(t, 1.0, replicaInUse(t, n, front.srv.URL))
}

// replicaInUse is the node's kece_node_control_replica gauge for url: 1
// while it is the replica in use.
func replicaInUse(t *testing.T, n *testNode, url string) float64 {
	t.Helper()
	s, err := telemetry.Scrape(t.Context(), "http://"+n.Addr()+"/metrics")
	require.NoError(t, err)
	return s.Sum("kece_node_control_replica", "url", url)
}
