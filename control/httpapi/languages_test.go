package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
)

// TestListLanguages: every accepted id is listed, with what ready nodes
// report; a report for another pool's language is refused; a manifest whose
// memory limit is below a language's minimum is refused at enqueue with 422.
func TestListLanguages(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	ctx := b.env.Ctx

	r, err := b.c.ListLanguagesWithResponse(ctx)
	require.NoError(t, err)
	conforms(t, r.HTTPResponse, r.Body)
	require.Equal(t, http.StatusOK, r.StatusCode(), string(r.Body))
	ids := map[string]businessapi.LanguageInfo{}
	for _, l := range r.JSON200.Languages {
		ids[l.Id] = l
	}
	for _, id := range []string{"cpp11", "cpp14", "cpp17", "cpp20", "c11", "c17", "java17", "python3", "arkts", "javascript", "mysql"} {
		require.Contains(t, ids, id)
		require.Zero(t, ids[id].ReadyNodes, "no node yet")
		require.NotEmpty(t, ids[id].Standard)
	}

	n := b.env.NewNode("cpp", 2, 2)
	b.env.ForceEnable(n.ID)
	nc := joinAndOpen(t, b.env, n.JoinCode, "boot-lang")
	report := func(l ...machineapi.LanguageReport) *http.Response {
		hb, err := nc.c.SendHeartbeatWithResponse(ctx, machineapi.HeartbeatRequest{RuntimeVersion: "kece-node test",
			Dependencies: []machineapi.Dependency{}, LocalSlots: 2, Languages: &l})
		require.NoError(t, err)
		return hb.HTTPResponse
	}
	cpp20 := machineapi.LanguageReport{Id: "cpp20", Pool: machineapi.PoolCpp, Standard: "C++20 (GNU dialect)",
		Version: "g++ (Debian 12.2.0-14) 12.2.0", CompileCommand: "g++ -std=gnu++20 -O2 -o main main.cpp",
		RunCommand: "./main", EntryPoint: "main.cpp", ExtraMemoryBytes: 0, MinMemoryBytes: 4 << 20}
	require.Equal(t, http.StatusOK, report(cpp20).StatusCode)
	py := cpp20
	py.Id, py.Pool = "python3", machineapi.PoolPython
	require.Equal(t, http.StatusUnprocessableEntity, report(py).StatusCode, "a cpp node cannot report python")
	c17 := cpp20
	c17.Id, c17.CompileCommand = "c17", "gcc -std=gnu17 -O2 -o main main.c -lm"
	require.Equal(t, http.StatusOK, report(cpp20, c17).StatusCode, "C is judged by the cpp pool")
	js := cpp20
	js.Id = "javascript"
	require.Equal(t, http.StatusUnprocessableEntity, report(js).StatusCode, "JavaScript is the arkts pool's, not cpp's")

	r, err = b.c.ListLanguagesWithResponse(ctx)
	require.NoError(t, err)
	conforms(t, r.HTTPResponse, r.Body)
	for _, l := range r.JSON200.Languages {
		if l.Id != "cpp20" {
			continue
		}
		require.Equal(t, int32(1), l.ReadyNodes)
		require.False(t, l.Mixed)
		require.Len(t, l.Variants, 1)
		require.Equal(t, cpp20.Version, l.Variants[0].Version)
		require.Equal(t, cpp20.CompileCommand, l.Variants[0].CompileCommand)
	}

	// The admin surface serves the same catalog.
	ar, err := adminClient(t, b.env).ListLanguagesWithResponse(ctx)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, ar.StatusCode(), string(ar.Body))
	require.Len(t, ar.JSON200.Languages, len(r.JSON200.Languages))
	for _, l := range ar.JSON200.Languages {
		if l.Id == "cpp20" {
			require.Equal(t, int32(1), l.ReadyNodes)
			require.Equal(t, cpp20.Version, l.Variants[0].Version)
		}
	}
	// A business token is not an admin token.
	resp := do(t, "GET", b.env.URL+"/api/v1/admin/languages", b.env.Business, "")
	require.Equal(t, http.StatusUnauthorized, resp.status)

	// 8 MiB is enough for the JVM (4 MiB) but below C++'s minimum (16 MiB:
	// libstdc++'s own footprint counts against the limit).
	m := codeManifest(t, b.c, "1\n", "1\n")
	m.Limits.MemoryMb = 8
	manID := publish(t, b.c, m)
	en, err := b.c.EnqueueSubmissionWithResponse(ctx, nil, businessapi.SubmissionCreate{SubmissionType: "ALGO",
		SubmissionId: "mem-cpp", Language: "cpp17", Source: "int main(){}", ManifestId: manID})
	require.NoError(t, err)
	conforms(t, en.HTTPResponse, en.Body)
	require.Equal(t, http.StatusUnprocessableEntity, en.StatusCode(), string(en.Body))
	code, field := apiError(t, en.Body)
	require.Equal(t, "MEMORY_LIMIT_TOO_LOW", code)
	require.Equal(t, "limits.memoryMb", field)
	require.Contains(t, string(en.Body), "at least")
	en, err = b.c.EnqueueSubmissionWithResponse(ctx, nil, businessapi.SubmissionCreate{SubmissionType: "ALGO",
		SubmissionId: "mem-java", Language: "java17", Source: "public class Main {}", ManifestId: manID})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, en.StatusCode(), string(en.Body))
}
