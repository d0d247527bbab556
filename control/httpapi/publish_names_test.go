package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/businessapi"
)

// Over the business API, per kind of problem program: a checker, an
// interactor, a manager or a grader whose file takes a name of its
// runtime's own files (the python3 checker's main.py is its source) is
// refused 422 MANIFEST_INVALID naming the file, and nothing is written; the
// same manifest with the file named otherwise publishes (201).
func TestPublishRefusesFilesNamedLikeTheRuntime(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	ctx, c := b.env.Ctx, b.c
	base := codeManifest(t, c, "", "")
	src := []byte("print('ok')\n")
	srcDigest := upload(t, c, src)
	helper := []byte("# helper\n")
	helperDigest := upload(t, c, helper)
	file := func(name string) businessapi.CheckerFile {
		return businessapi.CheckerFile{Name: name, Sha256: helperDigest, Size: int64(len(helper))}
	}
	program := func(typ businessapi.CheckerType, lang, name string) businessapi.Manifest {
		m := base
		sp := &businessapi.SpecialChecker{Language: businessapi.Language(lang), SourceSha256: srcDigest, SourceSize: int64(len(src)),
			Files: &[]businessapi.CheckerFile{file(name)}}
		if typ == businessapi.CheckerTypeCommunication {
			two := 2
			sp.Processes = &two
		}
		m.Checker = businessapi.Checker{Type: typ, Special: sp}
		return m
	}
	grader := func(lang, name string) businessapi.Manifest {
		m := base
		m.Grader = &businessapi.Grader{Languages: []businessapi.GraderLanguage{{Language: businessapi.Language(lang),
			Files: []businessapi.CheckerFile{file("grader.cpp"), file(name)}}}}
		return m
	}
	cases := []struct {
		kind     string
		bad, ok  businessapi.Manifest
		field    string
		mentions string
	}{
		{"checker", program(businessapi.CheckerTypeSpecial, "python3", "main.py"),
			program(businessapi.CheckerTypeSpecial, "python3", "words.py"), "checker.special.files[0].name", "checker"},
		{"interactor", program(businessapi.CheckerTypeInteractive, "cpp17", "main.cpp"),
			program(businessapi.CheckerTypeInteractive, "cpp17", "testlib.h"), "checker.special.files[0].name", "interactor"},
		{"manager", program(businessapi.CheckerTypeCommunication, "java17", "Main.class"),
			program(businessapi.CheckerTypeCommunication, "java17", "words.txt"), "checker.special.files[0].name", "manager"},
		{"grader", grader("cpp17", "main"), grader("cpp17", "grader.h"), "grader.languages[0].files[1].name", "grader"},
	}
	for _, tc := range cases {
		r, err := c.PublishManifestWithResponse(ctx, tc.bad)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnprocessableEntity, r.StatusCode(), tc.kind+": "+string(r.Body))
		code, field := apiError(t, r.Body)
		require.Equal(t, "MANIFEST_INVALID", code, tc.kind)
		require.Equal(t, tc.field, field, tc.kind)
		require.Contains(t, string(r.Body), tc.mentions, tc.kind)
	}
	require.Zero(t, b.count(`SELECT COUNT(*) FROM judge_manifest`), "nothing written by refused manifests")
	for _, tc := range cases {
		r, err := c.PublishManifestWithResponse(ctx, tc.ok)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, r.StatusCode(), tc.kind+": "+string(r.Body))
	}
}
