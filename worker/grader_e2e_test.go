package worker_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/engine/code"
	"github.com/kece-oj/kece/worker"
)

// A grader problem end to end: the manifest's grader files reach the node as
// artifacts of the job and are built with the contestant's function in the
// real sandbox; the grader's output is judged (a contestant that exits
// before the grader prints is WA), and an alias finds its id's grader.
func TestGraderEndToEnd(t *testing.T) {
	t.Parallel()
	requireDocker(t, "cpp")
	e := env(t, 20*time.Second)
	nd := e.NewNode("cpp", 2, 4)
	e.ForceEnable(nd.ID)
	factory, err := worker.NewCodeBackend(worker.CodeBackendConfig{Pool: "cpp", Executor: code.Config{
		Workspace: filepath.Join(t.TempDir(), "ws"), SupervisorPath: supervisorBinary(t)}})
	require.NoError(t, err)
	cfg := nodeConfig(t, e.URL, "cpp", nd.JoinCode, nil)
	cfg.NewBackend, cfg.LocalSlots, cfg.RenewInterval = factory, 2, time.Second
	runNode(t, cfg)

	file := func(name, content string) manifest.CheckerFile {
		return manifest.CheckerFile{Name: name, Sha256: e.PutArtifact([]byte(content)), Size: int64(len(content))}
	}
	grader := "#include <cstdio>\n#include \"add.h\"\nint main(){long a,b;if(scanf(\"%ld %ld\",&a,&b)!=2)return 1;long r=add(a,b);printf(\"%ld\\n\",r);}\n"
	man := e.PublishCodeManifest(manifest.Manifest{Kind: manifest.KindCode, Limits: manifest.Limits{TimeMs: 2000, MemoryMb: 256, OutputKb: 64},
		Checker: manifest.Checker{Type: "tolerant"}, Grader: &manifest.Grader{Languages: []manifest.GraderLanguage{{Language: "cpp17",
			Files: []manifest.CheckerFile{file("grader.cpp", grader), file("add.h", "long add(long a, long b);\n")}}}}},
		controltest.Case{In: "40 2\n", Out: "42\n", Weight: 1}, controltest.Case{In: "-5 5\n", Out: "0\n", Weight: 1})
	ac := e.Enqueue("ALGO", "grader-ac", "cpp", "#include \"add.h\"\nlong add(long a, long b) { return a + b; }\n", man)
	exit := e.Enqueue("ALGO", "grader-exit", "cpp17", "#include <cstdlib>\n#include \"add.h\"\nlong add(long a, long b) { std::exit(0); }\n", man)
	ce := e.Enqueue("ALGO", "grader-ce", "cpp17", "#include \"add.h\"\nlong add(long a, long b) { return a + ; }\n", man)
	for _, w := range []struct {
		id      int64
		verdict string
	}{{ac, "AC"}, {exit, "WA"}, {ce, "CE"}} {
		j := waitJob(t, e, w.id, 3*time.Minute, "completed", completed)
		require.Equal(t, w.verdict, j.Verdict, string(j.Result))
	}
}
