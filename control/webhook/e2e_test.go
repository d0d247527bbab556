package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
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
	j, err := env.Store.Join(env.Ctx, n.JoinCode)
	require.NoError(t, err)
	sess, err := env.Store.OpenSession(env.Ctx, j.Credential, "boot-e2e")
	require.NoError(t, err)
	env.ForceEnable(n.ID)
	wa := env.Enqueue("ALGO", "wa-1", "cpp17", "int main(){}", manID)
	sys := env.Enqueue("ALGO", "sys-1", "cpp17", "int main(){}", manID)
	jobs, err := env.Store.Claim(env.Ctx, sess.NodeSession, 2)
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	for _, cj := range jobs {
		res := store.Result{Outcome: store.OutcomeVerdict, Verdict: &store.VerdictResult{Status: "WA", Score: 0, MaxScore: 10,
			Cases: []store.CaseResult{{CaseID: "c1", Status: "WA", Message: "line 1"}}}}
		if cj.JobID == sys {
			res = store.Result{Outcome: store.OutcomeError, Error: &store.ErrorResult{Code: "IMAGE_MISSING", Message: "no image"}}
		}
		_, err := env.Store.Complete(env.Ctx, sess.NodeSession, cj.JobID, cj.LeaseEpoch, res)
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
