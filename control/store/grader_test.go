package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
)

// A grader problem takes submissions only in the languages it has a grader
// for (an alias matches its id); the grader's files must be uploaded
// artifacts and become ones the job's lease may download.
func TestEnqueueToAGraderProblem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.Artifact(t, "x")
	gsrc := b.Artifact(t, "int main(){}")
	m := tinyManifest(in)
	m.Limits.MemoryMb = 64
	m.Grader = &manifest.Grader{Languages: []manifest.GraderLanguage{{Language: "cpp17",
		Files: []manifest.CheckerFile{{Name: "grader.cpp", Sha256: "2222222222222222222222222222222222222222222222222222222222222222", Size: 4}}}}}
	_, err := b.Store.Manifests().PublishManifest(b.Ctx, m)
	require.ErrorIs(t, err, store.ErrValidation, "a grader file that was never uploaded")
	m.Grader.Languages[0].Files[0] = manifest.CheckerFile{Name: "grader.cpp", Sha256: gsrc, Size: int64(len("int main(){}"))}
	pub, err := b.Store.Manifests().PublishManifest(b.Ctx, m)
	require.NoError(t, err)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_manifest_artifact WHERE manifest_id = ? AND sha256 = ?`, pub.ID, gsrc))

	_, err = b.Store.Jobs().Enqueue(b.Ctx, store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "g-java", Language: "java17",
		Source: "public class Main {}", ManifestID: pub.ID})
	require.ErrorIs(t, err, store.ErrManifestMismatch)
	require.ErrorContains(t, err, "graders for cpp17 only")
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE submission_id = 'g-java'`), "nothing written")
	_, err = b.Store.Jobs().Enqueue(b.Ctx, store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "g-cpp", Language: "cpp",
		Source: "long add(long a, long b) { return a + b; }", ManifestID: pub.ID})
	require.NoError(t, err)
}
