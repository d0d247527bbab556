package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/control/webhook"
)

// TestDeliversRealSettlements: events written by the scheduling core when
// a job ends (a verdict; infrastructure failures until SYSTEM_ERROR) reach
// the receiver signed and in the contract's shape.
func TestDeliversRealSettlements(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{Store: store.Config{MaxAttempts: 1}})
	manID := env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "exact"},
		controltest.Case{In: "1\n", Out: "2\n", Weight: 10})
	n := env.NewNode("cpp", 2, 2)
	j, err := env.Store.Credentials().Join(env.Ctx, n.JoinCode)
	require.NoError(t, err)
	sess, err := env.Store.Credentials().OpenSession(env.Ctx, j.Credential, "boot-e2e")
	require.NoError(t, err)
	env.ForceEnable(n.ID)
	wa := env.Enqueue("ALGO", "wa-1", "cpp17", "int main(){}", manID)
	sys := env.Enqueue("ALGO", "sys-1", "cpp17", "int main(){}", manID)
	jobs, err := env.Store.Leases().Claim(env.Ctx, sess.NodeSession, 2)
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	for _, cj := range jobs {
		res := store.Result{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{Status: "WA", Score: 0, MaxScore: 10,
			Cases: []store.CaseResult{{CaseID: "c1", Status: "WA", Message: "line 1"}}}}
		if cj.JobID == sys {
			res = store.Result{Outcome: store.OutcomeError, Error: &store.ErrorResult{Code: "IMAGE_MISSING", Message: "no image"}}
		}
		_, err := env.Store.Leases().Complete(env.Ctx, sess.NodeSession, cj.JobID, cj.LeaseEpoch, res)
		require.NoError(t, err)
	}

	got := make(chan businessapi.SettlementEvent, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.VerifyStandard(secrets[0], r.Header, body, time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var e businessapi.SettlementEvent
		if err := json.Unmarshal(body, &e); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- e
	}))
	t.Cleanup(srv.Close)
	s, err := webhook.New(testConfig(srv.URL), env.Store, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(env.Ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	byJob := map[string]businessapi.SettlementEvent{}
	for len(byJob) < 2 {
		select {
		case e := <-got:
			byJob[e.JobId] = e
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d of 2 events delivered", len(byJob))
		}
	}
	e := byJob[strconv.FormatInt(wa, 10)]
	require.Equal(t, businessapi.SubmissionStatusCodeWA, e.Payload.Status)
	require.Equal(t, "wa-1", e.SubmissionId)
	require.Equal(t, int64(1), e.Generation)
	require.Equal(t, businessapi.VerdictStatusWA, e.Payload.Verdict.Status)
	require.Equal(t, "line 1", e.Payload.Verdict.Cases[0].Message)
	e = byJob[strconv.FormatInt(sys, 10)]
	require.Equal(t, businessapi.SubmissionStatusCodeSystemError, e.Payload.Status)
	require.Equal(t, "IMAGE_MISSING", *e.Payload.ErrorCode)
	require.Nil(t, e.Payload.Verdict)
}

// A sender delivers its consumer group's events only: a group's receiver
// that keeps failing dead-letters that group's copies, while the default
// group's sender delivers every settlement exactly once.
func TestSendersPerConsumerGroup(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	_, err := env.Store.Tokens().IssueToken(env.Ctx, store.TokenSpec{Kind: store.TokenBusiness, Name: "algo-backend",
		SubmissionTypes: []string{"ALGO"}, ConsumerGroup: "algo"})
	require.NoError(t, err)
	manID := env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "exact"},
		controltest.Case{In: "1\n", Out: "2\n", Weight: 10})
	subs := []struct{ typ, id string }{{"ALGO", "a-1"}, {"ALGO", "a-2"}, {"DATABASE", "d-1"}}
	for _, s := range subs {
		env.Enqueue(s.typ, s.id, "cpp17", "int main(){}", manID)
		state, err := env.Store.Jobs().Cancel(env.Ctx, s.typ, s.id, "test", "settle it")
		require.NoError(t, err)
		require.Equal(t, store.StateCancelled, state)
	}

	var mu sync.Mutex
	defaultGot := map[string]int{}
	algoCalls := map[string]int{}
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var e businessapi.SettlementEvent
		if json.Unmarshal(body, &e) != nil || webhook.VerifyStandard(secrets[0], r.Header, body, time.Minute) != nil {
			http.Error(w, "bad delivery", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defaultGot[e.SubmissionType+"/"+e.SubmissionId]++
		mu.Unlock()
	}))
	t.Cleanup(ok.Close)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var e businessapi.SettlementEvent
		_ = json.Unmarshal(body, &e)
		mu.Lock()
		algoCalls[e.SubmissionType+"/"+e.SubmissionId]++
		mu.Unlock()
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)

	algoCfg := testConfig(failing.URL)
	algoCfg.Group, algoCfg.MaxAttempts = "algo", 2
	for _, cfg := range []webhook.Config{testConfig(ok.URL), algoCfg} {
		s, err := webhook.New(cfg, env.Store, nil)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(env.Ctx)
		done := make(chan struct{})
		go func() { defer close(done); s.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	count := func(q string) int {
		var n int
		require.NoError(t, env.DB.QueryRowContext(env.Ctx, q).Scan(&n))
		return n
	}
	require.Eventually(t, func() bool {
		return count(`SELECT COUNT(*) FROM judge_settlement_event WHERE consumer_group = 'default' AND state = 'DELIVERED'`) == 3 &&
			count(`SELECT COUNT(*) FROM judge_settlement_event WHERE consumer_group = 'algo' AND state = 'DEAD'`) == 2
	}, 20*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{"ALGO/a-1": 1, "ALGO/a-2": 1, "DATABASE/d-1": 1}, defaultGot)
	require.Equal(t, map[string]int{"ALGO/a-1": 2, "ALGO/a-2": 2}, algoCalls, "the algo group's sender tries its own events only, MaxAttempts times")
	require.Equal(t, 5, count(`SELECT COUNT(*) FROM judge_settlement_event`), "three settlements: three default rows, two ALGO rows")
}
