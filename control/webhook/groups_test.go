package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/atrest"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/control/webhook"
)

// groupEvent writes a settlement event of a consumer group, as the settle
// step does, and returns its id.
func (b *testBundle) groupEvent(t testing.TB, group string, jobID int64) int64 {
	t.Helper()
	payload := fmt.Sprintf(`{"jobId":"%d","submissionType":"ALGO","submissionId":"s-%d","generation":1,"status":"AC"}`, jobID, jobID)
	r, err := b.db.ExecContext(b.ctx, `INSERT INTO judge_settlement_event (job_id, event_type, consumer_group, submission_type, submission_id, generation, payload)
		VALUES (?, 'SETTLED', ?, 'ALGO', ?, 1, ?)`, jobID, group, fmt.Sprintf("s-%d", jobID), payload)
	require.NoError(t, err)
	id, err := r.LastInsertId()
	require.NoError(t, err)
	return id
}

// groupsFixture is a database with two consumer groups, "default" and
// "other" (joined by a business token), and a webhook group store.
func groupsFixture(t *testing.T) (*testBundle, *store.WebhookGroups) {
	t.Helper()
	b := setup(t)
	_, err := b.store.Tokens().IssueToken(b.ctx, store.TokenSpec{Kind: store.TokenBusiness, Name: "other-oj", ConsumerGroup: "other"})
	require.NoError(t, err)
	key, err := atrest.ParseKey(atrest.NewKeyText())
	require.NoError(t, err)
	return b, store.NewWebhookGroups(b.db, atrest.NewKeyring(key))
}

func runDispatcher(t *testing.T, b *testBundle, wg *store.WebhookGroups, legacy *webhook.Config) *webhook.Dispatcher {
	t.Helper()
	d, err := webhook.NewDispatcher(webhook.DispatcherConfig{Groups: wg, Legacy: legacy, Refresh: 20 * time.Millisecond,
		Template: webhook.Config{BackoffBase: 50 * time.Millisecond, BackoffMax: 500 * time.Millisecond, PollInterval: 10 * time.Millisecond}},
		b.store, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

// hangingReceiver never answers until the test ends; it counts requests.
func hangingReceiver(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv, &hits
}

// TestGroupsDeliverIndependentlyAndSigned: two groups, each with its own
// endpoint and secrets; one endpoint hangs. The other group's events arrive
// promptly, signed with every secret of its own group during a rotation
// (and with no secret of the other group).
func TestGroupsDeliverIndependentlyAndSigned(t *testing.T) {
	t.Parallel()
	b, wg := groupsFixture(t)
	hang, hangHits := hangingReceiver(t)
	oldSecret, newSecret, otherSecret := webhook.NewSecret(), webhook.NewSecret(), webhook.NewSecret()

	type got struct {
		id  string
		sig string
		err error
	}
	gotc := make(chan got, 32)
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		err := webhook.VerifyStandard(newSecret, r.Header, body, time.Minute)
		if err == nil {
			err = webhook.VerifyStandard(oldSecret, r.Header, body, time.Minute)
		}
		if webhook.VerifyStandard(otherSecret, r.Header, body, time.Minute) == nil {
			err = fmt.Errorf("signed with the other group's secret")
		}
		gotc <- got{id: r.Header.Get(webhook.IDHeader), sig: r.Header.Get(webhook.StandardSignatureHeader), err: err}
	}))
	t.Cleanup(healthy.Close)

	_, _, err := wg.Put(b.ctx, store.WebhookGroupSpec{Group: "other", URL: hang.URL, Concurrency: 2,
		Timeout: 30 * time.Second, Secret: otherSecret.String(), Actor: "test"})
	require.NoError(t, err)
	_, _, err = wg.Put(b.ctx, store.WebhookGroupSpec{Group: "default", URL: healthy.URL, Secret: oldSecret.String(), Actor: "test"})
	require.NoError(t, err)
	_, err = wg.Rotate(b.ctx, "default", newSecret.String(), time.Hour, "test", "rotation under way")
	require.NoError(t, err)

	// The hanging group has work queued first, more than its concurrency.
	for i := range 6 {
		b.groupEvent(t, "other", int64(100+i))
	}
	d := runDispatcher(t, b, wg, nil)
	require.Eventually(t, func() bool { return hangHits.Load() >= 2 }, 10*time.Second, 5*time.Millisecond,
		"the hanging endpoint holds both of its group's delivery slots")
	want := map[string]bool{}
	start := time.Now()
	for i := range 5 {
		want[strconv.FormatInt(b.groupEvent(t, store.DefaultConsumerGroup, int64(200+i)), 10)] = true
	}
	for len(want) > 0 {
		select {
		case g := <-gotc:
			require.NoError(t, g.err)
			require.Len(t, strings.Fields(g.sig), 2, "one v1 signature per secret of the rotation")
			delete(want, g.id)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d events of the healthy group not delivered while the other group's endpoint hangs", len(want))
		}
	}
	// A generous bound: the healthy group's events do not wait out the
	// hanging group's 30 s timeout.
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, []string{"default", "other"}, d.Running())
	require.LessOrEqual(t, hangHits.Load(), int64(2), "the hanging group keeps to its own concurrency")
}

// TestDispatcherFollowsChanges: a rotation applies to the next delivery
// without restarting, a disabled group stops, and the deprecated
// KECE_WEBHOOK_URL group runs until the database holds its group.
func TestDispatcherFollowsChanges(t *testing.T) {
	t.Parallel()
	b, wg := groupsFixture(t)
	type req struct {
		h    http.Header
		body []byte
	}
	reqs := make(chan req, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		reqs <- req{h: r.Header.Clone(), body: body}
	}))
	t.Cleanup(srv.Close)
	legacySecret := webhook.NewSecret()
	legacy := testConfig(srv.URL)
	legacy.Secrets = []webhook.Secret{legacySecret}
	legacy.Group = "other"
	d := runDispatcher(t, b, wg, &legacy)
	require.Eventually(t, func() bool { return slices.Equal(d.Running(), []string{"other"}) }, 5*time.Second, 5*time.Millisecond)
	b.groupEvent(t, "other", 1)
	first := <-reqs
	require.NoError(t, webhook.VerifyStandard(legacySecret, first.h, first.body, time.Minute), "the implicit group signs with its file secret")

	// The database now holds a webhook for the group: it wins, and a
	// rotation's two secrets sign the next deliveries.
	s1, s2 := webhook.NewSecret(), webhook.NewSecret()
	_, _, err := wg.Put(b.ctx, store.WebhookGroupSpec{Group: "other", URL: srv.URL, Secret: s1.String(), Actor: "test"})
	require.NoError(t, err)
	_, err = wg.Rotate(b.ctx, "other", s2.String(), time.Hour, "test", "")
	require.NoError(t, err)
	// An event the file group had in flight when it stopped comes back
	// only after its lease: wait for the first delivery that the stored
	// group signed.
	deadline := time.After(15 * time.Second)
	for signed := false; !signed; {
		b.groupEvent(t, "other", time.Now().UnixNano())
		select {
		case r := <-reqs:
			signed = webhook.VerifyStandard(s1, r.h, r.body, time.Minute) == nil && webhook.VerifyStandard(s2, r.h, r.body, time.Minute) == nil &&
				webhook.VerifyStandard(legacySecret, r.h, r.body, time.Minute) != nil
		case <-time.After(500 * time.Millisecond):
		case <-deadline:
			t.Fatal("the stored group never replaced the file one, signing with both of its secrets")
		}
	}

	off := false
	_, _, err = wg.Put(b.ctx, store.WebhookGroupSpec{Group: "other", URL: srv.URL, Enabled: &off, Actor: "test"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(d.Running()) == 0 }, 5*time.Second, 5*time.Millisecond,
		"a disabled group stops, and the file setting does not bring it back")
}

// TestSettingsChangeFinishesDeliveriesInFlight: new concurrency replaces the
// group's sender; a delivery the old one had in flight still completes and
// is acknowledged, instead of waiting out its lease.
func TestSettingsChangeFinishesDeliveriesInFlight(t *testing.T) {
	t.Parallel()
	b, wg := groupsFixture(t)
	gate, arrived := make(chan struct{}), make(chan struct{}, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-gate
	}))
	t.Cleanup(srv.Close)
	_, _, err := wg.Put(b.ctx, store.WebhookGroupSpec{Group: "other", URL: srv.URL, Concurrency: 2, Timeout: time.Minute,
		Secret: webhook.NewSecret().String(), Actor: "test"})
	require.NoError(t, err)
	d := runDispatcher(t, b, wg, nil)
	id := b.groupEvent(t, "other", 1)
	<-arrived
	_, _, err = wg.Put(b.ctx, store.WebhookGroupSpec{Group: "other", URL: srv.URL, Concurrency: 3, Actor: "test"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return d.Concurrency("other") == 3 }, 5*time.Second, 5*time.Millisecond)
	close(gate)
	// The lease is a minute and 5 s: DELIVERED well before means the old
	// sender finished and acked.
	require.Eventually(t, func() bool { state, _, _ := b.state(t, id); return state == "DELIVERED" }, 10*time.Second, 10*time.Millisecond)
}

// TestHangingEndpointDelayFigures measures what one hanging endpoint costs
// another group: the healthy group's delivery delay (insert to receipt)
// while the other group's endpoint answers, then while it hangs. The
// figures are key=value lines (docs/operations.md quotes them).
func TestHangingEndpointDelayFigures(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("measures for a few seconds")
	}
	base := measureHealthyDelay(t, false)
	hung := measureHealthyDelay(t, true)
	t.Logf("webhook_groups_bench events=%d poll_interval=10ms concurrency=4 other_timeout=2s", base.n)
	t.Logf("healthy_p50_ms_other_ok=%.1f healthy_p95_ms_other_ok=%.1f healthy_max_ms_other_ok=%.1f", base.p50, base.p95, base.max)
	t.Logf("healthy_p50_ms_other_hanging=%.1f healthy_p95_ms_other_hanging=%.1f healthy_max_ms_other_hanging=%.1f other_requests_hanging=%d",
		hung.p50, hung.p95, hung.max, hung.otherHits)
	require.Equal(t, base.n, hung.n)
	require.Positive(t, hung.otherHits, "the other endpoint was tried")
	// Isolation: no healthy delivery waited out one of the hanging
	// endpoint's 2 s timeouts (which a shared sender would have made it do).
	require.Less(t, hung.p95, 2000.0, "p95 with the other group hanging")
}

type delayFigures struct {
	n             int
	p50, p95, max float64
	otherHits     int64
}

func measureHealthyDelay(t *testing.T, hangOther bool) delayFigures {
	b, wg := groupsFixture(t)
	var okHits atomic.Int64
	hits := &okHits
	var otherURL string
	if hangOther {
		var hang *httptest.Server
		hang, hits = hangingReceiver(t)
		otherURL = hang.URL
	} else {
		ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { okHits.Add(1) }))
		t.Cleanup(ok.Close)
		otherURL = ok.URL
	}
	// Inserted at, by job id (known before the insert, unlike the event id).
	var mu sync.Mutex
	sent := map[string]time.Time{}
	delays := make(chan time.Duration, 1024)
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		var e struct {
			JobID string `json:"jobId"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &e)
		mu.Lock()
		at := sent[e.JobID]
		mu.Unlock()
		delays <- now.Sub(at)
	}))
	t.Cleanup(healthy.Close)
	for group, url := range map[string]string{"default": healthy.URL, "other": otherURL} {
		_, _, err := wg.Put(b.ctx, store.WebhookGroupSpec{Group: group, URL: url, Concurrency: 4, Timeout: 2 * time.Second,
			Secret: webhook.NewSecret().String(), Actor: "bench"})
		require.NoError(t, err)
	}
	runDispatcher(t, b, wg, nil)
	const n = 200
	for i := range n {
		// Both groups get a settlement each, as a verdict fans out.
		b.groupEvent(t, "other", int64(10_000+i))
		job := int64(i + 1)
		mu.Lock()
		sent[strconv.FormatInt(job, 10)] = time.Now()
		mu.Unlock()
		b.groupEvent(t, store.DefaultConsumerGroup, job)
		time.Sleep(5 * time.Millisecond) // a steady arrival rate, not a wait for another goroutine
	}
	var ds []float64
	for len(ds) < n {
		select {
		case d := <-delays:
			ds = append(ds, float64(d.Microseconds())/1000)
		case <-time.After(15 * time.Second):
			t.Fatalf("only %d of %d healthy-group events delivered", len(ds), n)
		}
	}
	slices.Sort(ds)
	return delayFigures{n: n, p50: ds[n/2], p95: ds[n*95/100], max: ds[n-1], otherHits: hits.Load()}
}
