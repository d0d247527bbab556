package worker_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/engine/code"
	"github.com/kece-oj/kece/worker"
)

// codeNode starts a node of pool with the real Docker sandbox (two slots).
func codeNode(t *testing.T, e *controltest.Env, pool string) *testNode {
	t.Helper()
	nd := e.NewNode(pool, 2, 4)
	e.ForceEnable(nd.ID)
	factory, err := worker.NewCodeBackend(worker.CodeBackendConfig{Pool: pool, Executor: code.Config{
		Workspace: filepath.Join(t.TempDir(), "ws"), SupervisorPath: supervisorBinary(t)}})
	require.NoError(t, err)
	cfg := nodeConfig(t, e.URL, pool, nd.JoinCode, nil)
	cfg.NewBackend, cfg.LocalSlots, cfg.RenewInterval = factory, 2, time.Second
	return runNode(t, cfg)
}

// testdata reads a fixture of engine/code.
func testdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "engine", "code", "testdata", name))
	require.NoError(t, err)
	return string(b)
}

// talker is a checker of type typ (interactive or communication) whose
// program is the C++ fixture name.
func talker(e *controltest.Env, t *testing.T, typ, name string, processes int) manifest.Checker {
	src := testdata(t, name)
	return manifest.Checker{Type: typ, Special: &manifest.SpecialChecker{Language: "cpp17",
		SourceSha256: e.PutArtifact([]byte(src)), SourceSize: int64(len(src)), Processes: processes}}
}

// judged waits for the job and checks its verdict and, per case, the
// status and a part of the message.
func judged(t *testing.T, e *controltest.Env, jobID int64, verdict string, cases ...[2]string) {
	t.Helper()
	j := waitJob(t, e, jobID, 3*time.Minute, "completed", completed)
	require.Equal(t, verdict, j.Verdict, string(j.Result))
	var res store.Result
	require.NoError(t, json.Unmarshal(j.Result, &res))
	require.Len(t, res.Verdict.Cases, len(cases), string(j.Result))
	for i, c := range cases {
		require.Equal(t, c[0], res.Verdict.Cases[i].Status, string(j.Result))
		require.Contains(t, res.Verdict.Cases[i].Message, c[1], string(j.Result))
	}
}

// An interactive problem end to end: the interactor (testdata/interactor.cpp)
// is the manifest's special program, built and run by a cpp node beside the
// contestant in the real sandbox; a binary search finds the number (AC), a
// linear guesser goes past 30 guesses (WA), and the interactor's message
// reaches the stored case result.
func TestInteractiveEndToEnd(t *testing.T) {
	t.Parallel()
	requireDocker(t, "cpp")
	e := env(t, 20*time.Second)
	codeNode(t, e, "cpp")
	man := e.PublishCode(manifest.Limits{TimeMs: 2000, MemoryMb: 256, OutputKb: 64},
		talker(e, t, manifest.CheckerInteractive, "interactor.cpp", 0), controltest.Case{In: "100 90 normal ok\n", Weight: 1})
	ac := e.Enqueue("ALGO", "interactive-ac", "cpp17", testdata(t, "guess.cpp"), man)
	linear := "#include <cstdio>\nint main(){long n;char w[32],r[4];if(scanf(\"%ld %31s\",&n,w)!=2)return 9;" +
		"for(long g=1;;g++){printf(\"%ld\\n\",g);fflush(stdout);if(scanf(\"%3s\",r)!=1||r[0]=='=')return 0;}}\n"
	wa := e.Enqueue("ALGO", "interactive-wa", "cpp17", linear, man)
	judged(t, e, ac, "AC", [2]string{"AC", "ok found 90 in 7 guesses"})
	judged(t, e, wa, "WA", [2]string{"WA", "more than 30 guesses"})
}

// A communication task end to end on a cpp node: the manager
// (testdata/manager.cpp, N = 2) talks to two copies of testdata/square.cpp,
// each in its own sandbox; both answering right is AC, and a case where
// process 2 answers wrong is WA with the manager's message, beside an AC case.
func TestCommunicationEndToEnd(t *testing.T) {
	t.Parallel()
	requireDocker(t, "cpp")
	e := env(t, 20*time.Second)
	codeNode(t, e, "cpp")
	limits := manifest.Limits{TimeMs: 2000, MemoryMb: 256, OutputKb: 64}
	manager := talker(e, t, manifest.CheckerCommunication, "manager.cpp", 2)
	okMan := e.PublishCode(limits, manager, controltest.Case{In: "3 4 ok ok\n", Weight: 1})
	waMan := e.PublishCode(limits, manager, controltest.Case{In: "5 6 ok ok\n", Weight: 1}, controltest.Case{In: "3 4 ok wrong\n", Weight: 1})
	square := testdata(t, "square.cpp")
	ac := e.Enqueue("ALGO", "communication-ac", "cpp17", square, okMan)
	wa := e.Enqueue("ALGO", "communication-wa", "cpp17", square, waMan)
	judged(t, e, ac, "AC", [2]string{"AC", "ok sum of squares 25"})
	judged(t, e, wa, "WA", [2]string{"AC", "ok sum of squares 61"}, [2]string{"WA", "process 2 answered 17 for 4"})
}

// An arkts-pool node end to end: it reports its image and both languages of
// its pool, and judges an a+b as javascript (testdata/prog.js) and as arkts
// (testdata/prog.ets, type-checked first) AC, and a JavaScript program
// printing a wrong sum WA.
func TestArktsPoolEndToEnd(t *testing.T) {
	t.Parallel()
	requireDocker(t, "arkts")
	e := env(t, 20*time.Second)
	st := healthz(t, codeNode(t, e, "arkts"))
	require.Equal(t, []worker.Dependency{{Name: "docker", Healthy: true}, {Name: "image", Healthy: true, Detail: mustTag(t, "arkts")}}, st.Dependencies)
	var ids []string
	for _, l := range st.Languages {
		ids = append(ids, l.ID)
	}
	require.Equal(t, []string{"arkts", "javascript"}, ids)

	man := e.PublishCode(manifest.Limits{TimeMs: 3000, MemoryMb: 256, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "sum 40 2\n", Out: "42\n", Weight: 1}, controltest.Case{In: "sum -5 5\n", Out: "0\n", Weight: 1})
	js := e.Enqueue("ALGO", "javascript-ac", "javascript", testdata(t, "prog.js"), man)
	ets := e.Enqueue("ALGO", "arkts-ac", "arkts", testdata(t, "prog.ets"), man)
	wrong := "const w = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/);\nconsole.log(String(Number(w[1]) + Number(w[2]) + 1));\n"
	wa := e.Enqueue("ALGO", "javascript-wa", "javascript", wrong, man)
	judged(t, e, js, "AC", [2]string{"AC", ""}, [2]string{"AC", ""})
	judged(t, e, ets, "AC", [2]string{"AC", ""}, [2]string{"AC", ""})
	judged(t, e, wa, "WA", [2]string{"WA", ""}, [2]string{"WA", ""})
}
