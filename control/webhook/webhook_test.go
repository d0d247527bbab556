package webhook_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/control/dbtest"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/control/webhook"
)

// secretText is a secret as an operator writes it in KECE_WEBHOOK_SECRET_FILE.
const secretText = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

var secrets = mustSecrets(secretText)

func mustSecrets(text string) []webhook.Secret {
	s, err := webhook.ParseSecrets(text)
	if err != nil {
		panic(err)
	}
	return s
}

type testBundle struct {
	ctx   context.Context
	db    *sql.DB
	dsn   string
	store *store.Store
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	db, dsn := dbtest.Open(t)
	st, err := store.New(db, store.Config{})
	require.NoError(t, err)
	return &testBundle{ctx: context.Background(), db: db, dsn: dsn, store: st}
}

// event writes a settlement event as the store's settle step does.
func (b *testBundle) event(t *testing.T, jobID int64) int64 {
	t.Helper()
	payload := fmt.Sprintf(`{"jobId":"%d","submissionType":"ALGO","submissionId":"s-%d","generation":1,"status":"AC",`+
		`"result":{"outcome":"VERDICT","verdict":{"status":"AC","score":1,"maxScore":1,"cases":[{"caseId":"c1","status":"AC","score":1,"timeMs":1,"wallMs":2,"memoryKb":3,"exitCode":0,"signal":0}]}}}`, jobID, jobID)
	r, err := b.db.ExecContext(b.ctx, `INSERT INTO judge_settlement_event (job_id, event_type, submission_type, submission_id, generation, payload)
		VALUES (?, 'SETTLED', 'ALGO', ?, 1, ?)`, jobID, fmt.Sprintf("s-%d", jobID), payload)
	require.NoError(t, err)
	id, err := r.LastInsertId()
	require.NoError(t, err)
	return id
}

func (b *testBundle) state(t *testing.T, id int64) (state string, attempts int, lastError string) {
	t.Helper()
	require.NoError(t, b.db.QueryRowContext(b.ctx,
		`SELECT state, attempts, COALESCE(last_error, '') FROM judge_settlement_event WHERE id = ?`, id).Scan(&state, &attempts, &lastError))
	return
}

// run starts a sender until the test ends.
func (b *testBundle) run(t *testing.T, cfg webhook.Config) {
	t.Helper()
	s, err := webhook.New(cfg, b.store, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func testConfig(url string) webhook.Config {
	return webhook.Config{URL: url, Secrets: secrets, Timeout: 2 * time.Second, MaxAttempts: 5,
		BackoffBase: 30 * time.Millisecond, BackoffMax: 200 * time.Millisecond, PollInterval: 5 * time.Millisecond}
}

type delivery struct {
	at      time.Time
	attempt string
	eventID string
	body    []byte
	sigErr  error
	legacy  error
}

func TestRetriedWithBackoffThenDelivered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.event(t, 41)
	var mu sync.Mutex
	var seen []delivery
	delivered := make(chan delivery, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d := delivery{at: time.Now(), attempt: r.Header.Get(webhook.AttemptHeader), eventID: r.Header.Get(webhook.EventIDHeader), body: body,
			sigErr: independentVerify(secretText, r.Header, body, time.Now()),
			// The deprecated header, kept for one release, signs with the same key.
			legacy: webhook.Verify([]byte("0123456789abcdef0123456789abcdef"), r.Header.Get(webhook.SignatureHeader), body, time.Minute)}
		mu.Lock()
		seen = append(seen, d)
		n := len(seen)
		mu.Unlock()
		if n <= 2 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		delivered <- d
	}))
	t.Cleanup(srv.Close)
	b.run(t, testConfig(srv.URL))

	select {
	case <-delivered:
	case <-time.After(20 * time.Second):
		t.Fatal("event was never delivered")
	}
	require.Eventually(t, func() bool { s, _, _ := b.state(t, id); return s == store.EventDelivered }, 10*time.Second, 5*time.Millisecond)
	_, attempts, _ := b.state(t, id)
	require.Equal(t, 3, attempts)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 3)
	for i, d := range seen {
		require.NoError(t, d.sigErr, "delivery %d is signed", i+1)
		require.NoError(t, d.legacy, "delivery %d still carries the old header", i+1)
		require.Equal(t, strconv.Itoa(i+1), d.attempt)
		require.Equal(t, strconv.FormatInt(id, 10), d.eventID)
		var e businessapi.SettlementEvent
		require.NoError(t, json.Unmarshal(d.body, &e))
		require.Equal(t, strconv.FormatInt(id, 10), e.EventId)
		require.Equal(t, "41", e.JobId)
		require.Equal(t, int32(i+1), e.DeliveryAttempt)
		require.Equal(t, businessapi.SubmissionStatusCodeAC, e.Payload.Status)
		require.Len(t, e.Payload.Verdict.Cases, 1)
	}
	// Backoff: at least base after the first failure, twice that after the second.
	require.GreaterOrEqual(t, seen[1].at.Sub(seen[0].at), 30*time.Millisecond)
	require.GreaterOrEqual(t, seen[2].at.Sub(seen[1].at), 60*time.Millisecond)
}

func TestAlwaysFailingReceiverMakesEventDead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.event(t, 42)
	var mu sync.Mutex
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		http.Error(w, "broken", http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	cfg := testConfig(srv.URL)
	cfg.MaxAttempts = 3
	b.run(t, cfg)

	require.Eventually(t, func() bool { s, _, _ := b.state(t, id); return s == store.EventDead }, 20*time.Second, 5*time.Millisecond)
	_, attempts, lastErr := b.state(t, id)
	require.Equal(t, 3, attempts)
	require.Contains(t, lastErr, "500")
	dead, err := b.store.Events().ListEvents(b.ctx, store.EventDead, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, id, dead[0].ID)
	mu.Lock()
	require.Equal(t, 3, hits, "a dead event is not sent again")
	mu.Unlock()
}

func TestRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.event(t, 43)
	var mu sync.Mutex
	targetHits := 0
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		targetHits++
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	cfg := testConfig(srv.URL + "/hook")
	cfg.MaxAttempts = 1
	b.run(t, cfg)
	require.Eventually(t, func() bool { s, _, _ := b.state(t, id); return s == store.EventDead }, 20*time.Second, 5*time.Millisecond)
	_, _, lastErr := b.state(t, id)
	require.Contains(t, lastErr, "307")
	mu.Lock()
	require.Zero(t, targetHits)
	mu.Unlock()
}

func TestSlowReceiverTimesOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.event(t, 44)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	cfg := testConfig(srv.URL)
	cfg.MaxAttempts, cfg.Timeout = 1, 100*time.Millisecond
	b.run(t, cfg)
	require.Eventually(t, func() bool { s, _, _ := b.state(t, id); return s == store.EventDead }, 20*time.Second, 5*time.Millisecond)
	_, _, lastErr := b.state(t, id)
	require.Contains(t, lastErr, "post:")
}

// TestTwoSendersDeliverEachEventOnce: senders in two replicas share the
// work through event leases.
func TestTwoSendersDeliverEachEventOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 40
	for i := 1; i <= n; i++ {
		b.event(t, int64(100+i))
	}
	var mu sync.Mutex
	got := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if independentVerify(secretText, r.Header, body, time.Now()) != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		got[r.Header.Get(webhook.EventIDHeader)]++
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	cfg := testConfig(srv.URL)
	cfg.Batch = 3
	b.run(t, cfg)
	other, err := store.New(dbtest.OpenDSN(t, b.dsn), store.Config{})
	require.NoError(t, err)
	s2, err := webhook.New(cfg, other, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() { defer close(done); s2.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	require.Eventually(t, func() bool {
		var left int
		require.NoError(t, b.db.QueryRowContext(b.ctx, `SELECT COUNT(*) FROM judge_settlement_event WHERE state <> 'DELIVERED'`).Scan(&left))
		return left == 0
	}, 20*time.Second, 5*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, n)
	for id, k := range got {
		require.Equal(t, 1, k, "event %s", id)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ok := webhook.Config{URL: "https://business.example/hooks/kece", Secrets: secrets}
	require.NoError(t, ok.Validate())
	for name, mut := range map[string]func(c *webhook.Config){
		"no url":       func(c *webhook.Config) { c.URL = "" },
		"relative url": func(c *webhook.Config) { c.URL = "/hooks" },
		"ftp url":      func(c *webhook.Config) { c.URL = "ftp://x/y" },
		"credentials":  func(c *webhook.Config) { c.URL = "https://u:p@business.example/" },
		"no secret":    func(c *webhook.Config) { c.Secrets = nil },
		"zero secret":  func(c *webhook.Config) { c.Secrets = []webhook.Secret{{}} },
		"five secrets": func(c *webhook.Config) {
			c.Secrets = append(mustSecrets(strings.Repeat(secretText+"\n", 4)), secrets[0])
		},
		"batch":            func(c *webhook.Config) { c.Batch = 101 },
		"negative timeout": func(c *webhook.Config) { c.Timeout = -time.Second },
		"backoff order":    func(c *webhook.Config) { c.BackoffBase, c.BackoffMax = time.Minute, time.Second },
		"attempts":         func(c *webhook.Config) { c.MaxAttempts = -1 },
		"group":            func(c *webhook.Config) { c.Group = "Not A Group" },
	} {
		c := ok
		mut(&c)
		require.Error(t, c.Validate(), name)
		_, err := webhook.New(c, nil, nil)
		require.Error(t, err, name)
	}
	// Every problem is named at once, not only the first.
	err := webhook.Config{URL: "ftp://x/y", Batch: 101, MaxAttempts: -1, Group: "Not A Group"}.Validate()
	for _, want := range []string{"absolute http(s) URL", "a secret is required", "batch 101", "max attempts -1", `consumer group "Not A Group"`} {
		require.ErrorContains(t, err, want)
	}
}

// A receiver that answers 503 with Retry-After is left alone for that long:
// the first delivery is refused and nothing more is sent until Retry-After
// passed, however many events are pending (without the hold, each pending
// event is tried at once and retried every ~30 ms). Then everything is
// delivered.
func TestReceiver503HonoursRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := make([]int64, 5)
	for i := range ids {
		ids[i] = b.event(t, int64(50+i))
	}
	var mu sync.Mutex
	var refused, accepted []time.Time
	open := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-open:
			accepted = append(accepted, time.Now())
			w.WriteHeader(http.StatusNoContent)
		default:
			refused = append(refused, time.Now())
			w.Header().Set("Retry-After", "1")
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	b.run(t, testConfig(srv.URL))
	// The receiver is down for 2.5 s: Retry-After 1 s allows 3 tries at most.
	time.AfterFunc(2500*time.Millisecond, func() { close(open) })
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if s, _, _ := b.state(t, id); s != store.EventDelivered {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, refused)
	require.LessOrEqual(t, len(refused), 3, "503 with Retry-After: 1 over 2.5 s")
	for i := 1; i < len(refused); i++ {
		require.GreaterOrEqual(t, refused[i].Sub(refused[i-1]), 990*time.Millisecond, "Retry-After honoured")
	}
	require.Len(t, accepted, len(ids))
}

// A receiver that cannot be reached is probed with a growing, capped hold,
// not hammered by every pending event: over 1.5 s with a 30 ms base and a
// 400 ms cap, a handful of connection attempts in all (without the hold,
// five events retried every 30-200 ms make dozens).
func TestUnreachableReceiverIsProbedWithBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var dials atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			c.Close() // reset before any answer
		}
	}()
	t.Cleanup(func() { ln.Close() })
	for i := 0; i < 5; i++ {
		b.event(t, int64(60+i))
	}
	cfg := testConfig("http://" + ln.Addr().String() + "/hook")
	cfg.MaxAttempts, cfg.BackoffMax = 100, 400*time.Millisecond
	b.run(t, cfg)
	time.Sleep(1500 * time.Millisecond) // the measured window, not a wait for an event
	n := dials.Load()
	require.GreaterOrEqual(t, n, int64(2), "the receiver is probed")
	require.LessOrEqual(t, n, int64(9), "connection attempts in 1.5 s")
}
