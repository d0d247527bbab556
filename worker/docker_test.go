package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/engine/code"
	"github.com/kece-oj/kece/internal/sockproxy"
	"github.com/kece-oj/kece/worker"
)

// requireDocker skips without a daemon and the pool's image, or fails under
// KECE_REQUIRE_DOCKER=1.
func requireDocker(t *testing.T, pool string) {
	t.Helper()
	miss := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("KECE_REQUIRE_DOCKER") == "1" {
			t.Fatalf("KECE_REQUIRE_DOCKER=1: "+format, args...)
		}
		t.Skipf(format+" (set KECE_REQUIRE_DOCKER=1 to fail instead)", args...)
	}
	cli, err := client.New(client.FromEnv)
	if err != nil {
		miss("docker client: %v", err)
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		miss("docker daemon not reachable: %v", err)
		return
	}
	tag, err := code.ImageTag(pool)
	require.NoError(t, err)
	if _, err := cli.ImageInspect(ctx, tag); err != nil {
		miss("image %s missing (deploy/images/build-local.sh %s): %v", tag, pool, err)
	}
}

var supervisor struct {
	sync.Once
	path string
	err  error
}

// supervisorBinary builds the static kece-sandbox-init once.
func supervisorBinary(t *testing.T) string {
	t.Helper()
	supervisor.Do(func() {
		dir, err := os.MkdirTemp("", "kece-sup-")
		if err != nil {
			supervisor.err = err
			return
		}
		_, file, _, _ := runtime.Caller(0)
		out := filepath.Join(dir, "kece-sandbox-init")
		cmd := exec.Command("go", "build", "-o", out, "./cmd/kece-sandbox-init")
		cmd.Dir = filepath.Join(filepath.Dir(file), "..")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			supervisor.err = fmt.Errorf("build supervisor: %v: %s", err, b)
			return
		}
		supervisor.path = out
	})
	require.NoError(t, supervisor.err)
	return supervisor.path
}

// The cpp pool end to end with the real Docker sandbox: an accepted program
// over two cases (one with an empty expected output) and a compile error.
func TestCppPoolEndToEnd(t *testing.T) {
	t.Parallel()
	requireDocker(t, "cpp")
	e := env(t, 20*time.Second)
	man := e.PublishCode(manifest.Limits{TimeMs: 2000, MemoryMb: 256, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 70}, controltest.Case{In: "0 0\n", Out: "", Weight: 30})
	nd := e.NewNode("cpp", 2, 4)
	e.ForceEnable(nd.ID)
	factory, err := worker.NewCodeBackend(worker.CodeBackendConfig{Pool: "cpp", Executor: code.Config{
		Workspace: filepath.Join(t.TempDir(), "ws"), SupervisorPath: supervisorBinary(t)}})
	require.NoError(t, err)
	cfg := nodeConfig(t, e.URL, "cpp", nd.JoinCode, nil)
	cfg.NewBackend, cfg.LocalSlots, cfg.RenewInterval = factory, 2, time.Second
	n := runNode(t, cfg)
	st := healthz(t, n)
	require.Contains(t, st.Runtime, "g++")
	require.Equal(t, []worker.Dependency{{Name: "docker", Healthy: true}, {Name: "image", Healthy: true, Detail: mustTag(t, "cpp")}}, st.Dependencies)

	// The node reports every id of its pool with the version probed in the image.
	var ids []string
	for _, l := range st.Languages {
		ids = append(ids, l.ID)
		require.Regexp(t, `^(g\+\+|gcc) `, l.Version, l.ID) // C is probed with gcc, C++ with g++
		require.NotEmpty(t, l.CompileCmd, l.ID)
		require.Positive(t, l.MinMemoryBytes, l.ID)
	}
	require.Equal(t, []string{"cpp11", "cpp14", "cpp17", "cpp20", "cpp", "c11", "c17"}, ids)
	// And the problem types its engine judges: the file I/O job below is
	// handed to it only because it reports file_io.
	require.Equal(t, code.Features(), st.Features)

	src := "#include <cstdio>\nint main(){long a,b;if(scanf(\"%ld %ld\",&a,&b)!=2)return 1;if(a+b)printf(\"%ld\\n\",a+b);}\n"
	ac := e.Enqueue("ALGO", "cpp-ac", "cpp17", src, man)
	ce := e.Enqueue("ALGO", "cpp-ce", "cpp17", "int main( {", man)
	// The job's language, not the pool, picks the standard: a program that
	// needs C++20 is AC as cpp20 and CE as cpp17 on the same node.
	src20 := "#include <concepts>\n#include <cstdio>\ntemplate <std::integral T> T add(T a, T b) { return a + b; }\n" +
		"struct P { long a, b; };\nint main(){P p{.a = 0, .b = 0};if(scanf(\"%ld %ld\",&p.a,&p.b)!=2)return 1;" +
		"if(add(p.a,p.b))printf(\"%ld\\n\",add(p.a,p.b));}\n"
	ac20 := e.Enqueue("ALGO", "cpp20-ac", "cpp20", src20, man)
	ce17 := e.Enqueue("ALGO", "cpp20-as-17", "cpp17", src20, man)
	// C is judged by the same node with gcc.
	srcC := "#include <stdio.h>\nint main(void){long a,b;if(scanf(\"%ld %ld\",&a,&b)!=2)return 1;if(a+b)printf(\"%ld\\n\",a+b);return 0;}\n"
	acC := e.Enqueue("ALGO", "c17-ac", "c17", srcC, man)
	// A file I/O problem: the manifest's io reaches the node through the
	// claim; the same answer on stdout only is WA.
	manIO := e.PublishCodeManifest(manifest.Manifest{Kind: manifest.KindCode, Limits: manifest.Limits{TimeMs: 2000, MemoryMb: 256, OutputKb: 64},
		Checker: manifest.Checker{Type: "tolerant"}, IO: &manifest.FileIO{InputFile: "add.in", OutputFile: "add.out"}},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 1})
	srcIO := "#include <stdio.h>\nint main(void){long a,b;FILE*i=fopen(\"add.in\",\"r\"),*o=fopen(\"add.out\",\"w\");" +
		"if(!i||!o||fscanf(i,\"%ld %ld\",&a,&b)!=2)return 1;fprintf(o,\"%ld\\n\",a+b);return 0;}\n"
	acIO := e.Enqueue("ALGO", "c17-file-io", "c17", srcIO, manIO)
	srcStdout := "#include <stdio.h>\nint main(void){long a,b;FILE*i=fopen(\"add.in\",\"r\");" +
		"if(!i||fscanf(i,\"%ld %ld\",&a,&b)!=2)return 1;printf(\"%ld\\n\",a+b);return 0;}\n"
	waIO := e.Enqueue("ALGO", "c17-stdout-only", "c17", srcStdout, manIO)
	// Subtasks: the manifest's groups reach the node, its min subtask stops
	// at the WA, the dependent is skipped, and the control plane's result
	// check accepts the subtask scores.
	manSub := e.PublishCodeManifest(manifest.Manifest{Kind: manifest.KindCode, Limits: manifest.Limits{TimeMs: 2000, MemoryMb: 256, OutputKb: 64},
		Checker: manifest.Checker{Type: "tolerant"}, Subtasks: []manifest.Subtask{
			{SubtaskID: "small", Scoring: "min", Cases: []string{"c1", "c2", "c3"}},
			{SubtaskID: "large", Scoring: "sum", Cases: []string{"c4"}, DependsOn: []string{"small"}},
			{SubtaskID: "other", Scoring: "sum", Cases: []string{"c5"}}}},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 10}, controltest.Case{In: "2 2\n", Out: "5\n", Weight: 10},
		controltest.Case{In: "3 3\n", Out: "6\n", Weight: 10}, controltest.Case{In: "4 4\n", Out: "8\n", Weight: 30},
		controltest.Case{In: "5 5\n", Out: "10\n", Weight: 40})
	sub := e.Enqueue("ALGO", "cpp-subtasks", "cpp17", src, manSub)
	// A multi-file submission: its header and second unit reach the node.
	multi, err := e.Store.Jobs().Enqueue(e.Ctx, store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "cpp-multi-file", Language: "cpp17",
		Source:     "#include <cstdio>\n#include \"add.h\"\nint main(){long a,b;if(scanf(\"%ld %ld\",&a,&b)!=2)return 1;if(add(a,b))printf(\"%ld\\n\",add(a,b));}\n",
		Files:      []store.SourceFile{{Name: "add.h", Content: "long add(long a, long b);\n"}, {Name: "add.cpp", Content: "long add(long a, long b) { return a + b; }\n"}},
		ManifestID: man})
	require.NoError(t, err)
	for _, w := range []struct {
		id      int64
		verdict string
	}{{ac, "AC"}, {ce, "CE"}, {ac20, "AC"}, {ce17, "CE"}, {acC, "AC"}, {acIO, "AC"}, {waIO, "WA"}, {sub, "WA"}, {multi.JobID, "AC"}} {
		j := waitJob(t, e, w.id, 3*time.Minute, "completed", completed)
		require.Equal(t, w.verdict, j.Verdict, string(j.Result))
	}
	j := waitJob(t, e, sub, time.Minute, "completed", completed)
	var res store.Result
	require.NoError(t, json.Unmarshal(j.Result, &res))
	require.Equal(t, 40.0, res.Verdict.Score)
	var caseStatus []string
	for _, c := range res.Verdict.Cases {
		caseStatus = append(caseStatus, c.Status)
	}
	require.Equal(t, []string{"AC", "WA", "SKIPPED", "SKIPPED", "AC"}, caseStatus)
	require.Equal(t, []store.SubtaskResult{{SubtaskID: "small", Status: "WA", Score: 0, MaxScore: 30},
		{SubtaskID: "large", Status: "SKIPPED", Score: 0, MaxScore: 30}, {SubtaskID: "other", Status: "AC", Score: 40, MaxScore: 40}}, res.Verdict.Subtasks)
}

func mustTag(t *testing.T, pool string) string {
	tag, err := code.ImageTag(pool)
	require.NoError(t, err)
	return tag
}

// Special checkers end to end: a testlib checker (its testlib.h uploaded as a
// checker file) awarding partial points, and a manifest in the old form (no
// protocol) judged by the legacy protocol, through the control plane, the
// node and the real sandbox; the control plane validates and stores the
// partial score and the business status shows it.
func TestSpecialCheckersEndToEnd(t *testing.T) {
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

	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "engine", "code", "testdata", name))
		require.NoError(t, err)
		return b
	}
	put := func(b []byte) (string, int64) { return e.PutArtifact(b), int64(len(b)) }
	echo := "#include <iostream>\n#include <string>\nint main(){std::string s;std::getline(std::cin,s);std::cout<<s<<\"\\n\";}\n"
	limits := manifest.Limits{TimeMs: 2000, MemoryMb: 256, OutputKb: 64}

	src, srcSize := put(read("testlib_checker.cpp"))
	hdr, hdrSize := put(read("testlib_mini.h"))
	testlib := e.PublishCode(limits, manifest.Checker{Type: "special", Special: &manifest.SpecialChecker{
		Language: "cpp17", SourceSha256: src, SourceSize: srcSize, Protocol: manifest.ProtocolTestlib, MaxPoints: 100,
		Files: []manifest.CheckerFile{{Name: "testlib.h", Sha256: hdr, Size: hdrSize}}}},
		controltest.Case{In: "ok\n", Out: "ANSWER\n", Weight: 6}, controltest.Case{In: "pts 25\n", Out: "ANSWER\n", Weight: 4})

	legacySrc, legacySize := put(read("checker.cpp"))
	legacy := e.PublishCode(limits, manifest.Checker{Type: "special", Special: &manifest.SpecialChecker{
		Language: "cpp17", SourceSha256: legacySrc, SourceSize: legacySize}},
		controltest.Case{In: "sqrt 16\n", Out: "any root\n", Weight: 1}, controltest.Case{In: "sqrt 25\n", Out: "any root\n", Weight: 1})
	rec, err := e.Store.Manifests().ManifestRecord(e.Ctx, store.Tenant{}, legacy)
	require.NoError(t, err)
	require.Empty(t, rec.Manifest.Checker.Special.Protocol, "an old-form manifest stays in the old form")

	partial := e.Enqueue("ALGO", "spj-partial", "cpp17", echo, testlib)
	j := waitJob(t, e, partial, 3*time.Minute, "completed", completed)
	require.Equal(t, "PARTIAL", j.Verdict, string(j.Result))
	var res store.Result
	require.NoError(t, json.Unmarshal(j.Result, &res))
	require.Equal(t, 7.0, res.Verdict.Score, string(j.Result))
	require.Equal(t, int64(10), res.Verdict.MaxScore)
	require.Equal(t, []float64{6, 1}, []float64{res.Verdict.Cases[0].Score, res.Verdict.Cases[1].Score})
	require.Equal(t, "PARTIAL", res.Verdict.Cases[1].Status)
	require.Contains(t, res.Verdict.Cases[1].Message, "partial answer")
	st, err := e.Store.Jobs().SubmissionStatus(e.Ctx, "ALGO", "spj-partial")
	require.NoError(t, err)
	require.Equal(t, "PARTIAL", st.Status)

	// The legacy checker reads argv input expected output: "4" squared is 16.
	root := "#include <cstdio>\n#include <cmath>\nint main(){char m[16];long n;scanf(\"%15s %ld\",m,&n);printf(\"%ld\\n\",(long)llround(sqrt((double)n)));}\n"
	old := e.Enqueue("ALGO", "spj-legacy", "cpp17", root, legacy)
	j = waitJob(t, e, old, 3*time.Minute, "completed", completed)
	require.Equal(t, "AC", j.Verdict, string(j.Result))
}

// A cpp node with the real Docker sandbox whose daemon is not there claims
// nothing and spends no attempt; once the daemon answers, the waiting job
// is judged. When the daemon goes away again, the first job that meets it
// fails once as DAEMON_UNREACHABLE and the node pauses until it is back.
// The daemon is a forwarding socket (internal/sockproxy) cut and reopened.
func TestDockerDownPausesNode(t *testing.T) {
	t.Parallel()
	requireDocker(t, "cpp")
	dir, err := os.MkdirTemp("", "kdp") // short: a unix socket path has at most 107 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	daemon := sockproxy.Docker(dir)
	t.Cleanup(daemon.Cut)

	e := env(t, 20*time.Second)
	man := e.PublishCode(manifest.Limits{TimeMs: 2000, MemoryMb: 256, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1 2\n", Out: "3\n", Weight: 100})
	nd := e.NewNode("cpp", 1, 4)
	e.ForceEnable(nd.ID)
	factory, err := worker.NewCodeBackend(worker.CodeBackendConfig{Pool: "cpp", Executor: code.Config{
		Workspace: filepath.Join(t.TempDir(), "ws"), SupervisorPath: supervisorBinary(t), DockerHost: daemon.Host()}})
	require.NoError(t, err)
	cfg := nodeConfig(t, e.URL, "cpp", nd.JoinCode, nil)
	// A healthy node probes once a minute (a paused one every 5 s): the
	// second job, not a probe, is what meets the daemon gone.
	cfg.NewBackend, cfg.RenewInterval, cfg.HealthInterval = factory, time.Second, time.Minute
	n := runNode(t, cfg)
	st := healthz(t, n)
	require.True(t, st.DependencyPaused, "%+v", st)
	require.False(t, st.Dependencies[0].Healthy, "%+v", st.Dependencies)

	src := "#include <cstdio>\nint main(){long a,b;if(scanf(\"%ld %ld\",&a,&b)!=2)return 1;printf(\"%ld\\n\",a+b);}\n"
	first := e.Enqueue("ALGO", "docker-down-1", "cpp17", src, man)
	time.Sleep(2 * time.Second) // absence over a bounded window: not leased, no attempt
	j, err := e.Store.Jobs().GetJob(e.Ctx, first)
	require.NoError(t, err)
	require.Equal(t, store.StateQueued, j.State)
	require.Zero(t, j.AttemptCount)

	require.NoError(t, daemon.Up()) // the next probe (within 5 s) finds it
	j = waitJob(t, e, first, 3*time.Minute, "judged once the daemon is up", completed)
	require.Equal(t, "AC", j.Verdict, string(j.Result))
	require.Equal(t, 1, j.AttemptCount)
	require.False(t, healthz(t, n).DependencyPaused)

	daemon.Cut() // the node's last probe was healthy: the next job meets it
	second := e.Enqueue("ALGO", "docker-down-2", "cpp17", src, man)
	waitJob(t, e, second, time.Minute, "failed on the daemon and requeued", func(j store.Job) bool {
		return j.LastErrorCode == "DAEMON_UNREACHABLE"
	})
	require.Eventually(t, func() bool { return healthz(t, n).DependencyPaused }, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, daemon.Up())
	j = waitJob(t, e, second, 3*time.Minute, "judged once the daemon is back", completed)
	require.Equal(t, "AC", j.Verdict, string(j.Result))
	require.Equal(t, 2, j.AttemptCount, "one attempt failed on the daemon, none while paused")
	require.Equal(t, int64(1), n.Metrics().DependencyPauses)
}
