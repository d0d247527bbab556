package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/telemetry"
)

// phasesFake is the fake executor whose verdicts carry the phases ph, as
// the code executor measures them.
type phasesFake struct {
	*fakeBackend
	ph engine.Phases
}

func (b *phasesFake) Execute(ctx context.Context, task engine.Task, p engine.ProgressSink) (engine.Verdict, error) {
	v, err := b.fakeBackend.Execute(ctx, task, p)
	v.Phases = b.ph
	return v, err
}

// attemptPhases reads the phases of the job's attempts as the admin API
// shows them (nil for an attempt without).
func attemptPhases(t *testing.T, e *controltest.Env, jobID int64) []*store.Phases {
	t.Helper()
	atts, err := e.Store.Jobs().Attempts(context.Background(), jobID)
	require.NoError(t, err)
	out := make([]*store.Phases, len(atts))
	for i, a := range atts {
		out[i] = a.Phases()
	}
	return out
}

// scrapeNode reads the node's metrics.
func scrapeNode(t *testing.T, n *testNode) telemetry.Samples {
	t.Helper()
	s, err := telemetry.Scrape(context.Background(), "http://"+n.Addr()+"/metrics")
	require.NoError(t, err)
	return s
}

// A node splits each job into its phases: the queue wait the claim answer
// told it, its download, the executor's phases and flags, and its result
// post go to its metrics (one histogram by phase; compile cache hits and
// misses, warm and cold sandboxes as counters), and all but the post go
// with the result onto the job's attempt, in milliseconds.
func TestJobPhasesMeasuredAndPosted(t *testing.T) {
	t.Parallel()
	e := env(t, 5*time.Second)
	man := publishEcho(e)
	nd := e.NewNode("cpp", 1, 1)
	e.ForceEnable(nd.ID)
	ph := engine.Phases{Sandbox: 120 * time.Millisecond, Compile: 850 * time.Millisecond, Checker: 3 * time.Millisecond,
		Run: 40 * time.Millisecond, Check: 2 * time.Millisecond, CheckerCached: true}
	n := runNode(t, nodeConfig(t, e.URL, "cpp", nd.JoinCode, &phasesFake{fakeBackend: newFake(false), ph: ph}))
	pool := []string{"pool", "cpp"}
	with := func(l ...string) []string { return append(append([]string{}, pool...), l...) }
	s0 := scrapeNode(t, n)
	for _, p := range []string{"queue", "download", "sandbox", "compile", "checker", "run", "check", "post"} {
		require.Zero(t, s0.Value("kece_node_job_phase_seconds_count", with("phase", p)...), "%s: a series from the start", p)
	}
	require.Zero(t, s0.Value("kece_node_compile_cache_total", with("kind", "submission", "result", "hit")...))

	id := enqueue(e, "cpp17", man)
	waitJob(t, e, id, 10*time.Second, "completed", completed)
	// The node observes the post once its answer is back.
	require.Eventually(t, func() bool {
		return scrapeNode(t, n).Value("kece_node_job_phase_seconds_count", with("phase", "post")...) == 1
	}, 5*time.Second, 10*time.Millisecond)

	got := attemptPhases(t, e, id)
	require.Len(t, got, 1)
	p := got[0]
	require.NotNil(t, p, "the result carried the phases")
	require.NotNil(t, p.QueueMs, "the claim answer told the queue wait")
	require.GreaterOrEqual(t, *p.QueueMs, int64(0))
	require.Equal(t, store.Phases{QueueMs: p.QueueMs, DownloadMs: p.DownloadMs, SandboxMs: 120, CompileMs: 850, CheckerMs: 3, RunMs: 40,
		CheckMs: 2, ExecuteMs: p.ExecuteMs, TotalMs: p.TotalMs, CheckerCached: true}, *p)
	require.GreaterOrEqual(t, p.TotalMs, p.ExecuteMs+p.DownloadMs, "claim to result holds the download and the executor's call")

	s := scrapeNode(t, n)
	for _, c := range []struct {
		phase string
		sum   float64
	}{{"sandbox", .12}, {"compile", .85}, {"checker", .003}, {"run", .04}, {"check", .002}} {
		require.Equal(t, 1.0, s.Value("kece_node_job_phase_seconds_count", with("phase", c.phase)...), c.phase)
		require.InDelta(t, c.sum, s.Value("kece_node_job_phase_seconds_sum", with("phase", c.phase)...), 1e-9, c.phase)
	}
	for _, phase := range []string{"queue", "download"} {
		require.Equal(t, 1.0, s.Value("kece_node_job_phase_seconds_count", with("phase", phase)...), phase)
	}
	require.InDelta(t, float64(*p.QueueMs)/1000, s.Value("kece_node_job_phase_seconds_sum", with("phase", "queue")...), 1e-9)
	require.Equal(t, 1.0, s.Value("kece_node_compile_cache_total", with("kind", "submission", "result", "miss")...))
	require.Equal(t, 0.0, s.Value("kece_node_compile_cache_total", with("kind", "submission", "result", "hit")...))
	require.Equal(t, 1.0, s.Value("kece_node_compile_cache_total", with("kind", "checker", "result", "hit")...))
	require.Equal(t, 1.0, s.Value("kece_node_sandboxes_total", with("start", "cold")...))
	require.Equal(t, 0.0, s.Value("kece_node_sandboxes_total", with("start", "warm")...))
	// The metrics from before phases still move.
	require.Equal(t, 1.0, s.Value("kece_node_job_duration_seconds_count", with("kind", "submission")...))
	require.Equal(t, 1.0, s.Value("kece_node_run_seconds_count", pool...))
}

// adminJob reads a job as the admin API's job detail shows it.
func adminJob(t *testing.T, e *controltest.Env, jobID int64) adminapi.JudgeJobDetail {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.URL+"/api/v1/admin/judge-jobs/"+idStr(jobID), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e.Admin)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var d adminapi.JudgeJobDetail
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&d))
	return d
}

// A real cpp node judging in Docker splits its jobs into phases, and the
// admin API's job detail shows them: a special-judge submission pays its
// sandbox, compile, checker compile and runs; the same source again on the
// same problem finds both compiles in the node's compile cache.
func TestJobPhasesInDocker(t *testing.T) {
	t.Parallel()
	requireDocker(t, "cpp")
	e := env(t, 20*time.Second)
	n := codeNode(t, e, "cpp")
	put := func(name string) (string, int64) {
		b := []byte(testdata(t, name))
		return e.PutArtifact(b), int64(len(b))
	}
	src, srcSize := put("testlib_checker.cpp")
	hdr, hdrSize := put("testlib_mini.h")
	man := e.PublishCode(manifest.Limits{TimeMs: 2000, MemoryMb: 256, OutputKb: 64}, manifest.Checker{Type: "special",
		Special: &manifest.SpecialChecker{Language: "cpp17", SourceSha256: src, SourceSize: srcSize, Protocol: manifest.ProtocolTestlib,
			MaxPoints: 100, Files: []manifest.CheckerFile{{Name: "testlib.h", Sha256: hdr, Size: hdrSize}}}},
		controltest.Case{In: "ok\n", Out: "ANSWER\n", Weight: 1})
	echo := "#include <iostream>\n#include <string>\nint main(){std::string s;std::getline(std::cin,s);std::cout<<s<<\"\\n\";}\n"

	judge := func(sub string) adminapi.AttemptPhases {
		t.Helper()
		id := e.Enqueue("ALGO", sub, "cpp17", echo, man)
		j := waitJob(t, e, id, 3*time.Minute, "completed", completed)
		require.Equal(t, "AC", j.Verdict, string(j.Result))
		d := adminJob(t, e, id)
		require.Len(t, d.Attempts, 1)
		p := d.Attempts[0].Phases
		require.NotNil(t, p, "the job detail shows the attempt's phases")
		require.NotNil(t, p.QueueMs)
		require.Positive(t, p.SandboxMs, "sandbox")
		require.Positive(t, p.RunMs, "run")
		require.Positive(t, p.ExecuteMs)
		require.GreaterOrEqual(t, p.ExecuteMs, p.SandboxMs)
		require.GreaterOrEqual(t, p.TotalMs, p.ExecuteMs+p.DownloadMs)
		t.Logf("%s: queue=%dms download=%dms sandbox=%dms compile=%dms (cached %v) checker=%dms (cached %v) run=%dms check=%dms executor=%dms total=%dms warm=%v",
			sub, *p.QueueMs, p.DownloadMs, p.SandboxMs, p.CompileMs, p.CompileCached, p.CheckerMs, p.CheckerCached, p.RunMs, p.CheckMs,
			p.ExecuteMs, p.TotalMs, p.SandboxWarm)
		return *p
	}
	first := judge("phases-first")
	require.False(t, first.CompileCached)
	require.False(t, first.CheckerCached)
	require.Positive(t, first.CompileMs, "compile")
	require.Positive(t, first.CheckerMs, "checker compile")
	second := judge("phases-second")
	require.True(t, second.CompileCached, "the same source on the same node: the compile cache")
	require.True(t, second.CheckerCached, "the checker is compiled once per node")

	s := scrapeNode(t, n)
	with := func(l ...string) []string { return append([]string{"pool", "cpp"}, l...) }
	require.Equal(t, 1.0, s.Value("kece_node_compile_cache_total", with("kind", "submission", "result", "miss")...))
	require.Equal(t, 1.0, s.Value("kece_node_compile_cache_total", with("kind", "submission", "result", "hit")...))
	require.Equal(t, 1.0, s.Value("kece_node_compile_cache_total", with("kind", "checker", "result", "miss")...))
	require.Equal(t, 1.0, s.Value("kece_node_compile_cache_total", with("kind", "checker", "result", "hit")...))
	require.Equal(t, 2.0, s.Sum("kece_node_sandboxes_total"))
	for _, phase := range []string{"queue", "download", "sandbox", "compile", "checker", "run"} {
		require.Equal(t, 2.0, s.Value("kece_node_job_phase_seconds_count", with("phase", phase)...), phase)
	}
	require.Eventually(t, func() bool {
		return scrapeNode(t, n).Value("kece_node_job_phase_seconds_count", with("phase", "post")...) == 2
	}, 5*time.Second, 10*time.Millisecond)
}

// olderControlPlane stands in front of a control plane as one from before
// job phases would answer: its session answer does not say resultPhases,
// and it refuses a result with the unknown phases property, as its request
// validation would (400). refused counts those refusals.
func olderControlPlane(t *testing.T, upstream string) (url string, refused *atomic.Int64) {
	t.Helper()
	target, err := neturl.Parse(upstream)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ModifyResponse = func(resp *http.Response) error {
		if !strings.HasSuffix(resp.Request.URL.Path, "/judgers/session") || resp.StatusCode != http.StatusOK {
			return nil
		}
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			return err
		}
		resp.Body.Close()
		delete(m, "resultPhases")
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	refused = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/result") {
			b, err := io.ReadAll(r.Body)
			require.NoError(t, err)
			if bytes.Contains(b, []byte(`"phases"`)) {
				refused.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"code":"REQUEST_INVALID","message":"property \"phases\" is unsupported"}`))
				return
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, refused
}

// A node sends phases only to a control plane that said it takes them: an
// older one gets its results as before, and they are accepted.
func TestNoPhasesForAnOlderControlPlane(t *testing.T) {
	t.Parallel()
	e := env(t, 5*time.Second)
	man := publishEcho(e)
	nd := e.NewNode("cpp", 1, 1)
	e.ForceEnable(nd.ID)
	url, refused := olderControlPlane(t, e.URL)
	fake := &phasesFake{fakeBackend: newFake(false), ph: engine.Phases{Sandbox: time.Millisecond, Run: time.Millisecond}}
	n := runNode(t, nodeConfig(t, url, "cpp", nd.JoinCode, fake))
	id := enqueue(e, "cpp17", man)
	j := waitJob(t, e, id, 10*time.Second, "completed", completed)
	require.Equal(t, "AC", j.Verdict)
	require.Equal(t, 1, j.AttemptCount)
	require.Zero(t, refused.Load(), "no result carried phases")
	require.Zero(t, n.Metrics().NodeDefects)
	require.Equal(t, []*store.Phases{nil}, attemptPhases(t, e, id))
}
