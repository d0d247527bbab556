package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
)

// A heartbeat's language report is stored and served for ready nodes only; a
// heartbeat without one keeps the previous report; unknown ids are refused.
func TestHeartbeatLanguagesFeedTheCatalog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.Group(t, 8)
	ready := b.Node(t, "cpp", g.ID, 2, true)
	pending := b.Node(t, "cpp", g.ID, 2, false)
	rep := []store.LanguageReport{{ID: "cpp20", Pool: "cpp", Standard: "C++20", Version: "g++ 12.2.0",
		CompileCommand: "g++ -std=gnu++20 main.cpp", RunCommand: "./main", EntryPoint: "main.cpp"}}
	for _, s := range []store.Session{ready, pending} {
		_, err := b.Store.Credentials().Heartbeat(b.Ctx, s.NodeSession, store.HeartbeatReport{RuntimeVersion: "rt", Languages: rep})
		require.NoError(t, err)
	}
	// A later heartbeat without a report keeps it.
	_, err := b.Store.Credentials().Heartbeat(b.Ctx, ready.NodeSession, store.HeartbeatReport{RuntimeVersion: "rt"})
	require.NoError(t, err)

	cat, err := b.Store.Nodes().Languages(b.Ctx)
	require.NoError(t, err)
	require.False(t, cat.AsOf.IsZero())
	var cpp20 store.LanguageInfo
	for _, l := range cat.Languages {
		if l.ID == "cpp20" {
			cpp20 = l
		}
	}
	require.Equal(t, "cpp", cpp20.Pool)
	require.Equal(t, 1, cpp20.ReadyNodes, "only the enabled node counts")
	require.Len(t, cpp20.Variants, 1)
	require.Equal(t, "g++ 12.2.0", cpp20.Variants[0].Version)
	require.Equal(t, "g++ -std=gnu++20 main.cpp", cpp20.Variants[0].CompileCommand)

	_, err = b.Store.Credentials().Heartbeat(b.Ctx, ready.NodeSession, store.HeartbeatReport{RuntimeVersion: "rt",
		Languages: []store.LanguageReport{{ID: "cobol", Pool: "cpp"}}})
	require.ErrorIs(t, err, store.ErrValidation)
}

// A manifest whose memory limit is below the language's minimum is refused
// at enqueue, naming the minimum; the same manifest is fine for Java, whose
// minimum (the JVM's smallest heap) is lower than C++'s (libstdc++'s own
// footprint counts against the limit).
func TestEnqueueRefusesMemoryBelowTheLanguageMinimum(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.Artifact(t, "x")
	m, err := b.Store.Manifests().PublishManifest(b.Ctx, tinyManifest(in))
	require.NoError(t, err)
	_, err = b.Store.Jobs().Enqueue(b.Ctx, store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "c1", Language: "cpp17",
		Source: "int main(){}", ManifestID: m.ID})
	require.ErrorIs(t, err, store.ErrMemoryTooLow)
	require.ErrorContains(t, err, "cpp17 needs a memory limit of at least 16 MiB")
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE submission_id = 'c1'`), "nothing written")
	_, err = b.Store.Jobs().Enqueue(b.Ctx, store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "j1", Language: "java17",
		Source: "public class Main {}", ManifestID: m.ID})
	require.NoError(t, err)
}

func tinyManifest(in string) manifest.Manifest {
	return manifest.Manifest{Kind: manifest.KindCode,
		Limits:  manifest.Limits{TimeMs: 1000, MemoryMb: 8, OutputKb: 64},
		Checker: manifest.Checker{Type: "tolerant"},
		Cases:   []manifest.Case{{CaseID: "a", InputSha256: in, InputSize: 1, OutputSha256: in, OutputSize: 1, Weight: 1}}}
}
