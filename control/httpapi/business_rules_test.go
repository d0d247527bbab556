package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/store"
)

func TestUploadArtifactVerification(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	ctx, c := b.env.Ctx, b.c
	content := []byte("expected output\n")
	d := digestOf(content)
	stored := func() bool {
		_, err := b.env.Artifacts.Stat(d)
		if errors.Is(err, artifact.ErrNotFound) {
			return false
		}
		require.NoError(t, err)
		return true
	}

	// Wrong bytes for the digest: 422 and nothing kept.
	r, err := c.UploadArtifactWithBodyWithResponse(ctx, d, "application/octet-stream", strings.NewReader("something else\n"))
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, r.StatusCode(), string(r.Body))
	code, _ := apiError(t, r.Body)
	require.Equal(t, "DIGEST_MISMATCH", code)
	require.False(t, stored())
	require.Zero(t, b.count(`SELECT COUNT(*) FROM judge_artifact`))

	// A body shorter than its Content-Length: 422 ARTIFACT_SIZE_MISMATCH.
	status, body := rawUpload(t, b.env.HTTP.Listener.Addr().String(), b.env.Business, d, len(content), content[:5])
	require.Equal(t, http.StatusUnprocessableEntity, status, body)
	require.Contains(t, body, "ARTIFACT_SIZE_MISMATCH")
	require.False(t, stored())
	require.Zero(t, b.count(`SELECT COUNT(*) FROM judge_artifact`))

	// Streamed without a Content-Length (chunked): verified all the same.
	r, err = c.UploadArtifactWithBodyWithResponse(ctx, d, "application/octet-stream", io.MultiReader(bytes.NewReader(content)))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.StatusCode(), string(r.Body))
	require.Equal(t, int64(len(content)), r.JSON201.Size)
	// Idempotent: the same bytes again answer 200; wrong bytes for a stored
	// digest are still refused and leave the stored copy alone.
	r, err = c.UploadArtifactWithBodyWithResponse(ctx, d, "application/octet-stream", bytes.NewReader(content))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
	r, err = c.UploadArtifactWithBodyWithResponse(ctx, d, "application/octet-stream", strings.NewReader("EXPECTED OUTPUT\n"))
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, r.StatusCode(), string(r.Body))
	f, n, err := b.env.Artifacts.Open(d)
	require.NoError(t, err)
	got, _ := io.ReadAll(f)
	f.Close()
	require.Equal(t, int64(len(content)), n)
	require.Equal(t, content, got)
	require.Equal(t, 1, b.count(`SELECT COUNT(*) FROM judge_artifact WHERE sha256 = ? AND size = ?`, d, len(content)))

	// The empty file is a valid artifact.
	r, err = c.UploadArtifactWithBodyWithResponse(ctx, artifact.EmptyDigest, "application/octet-stream", bytes.NewReader(nil))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.StatusCode(), string(r.Body))
	require.Zero(t, r.JSON201.Size)

	// A malformed digest never reaches the store.
	r, err = c.UploadArtifactWithBodyWithResponse(ctx, strings.ToUpper(d), "application/octet-stream", bytes.NewReader(content))
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, r.StatusCode(), string(r.Body))
}

// rawUpload sends a PUT whose body stops short of its Content-Length, then
// half-closes the connection and reads the answer.
func rawUpload(t *testing.T, addr, token, digest string, declared int, body []byte) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	fmt.Fprintf(conn, "PUT /api/v1/artifacts/%s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", digest, addr, token, declared)
	_, err = conn.Write(body)
	require.NoError(t, err)
	require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestPublishManifestValidation(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	ctx, c := b.env.Ctx, b.c
	good := codeManifest(t, c, "1 2\n", "3\n")
	absent := digestOf([]byte("never uploaded"))
	special := upload(t, c, []byte("int main(){return 0;}"))

	cases := []struct {
		name        string
		mut         func(m *businessapi.Manifest)
		status      int
		code, field string
	}{
		{"missing output digest", func(m *businessapi.Manifest) { m.Cases[0].OutputSha256 = absent },
			422, "ARTIFACT_MISSING", "cases[0].outputSha256"},
		{"input size differs from the upload", func(m *businessapi.Manifest) { m.Cases[0].InputSize = 99 },
			422, "ARTIFACT_SIZE_MISMATCH", "cases[0].inputSha256"},
		{"time limit zero for code", func(m *businessapi.Manifest) { m.Limits.TimeMs = 0 },
			422, "MANIFEST_INVALID", "limits.timeMs"},
		{"memory above the control plane's bound", func(m *businessapi.Manifest) { m.Limits.MemoryMb = 8000 },
			422, "MANIFEST_INVALID", "limits.memoryMb"},
		{"time limit above the contract's bound", func(m *businessapi.Manifest) { m.Limits.TimeMs = 600000 },
			400, "REQUEST_INVALID", ""},
		{"unknown checker type", func(m *businessapi.Manifest) { m.Checker.Type = "regex" },
			400, "REQUEST_INVALID", ""},
		{"special checker in an unknown language", func(m *businessapi.Manifest) {
			m.Checker = businessapi.Checker{Type: businessapi.CheckerTypeSpecial,
				Special: &businessapi.SpecialChecker{Language: "brainfuck", SourceSha256: special, SourceSize: 21}}
		}, 422, "MANIFEST_INVALID", "checker.special.language"},
		{"special checker without its program", func(m *businessapi.Manifest) { m.Checker.Type = businessapi.CheckerTypeSpecial },
			422, "MANIFEST_INVALID", "checker.special"},
		{"special checker program not uploaded", func(m *businessapi.Manifest) {
			m.Checker = businessapi.Checker{Type: businessapi.CheckerTypeSpecial,
				Special: &businessapi.SpecialChecker{Language: "cpp17", SourceSha256: absent, SourceSize: 21}}
		}, 422, "ARTIFACT_MISSING", "checker.special.sourceSha256"},
		{"code manifest without cases", func(m *businessapi.Manifest) { m.Cases = []businessapi.ManifestCase{} },
			422, "MANIFEST_INVALID", "cases"},
		{"duplicate case ids", func(m *businessapi.Manifest) { m.Cases = append(m.Cases, m.Cases[0]) },
			422, "MANIFEST_INVALID", "cases[1].caseId"},
		{"file I/O naming no file", func(m *businessapi.Manifest) { yes := true; m.Io = &businessapi.FileIO{Stdio: &yes} },
			422, "MANIFEST_INVALID", "io"},
		{"file I/O output named like the binary", func(m *businessapi.Manifest) { n := "main"; m.Io = &businessapi.FileIO{OutputFile: &n} },
			422, "MANIFEST_INVALID", "io.outputFile"},
		{"file I/O name with a path", func(m *businessapi.Manifest) { n := "../x"; m.Io = &businessapi.FileIO{InputFile: &n} },
			400, "REQUEST_INVALID", ""},
	}
	for _, tc := range cases {
		m := good
		m.Cases = append([]businessapi.ManifestCase(nil), good.Cases...)
		tc.mut(&m)
		r, err := c.PublishManifestWithResponse(ctx, m)
		require.NoError(t, err)
		require.Equal(t, tc.status, r.StatusCode(), tc.name+": "+string(r.Body))
		code, field := apiError(t, r.Body)
		require.Equal(t, tc.code, code, tc.name)
		if tc.field != "" {
			require.Equal(t, tc.field, field, tc.name)
		}
	}
	require.Zero(t, b.count(`SELECT COUNT(*) FROM judge_manifest`), "nothing written by refused manifests")
	require.Zero(t, b.count(`SELECT COUNT(*) FROM judge_manifest_artifact`))

	// A special checker that is complete publishes.
	m := good
	m.Checker = businessapi.Checker{Type: businessapi.CheckerTypeSpecial,
		Special: &businessapi.SpecialChecker{Language: "cpp17", SourceSha256: special, SourceSize: 21}}
	publish(t, c, m)
	require.Equal(t, 1, b.count(`SELECT COUNT(*) FROM judge_manifest`))

	// So does a file I/O one, and it reads back with its files.
	in, out := "sum.in", "sum.out"
	m = good
	m.Io = &businessapi.FileIO{InputFile: &in, OutputFile: &out}
	id := publish(t, c, m)
	got, err := c.GetManifestWithResponse(ctx, id)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, got.StatusCode(), string(got.Body))
	require.Equal(t, m.Io, got.JSON200.Manifest.Io)
}

func TestEnqueueIdempotencyKeyConcurrent(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	ctx, c := b.env.Ctx, b.c
	manID := publish(t, c, codeManifest(t, c, "in", "out"))
	body := func(id, src string) businessapi.SubmissionCreate {
		return businessapi.SubmissionCreate{SubmissionType: "ALGO", SubmissionId: id, Language: "java17", Source: src, ManifestId: manID}
	}
	key := func(k string) *businessapi.EnqueueSubmissionParams {
		return &businessapi.EnqueueSubmissionParams{IdempotencyKey: &k}
	}

	// Many retries of one request at once: one job, one receipt.
	const n = 16
	var wg sync.WaitGroup
	receipts := make([]*businessapi.EnqueueSubmissionResponse, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			receipts[i], errs[i] = c.EnqueueSubmissionWithResponse(ctx, key("retry-1"), body("s-1", "class A{}"))
		}()
	}
	wg.Wait()
	for i := 0; i < n; i++ {
		require.NoError(t, errs[i])
		require.Equal(t, http.StatusAccepted, receipts[i].StatusCode(), string(receipts[i].Body))
		require.Equal(t, *receipts[0].JSON202, *receipts[i].JSON202)
	}
	require.Equal(t, 1, b.count(`SELECT COUNT(*) FROM judge_job`))
	require.Equal(t, 1, b.count(`SELECT COUNT(*) FROM judge_idempotency_key`))

	// The same key with another body: 409, nothing written.
	for _, other := range []businessapi.SubmissionCreate{body("s-1", "class B{}"), body("s-2", "class A{}")} {
		r, err := c.EnqueueSubmissionWithResponse(ctx, key("retry-1"), other)
		require.NoError(t, err)
		require.Equal(t, http.StatusConflict, r.StatusCode(), string(r.Body))
		require.Equal(t, businessapi.ErrorCodeIdempotencyKeyReused, r.JSON409.Code)
	}
	require.Equal(t, 1, b.count(`SELECT COUNT(*) FROM judge_job`))

	// A new key raced by different bodies: exactly one wins, the rest are 409.
	statuses := make([]int, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Half the racers name one submission with different sources:
			// they too must be refused by the key, never as a conflict
			// with the winner's submission.
			id, src := fmt.Sprintf("r-%d", i), "class A{}"
			if i%2 == 0 {
				id, src = "r-same", fmt.Sprintf("class A%d{}", i)
			}
			r, err := c.EnqueueSubmissionWithResponse(ctx, key("race-2"), body(id, src))
			if err == nil {
				statuses[i] = r.StatusCode()
				if r.JSON409 != nil && r.JSON409.Code != businessapi.ErrorCodeIdempotencyKeyReused {
					statuses[i] = -1 // shows as a mismatch below
				}
			}
		}()
	}
	wg.Wait()
	sort.Ints(statuses)
	want := append([]int{http.StatusAccepted}, repeat(http.StatusConflict, n-1)...)
	require.Equal(t, want, statuses)
	require.Equal(t, 2, b.count(`SELECT COUNT(*) FROM judge_job`))
	require.Equal(t, 2, b.count(`SELECT COUNT(*) FROM judge_submission WHERE current_job_id <> 0`), "losers leave no pointer behind")

	// Keys belong to one business token: another client may use the same key.
	other, err := b.env.Store.Tokens().CreateToken(ctx, store.TokenBusiness, "second-backend")
	require.NoError(t, err)
	r, err := bizClient(t, b.env.URL, other).EnqueueSubmissionWithResponse(ctx, key("retry-1"), body("s-3", "class C{}"))
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, r.StatusCode(), string(r.Body))
	require.NotEqual(t, receipts[0].JSON202.JobId, r.JSON202.JobId)

	// A retried key keeps answering with its job after the submission moved on.
	rj, err := c.RejudgeSubmissionWithResponse(ctx, "ALGO", "s-1", businessapi.ReasonRequest{Reason: "again"})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, rj.StatusCode(), string(rj.Body))
	r, err = c.EnqueueSubmissionWithResponse(ctx, key("retry-1"), body("s-1", "class A{}"))
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, r.StatusCode(), string(r.Body))
	require.Equal(t, receipts[0].JSON202.JobId, r.JSON202.JobId)
	require.Equal(t, businessapi.SubmissionStatusCodeCancelled, r.JSON202.Status)

	// A malformed key is refused by the contract.
	r, err = c.EnqueueSubmissionWithResponse(ctx, key("has space"), body("s-4", "class A{}"))
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, r.StatusCode(), string(r.Body))
	require.Equal(t, 3, b.count(`SELECT COUNT(*) FROM judge_job WHERE generation = 1`))
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestSettlementEventsTwoConsumers(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	ctx := b.env.Ctx
	const n = 60
	ins := `INSERT INTO judge_settlement_event (job_id, event_type, submission_type, submission_id, generation, payload)
	        VALUES (?, 'SETTLED', 'ALGO', ?, 1, ?)`
	payload := func(id int) string {
		return fmt.Sprintf(`{"jobId":"%d","submissionType":"ALGO","submissionId":"e-%d","generation":1,"status":"SYSTEM_ERROR","errorCode":"IMAGE_MISSING"}`, id, id)
	}
	// One event takes its id first but commits last: a cursor by id would skip it.
	late, err := b.env.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = late.ExecContext(ctx, ins, 1, "e-1", payload(1))
	require.NoError(t, err)
	for i := 2; i <= n; i++ {
		_, err := b.env.DB.ExecContext(ctx, ins, i, fmt.Sprintf("e-%d", i), payload(i))
		require.NoError(t, err)
	}

	var mu sync.Mutex
	ackedBy := map[string][]string{}
	consume := func(name string, c *businessapi.ClientWithResponses) error {
		for {
			r, err := c.ClaimSettlementEventsWithResponse(ctx, businessapi.EventClaimRequest{Consumer: name, Max: 7, LeaseMs: 60000})
			if err != nil {
				return err
			}
			if r.StatusCode() != http.StatusOK {
				return fmt.Errorf("claim: %d %s", r.StatusCode(), r.Body)
			}
			if len(r.JSON200.Events) == 0 {
				return nil
			}
			ids := make([]string, 0, len(r.JSON200.Events))
			for _, e := range r.JSON200.Events {
				if e.Payload.Status != businessapi.SubmissionStatusCodeSystemError || e.Payload.ErrorCode == nil {
					return fmt.Errorf("event %s: payload %+v", e.EventId, e.Payload)
				}
				ids = append(ids, e.EventId)
			}
			a, err := c.AckSettlementEventsWithResponse(ctx, businessapi.EventAckRequest{Consumer: name, EventIds: ids})
			if err != nil {
				return err
			}
			if a.StatusCode() != http.StatusOK || len(a.JSON200.NotHeld) != 0 {
				return fmt.Errorf("ack: %d %s", a.StatusCode(), a.Body)
			}
			mu.Lock()
			for _, id := range a.JSON200.Acked {
				ackedBy[id] = append(ackedBy[id], name)
			}
			mu.Unlock()
		}
	}
	second := b.env.SecondReplica()
	drain := func() {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, c := range []*businessapi.ClientWithResponses{b.c, bizClient(t, second.URL, second.Business)} {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = consume(fmt.Sprintf("replica-%d", i), c) }()
		}
		wg.Wait()
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
	}
	drain()
	require.Len(t, ackedBy, n-1)
	require.NoError(t, late.Commit())
	drain()
	require.Len(t, ackedBy, n, "the late commit is delivered too")
	for id, who := range ackedBy {
		require.Len(t, who, 1, "event %s acknowledged once", id)
	}
	require.Equal(t, n, b.count(`SELECT COUNT(*) FROM judge_settlement_event WHERE state = 'DELIVERED'`))
}

// TestEventLeaseExpiryRedelivers: an event whose consumer never acks is
// delivered again to another consumer, and the first one's ack is refused.
func TestEventLeaseExpiryRedelivers(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	ctx, c := b.env.Ctx, b.c
	_, err := b.env.DB.ExecContext(ctx, `INSERT INTO judge_settlement_event (job_id, event_type, submission_type, submission_id, generation, payload)
	   VALUES (7, 'SETTLED', 'ALGO', 'x', 1, '{"status":"CANCELLED"}')`)
	require.NoError(t, err)
	r, err := c.ClaimSettlementEventsWithResponse(ctx, businessapi.EventClaimRequest{Consumer: "slow", Max: 1, LeaseMs: 1000})
	require.NoError(t, err)
	require.Len(t, r.JSON200.Events, 1)
	id := r.JSON200.Events[0].EventId
	_, err = b.env.DB.ExecContext(ctx, `UPDATE judge_settlement_event SET lease_until = NOW(6) - INTERVAL 1 SECOND`)
	require.NoError(t, err)
	r, err = c.ClaimSettlementEventsWithResponse(ctx, businessapi.EventClaimRequest{Consumer: "fast", Max: 1, LeaseMs: 60000})
	require.NoError(t, err)
	require.Len(t, r.JSON200.Events, 1)
	require.Equal(t, id, r.JSON200.Events[0].EventId)
	require.Equal(t, int32(2), r.JSON200.Events[0].DeliveryAttempt)
	a, err := c.AckSettlementEventsWithResponse(ctx, businessapi.EventAckRequest{Consumer: "slow", EventIds: []string{id}})
	require.NoError(t, err)
	require.Equal(t, []string{id}, a.JSON200.NotHeld)
	require.Empty(t, a.JSON200.Acked)
	a, err = c.AckSettlementEventsWithResponse(ctx, businessapi.EventAckRequest{Consumer: "fast", EventIds: []string{id}})
	require.NoError(t, err)
	require.Equal(t, []string{id}, a.JSON200.Acked)
}

// TestClaimWokenByEnqueueOnAnotherReplica: a node long-polls on the second
// replica; a business enqueue on the first wakes it through the pool signal,
// well before the waiter's own periodic retry (≥ 2 s) would.
func TestClaimWokenByEnqueueOnAnotherReplica(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	second := b.env.SecondReplica()
	manID := publish(t, b.c, codeManifest(t, b.c, "1\n", "1\n"))
	n := b.env.NewNode("cpp", 4, 4)
	b.env.ForceEnable(n.ID)
	nc := joinAndOpen(t, second, n.JoinCode, "boot-wake")

	for i, via := range []*businessapi.ClientWithResponses{b.c, bizClient(t, second.URL, second.Business)} {
		type claimed struct {
			jobs []machineapi.ClaimedJob
			err  error
			at   time.Time
		}
		ch := make(chan claimed, 1)
		go func() {
			r, err := nc.c.ClaimJobsWithResponse(context.Background(), machineapi.ClaimRequest{FreeSlots: 1, WaitMs: 10000})
			c := claimed{err: err, at: time.Now()}
			if err == nil && r.JSON200 != nil {
				c.jobs = r.JSON200.Jobs
			}
			ch <- c
		}()
		require.Eventually(t, func() bool { return second.Server.ParkedClaimsForTest() == 1 }, 5*time.Second, time.Millisecond, "the claim parks")
		en, err := via.EnqueueSubmissionWithResponse(b.env.Ctx, nil, businessapi.SubmissionCreate{SubmissionType: "ALGO",
			SubmissionId: fmt.Sprintf("wake-%d", i), Language: "cpp17", Source: "int main(){}", ManifestId: manID})
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, en.StatusCode(), string(en.Body))
		enqueued := time.Now()
		got := <-ch
		require.NoError(t, got.err)
		require.Len(t, got.jobs, 1)
		require.Equal(t, en.JSON202.JobId, got.jobs[0].JobId)
		require.Less(t, got.at.Sub(enqueued), 1500*time.Millisecond, "woken by the pool signal, not the periodic retry")
	}
}

// TestBusinessSamplesAccepted: the contract's fixed samples go through the
// real server: the SQL manifest publishes and reads back unchanged, and the
// sample submission enqueues against it only with a SQL language.
func TestBusinessSamplesAccepted(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	ctx := b.env.Ctx
	raw, err := contracts.Samples.ReadFile("samples/business/manifest-sql.json")
	require.NoError(t, err)
	pm, err := b.c.PublishManifestWithBodyWithResponse(ctx, "application/json", bytes.NewReader(raw))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, pm.StatusCode(), string(pm.Body))
	conforms(t, pm.HTTPResponse, pm.Body)
	gm, err := b.c.GetManifestWithResponse(ctx, pm.JSON201.ManifestId)
	require.NoError(t, err)
	conforms(t, gm.HTTPResponse, gm.Body)
	back, err := json.Marshal(gm.JSON200.Manifest)
	require.NoError(t, err)
	require.JSONEq(t, string(raw), string(back))

	sub, err := contracts.Samples.ReadFile("samples/business/submission-create.json")
	require.NoError(t, err)
	var create map[string]any
	require.NoError(t, json.Unmarshal(sub, &create))
	create["manifestId"] = pm.JSON201.ManifestId
	body, err := json.Marshal(create)
	require.NoError(t, err)
	r, err := b.c.EnqueueSubmissionWithBodyWithResponse(ctx, nil, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, r.StatusCode(), string(r.Body))
	require.Equal(t, businessapi.ErrorCodeManifestLanguageMismatch, r.JSON422.Code)
	create["language"], create["source"] = "mysql", "SELECT name, dept FROM emp WHERE salary > 5000 ORDER BY name"
	body, err = json.Marshal(create)
	require.NoError(t, err)
	r, err = b.c.EnqueueSubmissionWithBodyWithResponse(ctx, nil, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, r.StatusCode(), string(r.Body))
	conforms(t, r.HTTPResponse, r.Body)
	j, err := b.env.Store.Jobs().GetJob(ctx, bizID(t, r.JSON202.JobId))
	require.NoError(t, err)
	require.Equal(t, "mysql", j.Pool, "the pool follows the language")
}

func bizID(t *testing.T, s string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return id
}

// TestStatusAfterInfrastructureFailures: a failed attempt with attempts left
// is PENDING/RETRY_BACKOFF with the error class; the last one SYSTEM_ERROR.
func TestStatusAfterInfrastructureFailures(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{Store: store.Config{MaxAttempts: 2, BackoffBase: time.Hour, BackoffMax: time.Hour}})
	c := bizClient(t, env.URL, env.Business)
	manID := publish(t, c, codeManifest(t, c, "in", "out"))
	en, err := c.EnqueueSubmissionWithResponse(env.Ctx, nil, businessapi.SubmissionCreate{SubmissionType: "ALGO",
		SubmissionId: "infra-1", Language: "cpp17", Source: "int main(){}", ManifestId: manID})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, en.StatusCode(), string(en.Body))
	n := env.NewNode("cpp", 1, 1)
	j, err := env.Store.Credentials().Join(env.Ctx, n.JoinCode)
	require.NoError(t, err)
	sess, err := env.Store.Credentials().OpenSession(env.Ctx, j.Credential, "boot-infra")
	require.NoError(t, err)
	env.ForceEnable(n.ID)
	fail := func() {
		t.Helper()
		jobs, err := env.Store.Leases().Claim(env.Ctx, sess.NodeSession, 1)
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		_, err = env.Store.Leases().Complete(env.Ctx, sess.NodeSession, jobs[0].JobID, jobs[0].LeaseEpoch,
			store.Result{Outcome: store.OutcomeError, Error: &store.ErrorResult{Code: "DAEMON_UNREACHABLE"}})
		require.NoError(t, err)
	}
	fail()
	st, err := c.GetSubmissionWithResponse(env.Ctx, "ALGO", "infra-1", nil)
	require.NoError(t, err)
	conforms(t, st.HTTPResponse, st.Body)
	require.Equal(t, businessapi.SubmissionStatusCodePending, st.JSON200.Status)
	require.Equal(t, businessapi.WaitReasonRetryBackoff, *st.JSON200.WaitReason)
	require.Equal(t, "DAEMON_UNREACHABLE", *st.JSON200.ErrorCode)

	_, err = env.DB.ExecContext(env.Ctx, `UPDATE judge_job SET available_at = NOW(6) WHERE id = ?`, bizID(t, en.JSON202.JobId))
	require.NoError(t, err)
	fail()
	st, err = c.GetSubmissionWithResponse(env.Ctx, "ALGO", "infra-1", nil)
	require.NoError(t, err)
	conforms(t, st.HTTPResponse, st.Body)
	require.Equal(t, businessapi.SubmissionStatusCodeSystemError, st.JSON200.Status)
	require.Nil(t, st.JSON200.WaitReason)
	require.Equal(t, "DAEMON_UNREACHABLE", *st.JSON200.ErrorCode)
	require.Nil(t, st.JSON200.Verdict)
}

// A multi-file submission through the business API: accepted with its
// files, idempotent on all of them, refused (422, field named) for a
// language that takes one file or with a bad name, and 400 for a name
// outside the contract's pattern.
func TestEnqueueMultiFile(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	ctx, c := b.env.Ctx, b.c
	manID := publish(t, c, codeManifest(t, c, "1 2\n", "3\n"))
	files := []businessapi.SourceFile{{Name: "util.py", Content: "def add(a, b):\n    return a + b\n"}}
	body := businessapi.SubmissionCreate{SubmissionType: "ALGO", SubmissionId: "mf-1", Language: "python3",
		Source: "from util import add\nprint(add(*map(int, input().split())))\n", Files: &files, ManifestId: manID}
	r, err := c.EnqueueSubmissionWithResponse(ctx, nil, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, r.StatusCode(), string(r.Body))
	again, err := c.EnqueueSubmissionWithResponse(ctx, nil, body)
	require.NoError(t, err)
	require.Equal(t, r.JSON202.JobId, again.JSON202.JobId)

	other := []businessapi.SourceFile{{Name: "util.py", Content: "def add(a, b):\n    return a - b\n"}}
	changed := body
	changed.Files = &other
	cr, err := c.EnqueueSubmissionWithResponse(ctx, nil, changed)
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, cr.StatusCode(), "the digest covers every file: %s", cr.Body)

	js := body
	js.SubmissionId, js.Language = "mf-js", "javascript"
	jr, err := c.EnqueueSubmissionWithResponse(ctx, nil, js)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, jr.StatusCode(), string(jr.Body))
	_, field := apiError(t, jr.Body)
	require.Equal(t, "files", field)

	bad := []businessapi.SourceFile{{Name: "../util.py", Content: "x"}}
	pathy := body
	pathy.SubmissionId, pathy.Files = "mf-path", &bad
	pr, err := c.EnqueueSubmissionWithResponse(ctx, nil, pathy)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, pr.StatusCode(), string(pr.Body))

	// Each file within its own bound, but the source and files together
	// over 256 KiB (store.MaxSourceBytes): 422 naming files.
	big := []businessapi.SourceFile{{Name: "a.py", Content: strings.Repeat("#", 130<<10)}, {Name: "b.py", Content: strings.Repeat("#", 130<<10)}}
	large := body
	large.SubmissionId, large.Files = "mf-large", &big
	lr, err := c.EnqueueSubmissionWithResponse(ctx, nil, large)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, lr.StatusCode(), string(lr.Body))
	code, field := apiError(t, lr.Body)
	require.Equal(t, "REQUEST_INVALID", code)
	require.Equal(t, "files", field)
	require.Contains(t, string(lr.Body), "above the limit of 262144")
}
