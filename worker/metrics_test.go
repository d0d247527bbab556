package worker_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/telemetry"
)

// phasedBackend wraps the fake: it reports a compile phase first, can fail
// one execution with a checker infrastructure error, and can hold a job
// until released.
type phasedBackend struct {
	*fakeBackend
	fail atomic.Bool
	hold atomic.Pointer[chan struct{}]
}

func (b *phasedBackend) Execute(ctx context.Context, task engine.Task, p engine.ProgressSink) (engine.Verdict, error) {
	p.Report(engine.Progress{Phase: engine.PhaseCompiling, CasesTotal: len(task.Cases)})
	time.Sleep(5 * time.Millisecond) // a compile that takes measurable time
	if h := b.hold.Load(); h != nil {
		select {
		case <-*h:
		case <-ctx.Done():
		}
	}
	if b.fail.CompareAndSwap(true, false) { // one failure; the retry succeeds
		p.Report(engine.Progress{Phase: engine.PhaseJudging, CasesTotal: len(task.Cases)})
		return engine.Verdict{}, engine.Infraf(engine.InfraCheckerFailed, "checker crashed")
	}
	return b.fakeBackend.Execute(ctx, task, p)
}

// Every node metric moves when its event happens: jobs by outcome, job,
// compile and run histograms, claim round trips, artifact cache hits,
// misses, bytes and evictions, infrastructure errors by kind, busy slots;
// the node id is on kece_node_info and every series carries the pool.
func TestNodeMetricsMove(t *testing.T) {
	t.Parallel()
	e := env(t, 5*time.Second)
	blob := func(c byte) string { return strings.Repeat(string(c), 1000) }
	manA := publishEcho(e, controltest.Case{In: blob('a'), Out: blob('a'), Weight: 100})
	manB := publishEcho(e, controltest.Case{In: blob('b'), Out: blob('b'), Weight: 100})
	nd := e.NewNode("cpp", 1, 1)
	e.ForceEnable(nd.ID)
	b := &phasedBackend{fakeBackend: newFake(false)}
	cfg := nodeConfig(t, e.URL, "cpp", nd.JoinCode, b)
	cfg.CacheMaxBytes = 1500 // room for one 1000-byte file: B evicts A
	n := runNode(t, cfg)
	scrape := func() telemetry.Samples {
		s, err := telemetry.Scrape(context.Background(), "http://"+n.Addr()+"/metrics")
		require.NoError(t, err)
		return s
	}
	pool := []string{"pool", "cpp"}
	with := func(l ...string) []string { return append(append([]string{}, pool...), l...) }

	s0 := scrape()
	require.Equal(t, 1.0, s0.Value("kece_node_info", with("node_id", idStr(nd.ID))...))
	require.Equal(t, 1.0, s0.Sum("kece_build_info", "component", "node"))
	require.Positive(t, s0.Value("process_resident_memory_bytes"))
	require.Equal(t, 1.0, s0.Value("kece_node_slots", pool...))
	require.Equal(t, 0.0, s0.Value("kece_node_slots_busy", pool...))
	require.Equal(t, 1.0, s0.Value("kece_node_healthy", pool...))

	run := func(man int64) {
		t.Helper()
		done := scrape().Sum("kece_node_jobs_total")
		id := enqueue(e, "cpp17", man)
		waitJob(t, e, id, 10*time.Second, "completed", completed)
		// The node counts after the result is posted; wait for its metrics.
		require.Eventually(t, func() bool { return scrape().Sum("kece_node_jobs_total") >= done+1 }, 5*time.Second, 10*time.Millisecond)
	}
	run(manA)
	s1 := scrape()
	require.Equal(t, 1.0, s1.Value("kece_node_jobs_total", with("outcome", "ac")...))
	require.Equal(t, 1.0, s1.Value("kece_node_job_duration_seconds_count", with("kind", "submission")...))
	require.Equal(t, 1.0, s1.Value("kece_node_compile_seconds_count", pool...))
	require.GreaterOrEqual(t, s1.Value("kece_node_compile_seconds_sum", pool...), 0.005)
	require.Equal(t, 1.0, s1.Value("kece_node_run_seconds_count", pool...))
	require.GreaterOrEqual(t, s1.Value("kece_node_claim_round_trip_seconds_count", with("result", "jobs")...), 1.0)
	require.Equal(t, 1.0, s1.Value("kece_node_artifact_cache_misses_total", pool...), "input and output share one digest")
	require.Equal(t, 1.0, s1.Value("kece_node_artifact_cache_hits_total", pool...))
	require.Equal(t, 1000.0, s1.Value("kece_node_artifact_cache_bytes", pool...))
	require.Equal(t, 1.0, s1.Value("kece_node_results_accepted_total", pool...))

	run(manA)
	s2 := scrape()
	require.Equal(t, 2.0, s2.Value("kece_node_jobs_total", with("outcome", "ac")...))
	require.Equal(t, 1.0, s2.Value("kece_node_artifact_cache_misses_total", pool...), "served from the cache")
	require.Equal(t, 3.0, s2.Value("kece_node_artifact_cache_hits_total", pool...))
	require.Equal(t, 0.0, s2.Value("kece_node_artifact_cache_evictions_total", pool...))

	run(manB)
	s3 := scrape()
	require.Equal(t, 2.0, s3.Value("kece_node_artifact_cache_misses_total", pool...))
	require.Equal(t, 1.0, s3.Value("kece_node_artifact_cache_evictions_total", pool...), "A leaves for B")

	// A checker crash is an infrastructure error of its kind.
	b.fail.Store(true)
	id := enqueue(e, "cpp17", manB)
	require.Eventually(t, func() bool {
		s := scrape()
		return s.Value("kece_node_infra_errors_total", with("error_class", "checker_failed")...) == 1 &&
			s.Value("kece_node_jobs_total", with("outcome", "infra_error")...) == 1
	}, 10*time.Second, 10*time.Millisecond)
	waitJob(t, e, id, 10*time.Second, "completed after the retry", completed)

	// A running job holds a slot.
	hold := make(chan struct{})
	b.hold.Store(&hold)
	id = enqueue(e, "cpp17", manB)
	require.Eventually(t, func() bool { return scrape().Value("kece_node_slots_busy", pool...) == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return scrape().Value("kece_node_slots_executing", pool...) == 1 }, 10*time.Second, 10*time.Millisecond,
		"the held job is in the executor")
	close(hold)
	waitJob(t, e, id, 10*time.Second, "completed", completed)
	require.Eventually(t, func() bool { return scrape().Value("kece_node_slots_busy", pool...) == 0 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, 0.0, scrape().Value("kece_node_slots_executing", pool...))
	require.Positive(t, scrape().Value("kece_node_heartbeats_total", pool...))
}
