package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
)

// A grader manifest over HTTP: its files must be uploaded artifacts (422
// naming the file), it round-trips, a submission in a language without a
// grader is 422 MANIFEST_LANGUAGE_MISMATCH, and the node that claims a job
// gets the grader in the manifest and may download its files.
func TestGraderOverHTTP(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	ctx, c := b.env.Ctx, b.c

	m := codeManifest(t, c, "40 2\n", "42\n")
	grader, header := []byte("#include \"add.h\"\nint main(){}\n"), []byte("long add(long, long);\n")
	m.Grader = &businessapi.Grader{Languages: []businessapi.GraderLanguage{{Language: "cpp17", Files: []businessapi.CheckerFile{
		{Name: "grader.cpp", Sha256: upload(t, c, grader), Size: int64(len(grader))},
		{Name: "add.h", Sha256: digestOf(header), Size: int64(len(header))}}}}}

	pm, err := c.PublishManifestWithResponse(ctx, m)
	require.NoError(t, err)
	conforms(t, pm.HTTPResponse, pm.Body)
	require.Equal(t, http.StatusUnprocessableEntity, pm.StatusCode(), string(pm.Body))
	code, field := apiError(t, pm.Body)
	require.Equal(t, "ARTIFACT_MISSING", code)
	require.Equal(t, "grader.languages[0].files[1].sha256", field)
	upload(t, c, header)
	manID := publish(t, c, m)
	gm, err := c.GetManifestWithResponse(ctx, manID)
	require.NoError(t, err)
	require.Equal(t, m, gm.JSON200.Manifest, "the grader round-trips")

	en, err := c.EnqueueSubmissionWithResponse(ctx, nil, businessapi.SubmissionCreate{SubmissionType: "ALGO", SubmissionId: "g-j",
		Language: "java17", Source: "public class Solution {}", ManifestId: manID})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, en.StatusCode(), string(en.Body))
	code, field = apiError(t, en.Body)
	require.Equal(t, "MANIFEST_LANGUAGE_MISMATCH", code)
	require.Equal(t, "language", field)
	en, err = c.EnqueueSubmissionWithResponse(ctx, nil, businessapi.SubmissionCreate{SubmissionType: "ALGO", SubmissionId: "g-c",
		Language: "cpp", Source: "long add(long a, long b) { return a + b; }\n", ManifestId: manID})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, en.StatusCode(), string(en.Body))

	n := b.env.NewNode("cpp", 2, 4)
	nc := joinAndOpen(t, b.env, n.JoinCode, "boot-grader-1")
	b.env.ForceEnable(n.ID)
	reportFeatures(t, nc, machineapi.FeatureGrader)
	cl, err := nc.c.ClaimJobsWithResponse(ctx, machineapi.ClaimRequest{FreeSlots: 1, WaitMs: 1000})
	require.NoError(t, err)
	require.Len(t, cl.JSON200.Jobs, 1)
	job := cl.JSON200.Jobs[0]
	require.NotNil(t, job.Manifest.Grader)
	require.Equal(t, machineapi.Language("cpp17"), job.Manifest.Grader.Languages[0].Language)
	require.Equal(t, "add.h", job.Manifest.Grader.Languages[0].Files[1].Name)
	dl, err := nc.c.DownloadArtifactWithResponse(ctx, job.JobId, digestOf(header), &machineapi.DownloadArtifactParams{XKeceLeaseEpoch: job.LeaseEpoch})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, dl.StatusCode(), "a grader file is an artifact of the job")
	require.Equal(t, header, dl.Body)
}
