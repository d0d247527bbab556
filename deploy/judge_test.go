package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/businessapi"
)

// The business side of the end-to-end tests: publish a problem, enqueue a
// submission, wait for its verdict, as an OJ backend would.

func (p *plane) business(t *testing.T) *businessapi.ClientWithResponses {
	t.Helper()
	c, err := businessapi.NewClientWithResponses(p.url, businessapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+p.biz)
		return nil
	}))
	require.NoError(t, err)
	return c
}

func upload(t *testing.T, ctx context.Context, c *businessapi.ClientWithResponses, content string) (string, int64) {
	t.Helper()
	sum := sha256.Sum256([]byte(content))
	digest := hex.EncodeToString(sum[:])
	r, err := c.UploadArtifactWithBodyWithResponse(ctx, digest, "application/octet-stream", strings.NewReader(content))
	require.NoError(t, err)
	require.Contains(t, []int{http.StatusCreated, http.StatusOK}, r.StatusCode(), string(r.Body))
	return digest, int64(len(content))
}

// publishAPlusB publishes a+b (two cases) with the given time limit.
func publishAPlusB(t *testing.T, ctx context.Context, c *businessapi.ClientWithResponses, timeMs int64) string {
	t.Helper()
	m := businessapi.Manifest{Kind: businessapi.ManifestKindCode, Limits: businessapi.Limits{TimeMs: timeMs, MemoryMb: 256, OutputKb: 64},
		Checker: businessapi.Checker{Type: businessapi.CheckerTypeTolerant}}
	for i, tc := range [][2]string{{"1 2\n", "3\n"}, {"20 22\n", "42\n"}} {
		in, inSize := upload(t, ctx, c, tc[0])
		out, outSize := upload(t, ctx, c, tc[1])
		m.Cases = append(m.Cases, businessapi.ManifestCase{CaseId: fmt.Sprint(i + 1), InputSha256: in, InputSize: inSize,
			OutputSha256: out, OutputSize: outSize, Weight: 50})
	}
	return publish(t, ctx, c, m)
}

// publishSQL publishes a SELECT problem for the mysql pool.
func publishSQL(t *testing.T, ctx context.Context, c *businessapi.ClientWithResponses) string {
	t.Helper()
	ref := sqlAnswer
	return publish(t, ctx, c, businessapi.Manifest{Kind: businessapi.ManifestKindSql,
		Limits:  businessapi.Limits{TimeMs: 2000, MemoryMb: 64, OutputKb: 64},
		Checker: businessapi.Checker{Type: businessapi.CheckerTypeExact}, Cases: []businessapi.ManifestCase{},
		Sql: &businessapi.SqlProblem{ProblemKind: businessapi.SqlProblemKindSelect, SchemaSql: "CREATE TABLE t (a INT, b INT)",
			SeedSql: "INSERT INTO t VALUES (1, 2), (20, 22)", ReferenceSql: &ref, Ordered: true,
			Verification: []businessapi.SqlVerification{}, StatementTimeoutMs: 2000, MaxRows: 100, MaxBytes: 1 << 16}})
}

const sqlAnswer = "SELECT a + b AS s FROM t ORDER BY s"

func publish(t *testing.T, ctx context.Context, c *businessapi.ClientWithResponses, m businessapi.Manifest) string {
	t.Helper()
	r, err := c.PublishManifestWithResponse(ctx, m)
	require.NoError(t, err)
	require.Contains(t, []int{http.StatusCreated, http.StatusOK}, r.StatusCode(), string(r.Body))
	if r.JSON201 != nil {
		return r.JSON201.ManifestId
	}
	return r.JSON200.ManifestId
}

var submissionSeq atomic.Int64

// enqueue submits source and returns the submission id.
func enqueue(t *testing.T, ctx context.Context, c *businessapi.ClientWithResponses, manifest, language, source string) string {
	t.Helper()
	id := fmt.Sprintf("e2e-%d-%d", time.Now().UnixNano(), submissionSeq.Add(1))
	r, err := c.EnqueueSubmissionWithResponse(ctx, &businessapi.EnqueueSubmissionParams{}, businessapi.SubmissionCreate{
		SubmissionType: "ALGO", SubmissionId: id, Language: language, Source: source, ManifestId: manifest})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, r.StatusCode(), string(r.Body))
	return id
}

// status reads the submission's status, waiting up to waitMs for it to settle.
func status(t *testing.T, ctx context.Context, c *businessapi.ClientWithResponses, id string, waitMs int32) businessapi.SubmissionStatus {
	t.Helper()
	r, err := c.GetSubmissionWithResponse(ctx, "ALGO", id, &businessapi.GetSubmissionParams{WaitMs: &waitMs})
	require.NoError(t, err)
	require.NotNil(t, r.JSON200, "%d %s", r.StatusCode(), r.Body)
	return *r.JSON200
}

func settled(s businessapi.SubmissionStatus) bool {
	switch s.Status {
	case "PENDING", "COMPILING", "JUDGING":
		return false
	}
	return true
}

// verdict waits for submission id to settle and returns its status word.
func verdict(t *testing.T, ctx context.Context, c *businessapi.ClientWithResponses, id string) string {
	t.Helper()
	for {
		s := status(t, ctx, c, id, 30000)
		if settled(s) {
			return string(s.Status)
		}
		require.NoError(t, ctx.Err(), "submission %s never settled", id)
	}
}

const (
	cppAPlusB = "#include <cstdio>\nint main(){long long a,b;if(scanf(\"%lld %lld\",&a,&b)!=2)return 1;printf(\"%lld\\n\",a+b);}\n"
	// cppSlowAPlusB burns about two seconds of CPU per case first: a job
	// that is still running when its node is told to stop.
	cppSlowAPlusB = "#include <cstdio>\n#include <ctime>\nint main(){clock_t s=clock();volatile unsigned long x=0;" +
		"while(clock()-s<2*CLOCKS_PER_SEC)x++;long long a,b;if(scanf(\"%lld %lld\",&a,&b)!=2)return 1;printf(\"%lld\\n\",a+b);}\n"
)
