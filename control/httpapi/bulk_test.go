package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
)

// bulkItems decodes details.items of a refused bulk enqueue.
func bulkItems(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var e struct {
		Code    string `json:"code"`
		Details struct {
			Items []map[string]any `json:"items"`
		} `json:"details"`
	}
	require.NoError(t, json.Unmarshal(body, &e), string(body))
	require.Equal(t, "REQUEST_INVALID", e.Code, string(body))
	return e.Details.Items
}

// A bulk enqueue on the real MariaDB: all items in one transaction, in
// request order; identical items answer their existing jobs; every invalid
// item is reported at once with its own code and nothing is written; a
// conflict names its item and writes nothing; an Idempotency-Key answers
// the same jobs later whatever became of the submissions; created jobs are
// counted in jobs_enqueued_total.
func TestBulkEnqueue(t *testing.T) {
	t.Parallel()
	e := startObserved(t, store.Config{})
	c := bizClient(t, e.URL, e.Business)
	manID := idStr(e.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 100}))
	item := func(id, src string) businessapi.SubmissionCreate {
		return businessapi.SubmissionCreate{SubmissionType: "CONTEST", SubmissionId: id, Language: "cpp17", Source: src, ManifestId: manID}
	}
	jobs := func() int {
		var n int
		require.NoError(t, e.DB.QueryRow(`SELECT COUNT(*) FROM judge_job`).Scan(&n))
		return n
	}
	post := func(key *string, items ...businessapi.SubmissionCreate) *businessapi.EnqueueSubmissionsResponse {
		t.Helper()
		r, err := c.EnqueueSubmissionsWithResponse(e.Ctx, &businessapi.EnqueueSubmissionsParams{IdempotencyKey: key},
			businessapi.SubmissionsCreate{Submissions: items})
		require.NoError(t, err)
		conforms(t, r.HTTPResponse, r.Body)
		return r
	}

	s0 := e.scrape(t)
	r := post(nil, item("b-1", "int main(){}"), item("b-2", "int main(){}"), item("b-3", "int main(){}"))
	require.Equal(t, http.StatusAccepted, r.StatusCode(), string(r.Body))
	require.Len(t, r.JSON202.Submissions, 3)
	ids := map[string]bool{}
	for i, s := range r.JSON202.Submissions {
		require.Equal(t, businessapi.SubmissionStatusCodePending, s.Status)
		require.Equal(t, int64(1), s.Generation)
		st, err := e.Store.Jobs().SubmissionStatus(e.Ctx, "CONTEST", fmt.Sprintf("b-%d", i+1))
		require.NoError(t, err)
		require.Equal(t, idStr(st.JobID), s.JobId, "answers are in request order")
		ids[s.JobId] = true
	}
	require.Len(t, ids, 3)
	moved(t, s0, e.scrape(t), 3, "kece_control_jobs_enqueued_total", "pool", "cpp", "kind", "submission")

	// The same items again, with one new: existing jobs answered, one created.
	s1 := e.scrape(t)
	again := post(nil, item("b-2", "int main(){}"), item("b-4", "int main(){}"))
	require.Equal(t, http.StatusAccepted, again.StatusCode(), string(again.Body))
	require.Equal(t, r.JSON202.Submissions[1], again.JSON202.Submissions[0])
	require.False(t, ids[again.JSON202.Submissions[1].JobId])
	moved(t, s1, e.scrape(t), 1, "kece_control_jobs_enqueued_total", "pool", "cpp", "kind", "submission")

	// Every invalid item in one answer, each with its own code; nothing written.
	before := jobs()
	bad := post(nil,
		item("v-0", "int main(){}"),
		businessapi.SubmissionCreate{SubmissionType: "CONTEST", SubmissionId: "v-1", Language: "cobol", Source: "x", ManifestId: manID},
		businessapi.SubmissionCreate{SubmissionType: "CONTEST", SubmissionId: "v-2", Language: "cpp17", Source: "x", ManifestId: "999999"},
		businessapi.SubmissionCreate{SubmissionType: "KECE_CHECK", SubmissionId: "v-3", Language: "cpp17", Source: "x", ManifestId: manID},
		businessapi.SubmissionCreate{SubmissionType: "CONTEST", SubmissionId: "v-4", Language: "mysql", Source: "SELECT 1", ManifestId: manID},
		item("v-0", "int main(){}"),
	)
	require.Equal(t, http.StatusUnprocessableEntity, bad.StatusCode(), string(bad.Body))
	got := bulkItems(t, bad.Body)
	want := []struct {
		index       float64
		code, field string
	}{{1, "LANGUAGE_UNSUPPORTED", "language"}, {2, "MANIFEST_NOT_FOUND", "manifestId"}, {3, "REQUEST_INVALID", "submissionType"},
		{4, "MANIFEST_LANGUAGE_MISMATCH", "language"}, {5, "REQUEST_INVALID", "submissionId"}}
	require.Len(t, got, len(want), string(bad.Body))
	for i, w := range want {
		require.Equal(t, w.index, got[i]["index"], string(bad.Body))
		require.Equal(t, w.code, got[i]["code"], string(bad.Body))
		require.Equal(t, w.field, got[i]["field"], string(bad.Body))
		require.NotEmpty(t, got[i]["message"])
	}
	require.Equal(t, before, jobs(), "a refused bulk writes nothing")

	// An item the handler refuses itself (an id the contract's pattern
	// lets through but BIGINT cannot hold) is listed with the store's
	// findings on the others.
	bad = post(nil, businessapi.SubmissionCreate{SubmissionType: "CONTEST", SubmissionId: "w-0", Language: "cpp17", Source: "x", ManifestId: "9999999999999999999"},
		businessapi.SubmissionCreate{SubmissionType: "CONTEST", SubmissionId: "w-1", Language: "cobol", Source: "x", ManifestId: manID})
	require.Equal(t, http.StatusUnprocessableEntity, bad.StatusCode(), string(bad.Body))
	got = bulkItems(t, bad.Body)
	require.Len(t, got, 2, string(bad.Body))
	require.Equal(t, []any{0.0, "REQUEST_INVALID", "manifestId"}, []any{got[0]["index"], got[0]["code"], got[0]["field"]})
	require.Equal(t, []any{1.0, "LANGUAGE_UNSUPPORTED"}, []any{got[1]["index"], got[1]["code"]})
	require.Equal(t, before, jobs())

	// A conflict names its item; the new item before it is not written.
	cf := post(nil, item("c-1", "int main(){}"), item("b-1", "int main(){return 1;}"))
	require.Equal(t, http.StatusConflict, cf.StatusCode(), string(cf.Body))
	require.Equal(t, businessapi.ErrorCodeSubmissionConflict, cf.JSON409.Code)
	require.Equal(t, 1.0, (*cf.JSON409.Details)["index"])
	require.Equal(t, before, jobs())

	// Shape: no items is a 400.
	empty := post(nil)
	require.Equal(t, http.StatusBadRequest, empty.StatusCode(), string(empty.Body))

	// Idempotency-Key: the same key and body answer the same jobs even
	// after a rejudge moved a submission on; another body is refused.
	key := "bulk-key-1"
	k1 := post(&key, item("k-1", "int main(){}"), item("k-2", "int main(){}"))
	require.Equal(t, http.StatusAccepted, k1.StatusCode(), string(k1.Body))
	_, err := e.Store.Jobs().Rejudge(e.Ctx, "CONTEST", "k-1", "test", "move on")
	require.NoError(t, err)
	s2 := e.scrape(t)
	k2 := post(&key, item("k-1", "int main(){}"), item("k-2", "int main(){}"))
	require.Equal(t, http.StatusAccepted, k2.StatusCode(), string(k2.Body))
	require.Equal(t, k1.JSON202.Submissions[0].JobId, k2.JSON202.Submissions[0].JobId, "the key's job, not the rejudged one")
	require.Equal(t, businessapi.SubmissionStatusCodeCancelled, k2.JSON202.Submissions[0].Status)
	require.Equal(t, k1.JSON202.Submissions[1], k2.JSON202.Submissions[1])
	moved(t, s2, e.scrape(t), 0, "kece_control_jobs_enqueued_total", "pool", "cpp", "kind", "submission")
	reused := post(&key, item("k-1", "int main(){}"))
	require.Equal(t, http.StatusConflict, reused.StatusCode(), string(reused.Body))
	require.Equal(t, businessapi.ErrorCodeIdempotencyKeyReused, reused.JSON409.Code)

	// A single enqueue's key cannot be replayed as a bulk one.
	single := "single-key-1"
	one, err := c.EnqueueSubmissionWithResponse(e.Ctx, &businessapi.EnqueueSubmissionParams{IdempotencyKey: &single}, item("s-1", "int main(){}"))
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, one.StatusCode(), string(one.Body))
	cross := post(&single, item("s-1", "int main(){}"))
	require.Equal(t, http.StatusConflict, cross.StatusCode(), string(cross.Body))
	require.Equal(t, businessapi.ErrorCodeIdempotencyKeyReused, cross.JSON409.Code)

	// Too many items is a 400 naming the limit.
	many := make([]businessapi.SubmissionCreate, store.EnqueueManyMax+1)
	for i := range many {
		many[i] = item(fmt.Sprintf("m-%d", i), "x")
	}
	body, err := json.Marshal(businessapi.SubmissionsCreate{Submissions: many})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(e.Ctx, http.MethodPost, e.URL+"/api/v1/submissions/bulk", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.Business)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(raw))
	code, _ := apiError(t, raw)
	require.Equal(t, "REQUEST_INVALID", code, string(raw))
	require.Contains(t, string(raw), strconv.Itoa(store.EnqueueManyMax), "the error names the limit")
}
