package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/dbtest"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/metrics"
	"github.com/kece-oj/kece/control/replica"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/control/webhook"
	"github.com/kece-oj/kece/telemetry"
)

// syncBuffer collects log lines written from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines returns every JSON log line logged so far.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		out = append(out, m)
	}
	return out
}

type obsEnv struct {
	*controltest.Env
	logs *syncBuffer
}

func startObserved(t *testing.T, st store.Config) *obsEnv {
	logs := &syncBuffer{}
	log, err := telemetry.NewLogger(logs, telemetry.LogConfig{Format: "json", Level: "debug"})
	require.NoError(t, err)
	env := controltest.Start(t, controltest.Options{Store: st, Logger: log,
		// No cache: each scrape reads the fleet gauges afresh.
		Replica: replica.Config{Metrics: metrics.Config{FleetCacheTTL: time.Nanosecond}}})
	return &obsEnv{Env: env, logs: logs}
}

func (e *obsEnv) scrape(t *testing.T) telemetry.Samples {
	t.Helper()
	s, err := telemetry.Scrape(e.Ctx, e.URL+"/metrics")
	require.NoError(t, err)
	return s
}

// moved asserts that a series grew by exactly want between two scrapes.
func moved(t *testing.T, before, after telemetry.Samples, want float64, name string, labels ...string) {
	t.Helper()
	require.Equal(t, want, after.Value(name, labels...)-before.Value(name, labels...),
		"%s moved by %v", telemetry.SeriesKey(name, labels...), after.Value(name, labels...)-before.Value(name, labels...))
}

// Every control-plane metric moves when its event happens: enqueue, claim
// (transaction and long-poll wait), results of each kind, refusals, infra
// retries, SYSTEM_ERROR, lease expiry, event delivery and dead-lettering,
// webhook results, and the fleet gauges read from the database.
func TestControlMetricsMove(t *testing.T) {
	t.Parallel()
	e := startObserved(t, store.Config{LeaseTTL: 3 * time.Second, MaxAttempts: 2})
	biz := bizClient(t, e.URL, e.Business)
	manID := e.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 100})
	s0 := e.scrape(t)
	require.Equal(t, 1.0, s0.Sum("kece_build_info", "component", "control"))
	require.Positive(t, s0.Value("process_resident_memory_bytes"), "standard process collector")
	require.Positive(t, s0.Value("go_goroutines"), "standard go collector")
	require.Equal(t, 0.0, s0.Value("kece_control_queue_depth", "pool", "cpp"))
	require.Equal(t, 0.0, s0.Value("kece_control_ready_nodes", "pool", "cpp"))

	// Enqueue through the business API.
	enqueue := func(id string) int64 {
		r, err := biz.EnqueueSubmissionWithResponse(e.Ctx, nil, businessapi.SubmissionCreate{SubmissionType: "ALGO",
			SubmissionId: id, Language: "cpp17", Source: "int main(){}", ManifestId: idStr(manID)})
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, r.StatusCode(), string(r.Body))
		j, err := e.Store.Jobs().SubmissionStatus(e.Ctx, "ALGO", id)
		require.NoError(t, err)
		return j.JobID
	}
	enqueue("m-1")
	s1 := e.scrape(t)
	moved(t, s0, s1, 1, "kece_control_jobs_enqueued_total", "pool", "cpp", "kind", "submission")
	require.Equal(t, 1.0, s1.Value("kece_control_queue_depth", "pool", "cpp"))
	moved(t, s0, s1, 1, "kece_control_http_request_duration_seconds_count",
		"surface", "business", "route", "/api/v1/submissions", "method", "post", "status_code", "202")
	require.Eventually(t, func() bool { return e.scrape(t).Value("kece_control_queue_oldest_wait_seconds", "pool", "cpp") > 0 },
		5*time.Second, 20*time.Millisecond, "oldest wait grows while the job waits")

	// A node comes up: ready nodes and slots per pool.
	n := e.NewNode("cpp", 3, 4)
	nc := joinAndOpen(t, e.Env, n.JoinCode, "boot-metrics-1")
	e.ForceEnable(n.ID)
	hb, err := nc.c.SendHeartbeatWithResponse(e.Ctx, machineapi.HeartbeatRequest{RuntimeVersion: "g++", LocalSlots: 3,
		Dependencies: []machineapi.Dependency{{Name: "docker", Healthy: true}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, hb.StatusCode())
	s2 := e.scrape(t)
	require.Equal(t, 1.0, s2.Value("kece_control_ready_nodes", "pool", "cpp"))
	require.Equal(t, 3.0, s2.Value("kece_control_ready_slots", "pool", "cpp"))
	require.Equal(t, 1.0, s2.Value("kece_control_nodes", "pool", "cpp", "state", "enabled", "online", "true"))

	claim := func(free int) []machineapi.ClaimedJob {
		r, err := nc.c.ClaimJobsWithResponse(e.Ctx, machineapi.ClaimRequest{FreeSlots: int32(free), WaitMs: 2000})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
		return r.JSON200.Jobs
	}
	jobs := claim(1)
	require.Len(t, jobs, 1)
	s3 := e.scrape(t)
	moved(t, s2, s3, 1, "kece_control_jobs_claimed_total", "pool", "cpp")
	moved(t, s2, s3, 1, "kece_control_job_pickup_seconds_count", "pool", "cpp", "kind", "submission")
	require.Positive(t, s3.Value("kece_control_job_pickup_seconds_sum", "pool", "cpp", "kind", "submission"), "it waited ready")
	require.Equal(t, 0.0, s3.Value("kece_control_nodes", "pool", "java", "state", "enabled", "online", "false"),
		"empty combinations are exported at 0")
	require.GreaterOrEqual(t, s3.Value("kece_control_claim_transaction_seconds_count")-s2.Value("kece_control_claim_transaction_seconds_count"), 1.0)
	moved(t, s2, s3, 1, "kece_control_claim_wait_seconds_count", "pool", "cpp", "result", "jobs")
	require.Equal(t, 0.0, s3.Value("kece_control_queue_depth", "pool", "cpp"))
	require.Equal(t, 1.0, s3.Value("kece_control_jobs_running", "pool", "cpp"))

	// A verdict, the same again, and a different one for the same lease.
	ac := machineapi.ResultRequest{LeaseEpoch: jobs[0].LeaseEpoch, Outcome: machineapi.OutcomeVerdict, Verdict: &machineapi.Verdict{
		Status: machineapi.VerdictStatusAC, Score: 100, MaxScore: 100,
		Cases: []machineapi.CaseResult{{CaseId: "c1", Status: machineapi.VerdictStatusAC, Score: 100, TimeMs: 2}}}}
	s4 := e.scrape(t)
	for range 2 {
		r, err := nc.c.SubmitResultWithResponse(e.Ctx, jobs[0].JobId, ac)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
	}
	wa := ac
	wa.Verdict = &machineapi.Verdict{Status: machineapi.VerdictStatusWA, Score: 0, MaxScore: 100,
		Cases: []machineapi.CaseResult{{CaseId: "c1", Status: machineapi.VerdictStatusWA, Score: 0}}}
	r, err := nc.c.SubmitResultWithResponse(e.Ctx, jobs[0].JobId, wa)
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, r.StatusCode())
	s5 := e.scrape(t)
	moved(t, s4, s5, 1, "kece_control_jobs_completed_total", "pool", "cpp", "outcome", "ac")
	moved(t, s4, s5, 1, "kece_control_jobs_completed_total", "pool", "cpp", "outcome", "already_committed")
	moved(t, s4, s5, 1, "kece_control_results_refused_total", "reason", "result_conflict")
	require.Equal(t, 1.0, s5.Value("kece_control_settlement_events", "state", "pending"))
	// The route label is the pattern, never the raw path with its id.
	moved(t, s4, s5, 2, "kece_control_http_request_duration_seconds_count", "surface", "machine",
		"route", "/api/v1/internal/judgers/jobs/{jobId}/result", "method", "post", "status_code", "200")
	for k := range s5 {
		require.NotContains(t, k, "/jobs/"+jobs[0].JobId+"/", "no raw path in a label: %s", k)
	}

	// An empty long-poll is labelled by the node's pool too.
	require.Empty(t, claim(1))
	moved(t, s5, e.scrape(t), 1, "kece_control_claim_wait_seconds_count", "pool", "cpp", "result", "empty")

	// Infrastructure errors: the first requeues (RETRY), the second exhausts
	// MaxAttempts=2 (SYSTEM_ERROR).
	enqueue("m-2")
	infra := func() {
		var got []machineapi.ClaimedJob
		require.Eventually(t, func() bool { got = claim(1); return len(got) == 1 }, 5*time.Second, 10*time.Millisecond)
		r, err := nc.c.SubmitResultWithResponse(e.Ctx, got[0].JobId, machineapi.ResultRequest{LeaseEpoch: got[0].LeaseEpoch,
			Outcome: machineapi.OutcomeError, Error: &machineapi.InfraError{Code: machineapi.InfraErrorCodeDaemonUnreachable, Message: "down"}})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
	}
	s6 := e.scrape(t)
	infra()
	s7 := e.scrape(t)
	moved(t, s6, s7, 1, "kece_control_infra_retries_total", "pool", "cpp", "error_code", "daemon_unreachable")
	moved(t, s6, s7, 1, "kece_control_jobs_completed_total", "pool", "cpp", "outcome", "retry")
	infra()
	s8 := e.scrape(t)
	moved(t, s7, s8, 1, "kece_control_jobs_system_error_total", "pool", "cpp", "error_code", "daemon_unreachable")
	moved(t, s7, s8, 1, "kece_control_jobs_completed_total", "pool", "cpp", "outcome", "system_error")

	// A lease nobody renews expires and the reaper takes it back.
	enqueue("m-3")
	require.Eventually(t, func() bool { return len(claim(1)) == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		s := e.scrape(t)
		return s.Value("kece_control_lease_expiries_total", "outcome", "requeued")-s8.Value("kece_control_lease_expiries_total", "outcome", "requeued") == 1
	}, 10*time.Second, 50*time.Millisecond, "the reaper requeues the expired lease")
	require.Positive(t, e.scrape(t).Value("kece_control_reaper_passes_total", "result", "ok"))

	// Events: pulled and acknowledged through the business API.
	s9 := e.scrape(t)
	ev, err := biz.ClaimSettlementEventsWithResponse(e.Ctx, businessapi.EventClaimRequest{Consumer: "biz", Max: 10, LeaseMs: 60000})
	require.NoError(t, err)
	require.Len(t, ev.JSON200.Events, 2, "AC and SYSTEM_ERROR")
	ack, err := biz.AckSettlementEventsWithResponse(e.Ctx, businessapi.EventAckRequest{Consumer: "biz", EventIds: []string{ev.JSON200.Events[0].EventId}})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, ack.StatusCode(), string(ack.Body))
	s10 := e.scrape(t)
	moved(t, s9, s10, 1, "kece_control_settlement_events_delivered_total")
	require.Equal(t, 1.0, s10.Value("kece_control_settlement_events", "state", "pending"))

	// The other event is pushed by a webhook sender whose target fails; with
	// one attempt allowed it is dead-lettered at once. Its lease from the
	// pull consumer above must run out first: release it through the store.
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	defer hook.Close()
	_, err = e.DB.ExecContext(e.Ctx, `UPDATE judge_settlement_event SET lease_until = NOW(6) WHERE state = 'PENDING'`)
	require.NoError(t, err)
	secrets, err := webhook.ParseSecrets(strings.Repeat("k", 32))
	require.NoError(t, err)
	sender, err := webhook.New(webhook.Config{URL: hook.URL, Secrets: secrets, MaxAttempts: 1,
		Observer: e.Replica.Metrics()}, e.Replica.Store(), nil)
	require.NoError(t, err)
	n1, err := sender.RunOnce(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n1)
	s11 := e.scrape(t)
	moved(t, s10, s11, 1, "kece_control_webhook_deliveries_total", "result", "dead")
	moved(t, s10, s11, 1, "kece_control_settlement_events_dead_lettered_total")
	require.Equal(t, 1.0, s11.Value("kece_control_settlement_events", "state", "dead"))
	require.Equal(t, 0.0, s11.Value("kece_control_settlement_events", "state", "pending"))

	// Unknown paths are one label value, not one per path.
	resp, err := http.Get(e.URL + "/api/v1/internal/judgers/no/such/42")
	require.NoError(t, err)
	resp.Body.Close()
	require.Positive(t, e.scrape(t).Sum("kece_control_http_request_duration_seconds_count", "surface", "machine", "route", "unmatched"))
}

// A deadlock or lock-wait timeout retried by the store, and a database that
// is unreachable, move their counters.
func TestDBMetricsMove(t *testing.T) {
	t.Parallel()
	e := startObserved(t, store.Config{})
	manID := e.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1\n", Out: "1\n", Weight: 100})
	jobID := e.Enqueue("ALGO", "db-1", "cpp17", "int main(){}", manID)
	m := e.Replica.Metrics()

	// A store whose sessions give up lock waits after 1 s, reporting to the
	// same metrics; another connection holds the job's row lock.
	db := openWithParams(t, e.DSN, "innodb_lock_wait_timeout=1")
	st, err := store.New(db, store.Config{TxRetries: 5})
	require.NoError(t, err)
	st = st.WithObserver(m)
	holder, err := e.DB.BeginTx(e.Ctx, nil)
	require.NoError(t, err)
	_, err = holder.ExecContext(e.Ctx, `SELECT id FROM judge_job WHERE id = ? FOR UPDATE`, jobID)
	require.NoError(t, err)
	s0 := e.scrape(t)
	done := make(chan error, 1)
	go func() { _, err := st.Jobs().CancelJob(context.Background(), jobID, "test", "metrics"); done <- err }()
	require.Eventually(t, func() bool {
		return e.scrape(t).Value("kece_control_db_tx_retries_total", "reason", "lock_wait_timeout") > s0.Value("kece_control_db_tx_retries_total", "reason", "lock_wait_timeout")
	}, 15*time.Second, 50*time.Millisecond)
	require.NoError(t, holder.Rollback())
	require.NoError(t, <-done, "the retried transaction succeeds once the lock is free")

	// Nothing listens on port 1.
	dead := openWithParams(t, "root@tcp(127.0.0.1:1)/nothing", "timeout=1s")
	ds, err := store.New(dead, store.Config{})
	require.NoError(t, err)
	_, err = ds.WithObserver(m).Jobs().Enqueue(e.Ctx, store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "x",
		Language: "cpp17", Source: "x", ManifestID: manID})
	require.Error(t, err)
	moved(t, s0, e.scrape(t), 1, "kece_control_db_errors_total", "op", "enqueue")
}

// Logs are JSON with string ids and durations in ms; the request id nginx
// sends is on the access line and on every line the handlers log for that
// request; a missing or malformed one is replaced by a generated id, which
// the response carries.
func TestRequestIDInEveryLogLine(t *testing.T) {
	t.Parallel()
	e := startObserved(t, store.Config{})
	manID := e.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1\n", Out: "1\n", Weight: 100})
	body := `{"submissionType":"ALGO","submissionId":"log-1","language":"cpp17","source":"int main(){}","manifestId":"` + idStr(manID) + `"}`
	post := func(id string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, e.URL+"/api/v1/submissions", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+e.Business)
		req.Header.Set("Content-Type", "application/json")
		if id != "" {
			req.Header.Set(httpapi.RequestIDHeader, id)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	resp := post("nginx-7f3a9c")
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, "nginx-7f3a9c", resp.Header.Get(httpapi.RequestIDHeader))

	var access, handler map[string]any
	require.Eventually(t, func() bool {
		access, handler = nil, nil
		for _, l := range e.logs.lines(t) {
			if l["request_id"] != "nginx-7f3a9c" {
				continue
			}
			switch l["msg"] {
			case "http request":
				access = l
			case "submission enqueued":
				handler = l
			}
		}
		return access != nil && handler != nil
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, float64(202), access["status"])
	require.Equal(t, "/api/v1/submissions", access["route"])
	require.IsType(t, float64(0), access["duration_ms"], "durations are milliseconds")
	require.NotContains(t, access, "duration")
	require.IsType(t, "", handler["job_id"], "ids are strings in every log line")

	// Malformed (log injection) and missing ids are replaced.
	for _, bad := range []string{"", "a b;c", strings.Repeat("x", 200)} {
		resp := post(bad)
		got := resp.Header.Get(httpapi.RequestIDHeader)
		require.True(t, telemetry.ValidRequestID(got), "generated id %q", got)
		require.NotEqual(t, bad, got)
	}
}

// openWithParams opens dsn with extra go-sql-driver parameters (system
// variables such as innodb_lock_wait_timeout are set per connection).
func openWithParams(t *testing.T, dsn, params string) *sql.DB {
	t.Helper()
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dbtest.OpenDSN(t, dsn+sep+params)
}
