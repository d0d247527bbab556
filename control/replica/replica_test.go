package replica_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/dbtest"
	"github.com/kece-oj/kece/control/maintenance"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/ratelimit"
	"github.com/kece-oj/kece/control/replica"
	"github.com/kece-oj/kece/control/store"
)

// Validate names every bad setting at once, and a zero Config takes the
// defaults, which are valid; the reap interval's default and bound are the
// store's.
func TestConfigValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	cfg := replica.Config{}.WithDefaults()
	require.NoError(t, cfg.Validate())
	require.Equal(t, store.ReapIntervalDefault, cfg.Maintenance.ReapInterval)
	err := replica.Config{Store: store.Config{MaxAttempts: 1000}, Maintenance: maintenance.Config{ReapInterval: time.Millisecond},
		SignalPollInterval: -time.Second, RateLimit: &ratelimit.Config{Default: ratelimit.Limit{Rate: -1}}}.WithDefaults().Validate()
	for _, want := range []string{"max attempts 1000 must be 1..100", "reap interval 1ms is below 10ms", "signal poll interval -1s is below 1ms",
		"rate limit default"} {
		require.ErrorContains(t, err, want)
	}
}

// Run starts every background service and, when its context ends, returns
// only after all of them stopped: the reaper passes, then never again.
func TestRunStartsServicesAndStopsThemOnCancel(t *testing.T) {
	t.Parallel()
	db, _ := dbtest.Open(t)
	arts, err := artifact.OpenStore(context.Background(), artifact.StoreConfig{Root: t.TempDir()})
	require.NoError(t, err)
	const reap = 20 * time.Millisecond
	rep, err := replica.New(replica.Config{Maintenance: maintenance.Config{ReapInterval: reap}}, db, arts, nil)
	require.NoError(t, err)
	require.Nil(t, rep.HTTPDeps().RateLimiter, "no RateLimit: business clients are not limited")
	sig := rep.Maintenance().EnableTestSignals()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- rep.Run(ctx) }()
	for range 2 {
		select {
		case pass := <-sig.Reaped:
			require.NoError(t, pass.Err)
		case <-time.After(10 * time.Second):
			t.Fatal("the reaper never passed: maintenance did not start")
		}
	}
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	// Run has returned, so every service has: whatever pass was under way
	// has been offered already; none may follow.
	for len(sig.Reaped) > 0 {
		<-sig.Reaped
	}
	require.Never(t, func() bool { return len(sig.Reaped) > 0 }, 10*reap, reap, "a reaper pass after Run returned")
	require.Error(t, rep.Run(context.Background()), "a replica runs once")
}

// The store owns wake-ups: an enqueue through the replica's store wakes a
// parked claim of its pool, and a cancel wakes the job's waiting status
// reads, with nothing from the HTTP layer in between. The pollers that
// would also see it (cross-replica paths) wait an hour here, so only the
// commit can wake them.
func TestStoreCommitsWakeTheReplicasWaiters(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{Replica: replica.Config{SignalPollInterval: time.Hour, SettlePollInterval: time.Hour}})
	man := env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1\n", Out: "1\n", Weight: 100})
	deps := env.Replica.HTTPDeps()
	claim := deps.Claims.Watch("cpp")
	defer deps.Claims.Done(claim)
	job := env.Enqueue("ALGO", "wake-1", "cpp17", "int main(){}", man)
	waitClosed(t, claim, "a claim of the pool after an enqueue")

	settled, stop := deps.Settlements.Watch(job)
	defer stop()
	state, err := env.Replica.Store().Jobs().Cancel(env.Ctx, "ALGO", "wake-1", "test", "wake-up test")
	require.NoError(t, err)
	require.Equal(t, store.StateCancelled, state)
	waitClosed(t, settled, "a status read of the cancelled job")
}

// waitClosed fails unless ch is closed within a bound far below the
// pollers' hour.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s was not woken", what)
	}
}

// The replica builds one rate limiter from its config and hands it to the
// HTTP layer: its default applies to every business token without a
// budget of its own. Without a config there is none (not a nil pointer in
// the interface).
func TestReplicaHandsItsRateLimiterToHTTP(t *testing.T) {
	t.Parallel()
	db, _ := dbtest.Open(t)
	arts, err := artifact.OpenStore(context.Background(), artifact.StoreConfig{Root: t.TempDir()})
	require.NoError(t, err)
	rep, err := replica.New(replica.Config{RateLimit: &ratelimit.Config{Default: ratelimit.Limit{Rate: 1, Burst: 3}}}, db, arts, nil)
	require.NoError(t, err)
	lim := rep.HTTPDeps().RateLimiter
	require.NotNil(t, lim)
	admitted := 0
	for range 10 {
		if ok, _ := lim.Allow(42, nil); ok {
			admitted++
		}
	}
	require.Equal(t, 3, admitted, "the configured burst, not unlimited")
	plain, err := replica.New(replica.Config{}, db, arts, nil)
	require.NoError(t, err)
	require.Nil(t, plain.HTTPDeps().RateLimiter)
}
