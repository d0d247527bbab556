package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

// A further file named like one the runtime would load in place of its own
// is refused at enqueue (422 REQUEST_INVALID over HTTP, the field named):
// a Python standard-library module (py_compile.py took over the compile
// step), sitecustomize/usercustomize, a C/C++ precompiled header. Nothing
// is written for a refused request; the same names are fine where the
// runtime does not load them.
func TestEnqueueRefusesRuntimeNames(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i, tc := range []struct {
		lang, name, why string
	}{
		{"python3", "py_compile.py", "standard-library module py_compile"},
		{"python", "site.py", "standard-library module site"},
		{"python3", "sitecustomize.py", "standard-library module sitecustomize"},
		{"python3", "usercustomize.py", "standard-library module usercustomize"},
		{"python3", "encodings.pyc", "standard-library module encodings"},
		{"python3", "random.cpython-311-x86_64-linux-gnu.so", "standard-library module random"},
		{"cpp17", "add.h.gch", "precompiled header"},
		{"c11", "stdio.h.gch", "precompiled header"},
	} {
		req := store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: fmt.Sprintf("names-%d", i), Language: tc.lang,
			Source: "x", Files: []store.SourceFile{{Name: "ok.h", Content: "x"}, {Name: tc.name, Content: "x"}}, ManifestID: b.Manifest}
		_, err := b.Store.Jobs().Enqueue(b.Ctx, req)
		var ve *store.ValidationError
		require.ErrorAs(t, err, &ve, tc.name)
		require.Equal(t, "files[1].name", ve.Field, tc.name)
		require.Contains(t, ve.Problem, tc.why, tc.name)
	}
	var n int
	require.NoError(t, b.DB.QueryRow(`SELECT COUNT(*) FROM judge_job WHERE submission_id LIKE 'names-%'`).Scan(&n))
	require.Zero(t, n, "a refused request writes nothing")

	for i, tc := range []struct{ lang, name string }{
		{"python3", "helpers.py"}, {"python3", "py_compile.txt"}, {"cpp17", "random.py"}, {"cpp17", "py_compile.h"},
	} {
		req := store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: fmt.Sprintf("fine-%d", i), Language: tc.lang,
			Source: "x", Files: []store.SourceFile{{Name: tc.name, Content: "x"}}, ManifestID: b.Manifest}
		_, err := b.Store.Jobs().Enqueue(b.Ctx, req)
		require.NoError(t, err, tc.name)
	}
}
