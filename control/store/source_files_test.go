package store_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

// A multi-file submission is frozen with every file: the same request again
// is the same job, a change in any file is a conflict (the request digest
// covers them all), a one-file submission's snapshot has no files field
// (so its digest is what it always was), and files are refused for
// languages that do not take them and with unusable names.
func TestMultiFileSubmissions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	files := []store.SourceFile{{Name: "add.h", Content: "long add(long, long);"}, {Name: "add.cpp", Content: "long add(long a, long b) { return a + b; }"}}
	req := store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "multi-1", Language: "cpp17", Source: "int main(){}", Files: files, ManifestID: b.Manifest}
	first, err := b.Store.Jobs().Enqueue(b.Ctx, req)
	require.NoError(t, err)
	again, err := b.Store.Jobs().Enqueue(b.Ctx, req)
	require.NoError(t, err)
	require.Equal(t, first.JobID, again.JobID)
	require.False(t, again.Created)

	changed := req
	changed.Files = []store.SourceFile{files[0], {Name: "add.cpp", Content: "long add(long a, long b) { return a - b; }"}}
	_, err = b.Store.Jobs().Enqueue(b.Ctx, changed)
	require.ErrorIs(t, err, store.ErrConflict, "a change in a further file is a different request")

	var snap string
	require.NoError(t, b.DB.QueryRow(`SELECT request_snapshot FROM judge_job WHERE id = ?`, first.JobID).Scan(&snap))
	var s store.Snapshot
	require.NoError(t, json.Unmarshal([]byte(snap), &s))
	require.Equal(t, files, s.Files)

	one := store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "single-1", Language: "cpp17", Source: "int main(){}", ManifestID: b.Manifest}
	r, err := b.Store.Jobs().Enqueue(b.Ctx, one)
	require.NoError(t, err)
	require.NoError(t, b.DB.QueryRow(`SELECT request_snapshot FROM judge_job WHERE id = ?`, r.JobID).Scan(&snap))
	require.JSONEq(t, `{"language":"cpp17","source":"int main(){}"}`, snap, "a one-file snapshot is unchanged")

	for name, tc := range map[string]struct {
		lang  string
		files []store.SourceFile
		field string
	}{
		"javascript":     {"javascript", files, "files"},
		"empty list":     {"cpp17", []store.SourceFile{}, "files"},
		"path":           {"cpp17", []store.SourceFile{{Name: "../x.h"}}, "files[0].name"},
		"duplicate":      {"cpp17", []store.SourceFile{{Name: "a.h"}, {Name: "a.h"}}, "files[1].name"},
		"entry name":     {"python3", []store.SourceFile{{Name: "main.py"}}, "files[0].name"},
		"java not .java": {"java17", []store.SourceFile{{Name: "Helper.txt"}}, "files[0].name"},
		"too many":       {"cpp17", make([]store.SourceFile, 17), "files"},
		// 256 KiB with the source, each file well under it.
		"too large": {"cpp17", []store.SourceFile{{Name: "a.h", Content: strings.Repeat("x", 130<<10)}, {Name: "b.h", Content: strings.Repeat("y", 130<<10)}}, "files"},
	} {
		bad := req
		bad.SubmissionID, bad.Language, bad.Files = "bad-"+strings.ReplaceAll(name, " ", "-"), tc.lang, tc.files
		_, err := b.Store.Jobs().Enqueue(b.Ctx, bad)
		var ve *store.ValidationError
		require.ErrorAs(t, err, &ve, name)
		require.Equal(t, tc.field, ve.Field, name)
	}

	// At the limit exactly (source included) it is accepted.
	fit := req
	fit.SubmissionID = "multi-fit"
	fit.Files = []store.SourceFile{{Name: "a.h", Content: strings.Repeat("x", store.MaxSourceBytes-len(req.Source))}}
	_, err = b.Store.Jobs().Enqueue(b.Ctx, fit)
	require.NoError(t, err)
}
