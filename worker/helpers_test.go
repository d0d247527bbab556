package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/maintenance"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/replica"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/worker"
)

// fakeBackend is a deterministic executor for lease logic: it "runs" an echo
// program (output = input) and compares with the expected file, so it does
// read the verified case files. With block set, every execution waits for
// release(jobID) or its context.
type fakeBackend struct {
	block bool
	// badCase makes every verdict name a case the manifest does not have.
	badCase bool
	// sick makes the health probe report an unhealthy dependency and every
	// job fail as DAEMON_UNREACHABLE, as with the Docker daemon stopped.
	sick atomic.Bool

	mu        sync.Mutex
	gates     map[string]chan struct{}
	runs      map[string]int
	started   chan string
	cancelled chan string
	janitors  int
}

func newFake(block bool) *fakeBackend {
	return &fakeBackend{block: block, gates: map[string]chan struct{}{}, runs: map[string]int{},
		started: make(chan string, 100), cancelled: make(chan string, 100)}
}

func (f *fakeBackend) gate(jobID string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.gates[jobID]
	if !ok {
		g = make(chan struct{})
		f.gates[jobID] = g
	}
	return g
}

func (f *fakeBackend) release(jobID string) { close(f.gate(jobID)) }

func (f *fakeBackend) ran(jobID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[jobID]
}

func (f *fakeBackend) totalRuns() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, v := range f.runs {
		n += v
	}
	return n
}

func (f *fakeBackend) Execute(ctx context.Context, task engine.Task, p engine.ProgressSink) (engine.Verdict, error) {
	f.mu.Lock()
	f.runs[task.JobID]++
	f.mu.Unlock()
	f.started <- task.JobID
	p.Report(engine.Progress{Phase: engine.PhaseJudging, CasesTotal: len(task.Cases)})
	if f.block {
		select {
		case <-f.gate(task.JobID):
		case <-ctx.Done():
			f.cancelled <- task.JobID
			return engine.Verdict{}, engine.Infra(engine.InfraCancelled, context.Cause(ctx))
		}
	}
	if f.sick.Load() {
		return engine.Verdict{}, engine.Infraf(engine.InfraDaemonUnreachable, "fake: daemon unreachable")
	}
	v := engine.Verdict{Status: engine.StatusAccepted}
	for i, c := range task.Cases {
		in, err := os.ReadFile(c.InputPath)
		if err != nil {
			return engine.Verdict{}, engine.Infra(engine.InfraCorruptInput, err)
		}
		exp, err := os.ReadFile(c.ExpectedPath)
		if err != nil {
			return engine.Verdict{}, engine.Infra(engine.InfraCorruptInput, err)
		}
		cr := engine.CaseResult{ID: c.ID, Status: engine.StatusAccepted, Score: float64(c.Weight), CPUTime: time.Millisecond}
		if f.badCase {
			cr.ID = "not-in-manifest"
		}
		if !bytes.Equal(in, exp) {
			cr.Status, cr.Score, cr.Message = engine.StatusWrongAnswer, 0, "differs"
			if v.Status == engine.StatusAccepted {
				v.Status = engine.StatusWrongAnswer
			}
		}
		v.Score += cr.Score
		v.MaxScore += c.Weight
		v.Cases = append(v.Cases, cr)
		p.Report(engine.Progress{Phase: engine.PhaseJudging, CasesDone: i + 1, CasesTotal: len(task.Cases)})
	}
	return v, nil
}

func (f *fakeBackend) Runtime(language string) (engine.RuntimeSpec, error) {
	pool, ok := contracts.PoolOfLanguage(language)
	if !ok {
		return engine.RuntimeSpec{}, fmt.Errorf("fake: unknown language %q", language)
	}
	return engine.RuntimeSpec{Pool: pool, Language: language, Image: "fake", SourceFile: "main", RunCmd: []string{"./main"}}, nil
}

func (f *fakeBackend) Janitor(context.Context, func(string, int64) bool) error {
	f.mu.Lock()
	f.janitors++
	f.mu.Unlock()
	return nil
}

func (f *fakeBackend) Health(context.Context) worker.Health {
	langs := []worker.LanguageReport{{ID: "cpp17", Pool: "cpp", Standard: "Fake C++17", CompileCmd: []string{"fakecc", "-o", "main", "it's main.cpp"},
		RunCmd: []string{"./main"}, EntryRule: "saved as main.cpp", MinMemoryBytes: 1 << 20}}
	if f.sick.Load() {
		return worker.Health{Dependencies: []worker.Dependency{{Name: "fake", Healthy: false, Detail: "daemon unreachable"}}, Languages: langs,
			Features: fakeFeatures}
	}
	langs[0].Version = "fake-runtime 1.0"
	return worker.Health{Runtime: "fake-runtime 1.0", Dependencies: []worker.Dependency{{Name: "fake", Healthy: true}}, Languages: langs,
		Features: fakeFeatures}
}

func (f *fakeBackend) Close() error { return nil }

// fakeFeatures are the problem types the fake executor says it judges.
var fakeFeatures = []string{"batch", "file_io"}

// waitStarted waits for the fake to start jobID (or any job when empty).
func (f *fakeBackend) waitStarted(t *testing.T, within time.Duration) string {
	t.Helper()
	select {
	case id := <-f.started:
		return id
	case <-time.After(within):
		t.Fatalf("no execution started within %s", within)
		return ""
	}
}

// fastReap is a replica that reaps expired leases every 50 ms, so a fault
// test sees a dead node's job move on at once.
var fastReap = replica.Config{Maintenance: maintenance.Config{ReapInterval: 50 * time.Millisecond}}

// env starts a control plane with short leases for fault tests.
func env(t *testing.T, leaseTTL time.Duration) *controltest.Env {
	t.Helper()
	return envWith(t, store.Config{LeaseTTL: leaseTTL})
}

// envWith is env with the store configured by cfg.
func envWith(t *testing.T, cfg store.Config) *controltest.Env {
	t.Helper()
	return controltest.Start(t, controltest.Options{Store: cfg,
		Replica: fastReap, HTTP: httpapi.Config{RenewInterval: 200 * time.Millisecond,
			HeartbeatInterval: 200 * time.Millisecond, ClaimWaitMax: 2 * time.Second}})
}

type testNode struct {
	*worker.Node
	cfg    worker.Config
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// wait returns Run's error once it returned.
func (n *testNode) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case <-n.done:
		return n.err
	case <-time.After(within):
		t.Fatalf("node did not stop within %s", within)
		return nil
	}
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func testLogger(t *testing.T, name string) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test_node", name)
}

// nodeConfig is a fast configuration for tests.
func nodeConfig(t *testing.T, url, pool, joinCode string, b worker.Backend) worker.Config {
	dir := t.TempDir()
	return worker.Config{
		Pool: pool, ControlURL: url, CredentialFile: filepath.Join(dir, "credential.json"), JoinCode: joinCode,
		LocalSlots: 1, CacheDir: filepath.Join(dir, "cache"), Listen: "127.0.0.1:0",
		NewBackend:        func(context.Context, string) (worker.Backend, error) { return b, nil },
		HeartbeatInterval: 200 * time.Millisecond, RenewInterval: 300 * time.Millisecond, ClaimWait: 2 * time.Second,
		SafetyMargin: 500 * time.Millisecond, DrainGrace: 20 * time.Second, RequestTimeout: 5 * time.Second,
		HealthInterval: 10 * time.Second, JanitorInterval: 10 * time.Second, RetryBase: 20 * time.Millisecond,
		RetryMax: 200 * time.Millisecond, CleanupTimeout: 5 * time.Second, Version: "test",
		Logger: testLogger(t, pool+"-"+filepath.Base(dir)),
	}
}

// runNode starts a node and stops it (at once) when the test ends.
func runNode(t *testing.T, cfg worker.Config) *testNode {
	t.Helper()
	n, err := worker.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	tn := &testNode{Node: n, cfg: cfg, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tn.done)
		tn.err = n.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-tn.done:
		case <-time.After(30 * time.Second):
			t.Error("node did not stop within 30s")
		}
	})
	select {
	case <-n.Ready():
	case <-tn.done:
		t.Fatalf("node stopped before it was ready: %v", tn.err)
	case <-time.After(20 * time.Second):
		t.Fatal("node not ready within 20s")
	}
	return tn
}

// waitJob polls the store until pred holds for the job.
func waitJob(t *testing.T, e *controltest.Env, jobID int64, within time.Duration, what string, pred func(store.Job) bool) store.Job {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		last, err := e.Store.Jobs().GetJob(context.Background(), jobID)
		require.NoError(t, err)
		if pred(last) {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d: %s not within %s (last state %s, attempts %d, last error %q, epoch %d, node %d)",
				jobID, what, within, last.State, last.AttemptCount, last.LastErrorCode, last.LeaseEpoch, last.NodeID)
		}
		time.Sleep(20 * time.Millisecond) // the poll interval of a database read, as require.Eventually's
	}
}

func completed(j store.Job) bool { return j.State == store.StateCompleted }

func idStr(id int64) string { return strconv.FormatInt(id, 10) }

// publishEcho publishes a CODE manifest whose cases the fake judges AC.
func publishEcho(e *controltest.Env, cases ...controltest.Case) int64 {
	if len(cases) == 0 {
		cases = []controltest.Case{{In: "1 2\n", Out: "1 2\n", Weight: 60}, {In: "", Out: "", Weight: 40}}
	}
	return e.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"}, cases...)
}

var subSeq struct {
	sync.Mutex
	n int
}

// enqueue adds a cpp submission (a unique id per call).
func enqueue(e *controltest.Env, lang string, manID int64) int64 {
	subSeq.Lock()
	subSeq.n++
	id := fmt.Sprintf("s%d-%d", time.Now().UnixNano(), subSeq.n)
	subSeq.Unlock()
	return e.Enqueue("ALGO", id, lang, "int main(){}", manID)
}

// healthz fetches the node's /healthz.
func healthz(t *testing.T, n *testNode) worker.Status {
	t.Helper()
	resp, err := http.Get("http://" + n.Addr() + "/healthz")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st worker.Status
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// eventsFor counts settlement events of a job.
func eventsFor(t *testing.T, e *controltest.Env, jobID int64) int {
	t.Helper()
	var n int
	require.NoError(t, e.DB.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM judge_settlement_event WHERE job_id = ?`, jobID).Scan(&n))
	return n
}

// contextWithTimeout is a context for a node run bounded by the test.
func contextWithTimeout(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	t.Helper()
	return context.WithTimeout(context.Background(), d)
}
