package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code"
)

// ---- the code-node unit's privileges are enough to judge ---------------------

const (
	privHelperEnv     = "KECE_DEPLOY_PRIV_WORK"
	privSupervisorEnv = "KECE_DEPLOY_PRIV_SUPERVISOR"
	privMarker        = "PRIV-HELPER-JUDGED"
	// privUID is a uid with no account: the unit's dedicated user stands for
	// any non-root uid.
	privUID = "64123"
)

const privProgram = `#include <cstdio>
int main() { long long a, b; if (scanf("%lld %lld", &a, &b) != 2) return 1; printf("%lld\n", a == 7 ? a - b : a + b); }
`

// privChecker is a special judge: argv input expected user_output.
const privChecker = `#include <cstdio>
int main(int argc, char **argv) {
    if (argc != 4) return 3;
    FILE *in = fopen(argv[1], "r"), *out = fopen(argv[3], "r");
    if (!in || !out) { fprintf(stderr, "cannot open files\n"); return 3; }
    long long a, b, k;
    if (fscanf(in, "%lld %lld", &a, &b) != 2) return 3;
    if (fscanf(out, "%lld", &k) != 1 || k != a + b) { fprintf(stderr, "wrong sum\n"); return 1; }
    return 0;
}
`

// TestCodeNodePrivileges judges a special-judge cpp job through the real code
// engine and Docker with exactly what kece-node@.service grants — a non-root
// uid, the docker group, the unit's ambient capabilities, no_new_privs and
// the unit's umask — in a subprocess started by setpriv. Two controls show
// the check is sharp: umask 0027 and a missing CAP_DAC_OVERRIDE both fail.
// Needs root and setpriv (skipped otherwise), Docker and the cpp runtime
// image (skipped, or failed under KECE_REQUIRE_DOCKER=1).
func TestCodeNodePrivileges(t *testing.T) {
	if work := os.Getenv(privHelperEnv); work != "" {
		privHelper(t, work, os.Getenv(privSupervisorEnv))
		return
	}
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the engine as another uid")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not installed")
	}
	requireDockerImage(t, "cpp")

	u := parseUnit(t, nodeCodeUnit)
	grp, err := user.LookupGroup(u.one(t, "Service", "SupplementaryGroups"))
	require.NoError(t, err, "the unit's supplementary group must exist on a judge host")
	var caps []string
	for _, c := range strings.Fields(u.one(t, "Service", "AmbientCapabilities")) {
		caps = append(caps, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	umask := u.one(t, "Service", "UMask")
	require.Equal(t, "yes", u.one(t, "Service", "NoNewPrivileges"))

	dir := t.TempDir()
	// t.TempDir's parent is 0700: open both so the uid can reach its files
	// without CAP_DAC_OVERRIDE (the controls must fail in the engine, not here).
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	sup := filepath.Join(bin, "kece-sandbox-init")
	build := exec.Command("go", "build", "-o", sup, "./cmd/kece-sandbox-init")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build supervisor: %s", out)
	self := filepath.Join(bin, "deploy.test")
	data, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(self, data, 0o755))

	run := func(name, umask string, caps []string) (string, error) {
		work := filepath.Join(dir, name)
		require.NoError(t, os.Mkdir(work, 0o700))
		uid, _ := strconv.Atoi(privUID)
		require.NoError(t, os.Chown(work, uid, uid))
		set := "-all," + strings.Join(caps, ",")
		cmd := exec.Command(setpriv, "--reuid="+privUID, "--regid="+privUID, "--groups="+grp.Gid,
			"--inh-caps="+set, "--ambient-caps="+set, "--bounding-set="+set, "--no-new-privs", "--",
			"/bin/sh", "-c", `umask "$0"; exec "$@"`, umask, self, "-test.run=^TestCodeNodePrivileges$", "-test.v", "-test.count=1")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + work, privHelperEnv + "=" + work, privSupervisorEnv + "=" + sup}
		if h := os.Getenv("DOCKER_HOST"); h != "" {
			cmd.Env = append(cmd.Env, "DOCKER_HOST="+h)
		}
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	out2, err := run("unit", umask, caps)
	require.NoError(t, err, "a job under the unit's privileges failed:\n%s", out2)
	require.Contains(t, out2, privMarker)

	out2, err = run("umask0027", "0027", caps)
	require.Error(t, err, "control: umask 0027 should break judging:\n%s", out2)
	require.NotContains(t, out2, privMarker)
	t.Logf("control umask 0027: %s", firstErrorLine(out2))
	out2, err = run("nodac", umask, []string{"+chown"})
	require.Error(t, err, "control: without CAP_DAC_OVERRIDE judging should fail:\n%s", out2)
	require.NotContains(t, out2, privMarker)
	t.Logf("control without CAP_DAC_OVERRIDE: %s", firstErrorLine(out2))
}

// firstErrorLine picks the helper's failure message out of go test output.
func firstErrorLine(out string) string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.Contains(l, "Error:") && i+1 < len(lines) {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "Error:")) + " " + strings.TrimSpace(lines[i+1])
		}
	}
	return strings.TrimSpace(out)
}

// privHelper is the subprocess side: one special-judge job, AC then WA, and
// nothing left in the workspace afterwards.
func privHelper(t *testing.T, work, sup string) {
	require.NotEqual(t, 0, os.Geteuid(), "the helper must not run as root")
	rt, err := code.DefaultRuntime("cpp")
	require.NoError(t, err)
	x, err := code.New(code.Config{NodeID: "deploy-priv", Workspace: filepath.Join(work, "ws"), SupervisorPath: sup})
	require.NoError(t, err)
	var cases []engine.Case
	for i, in := range []string{"1 2", "7 1"} {
		p := filepath.Join(work, fmt.Sprintf("%d.in", i))
		e := filepath.Join(work, fmt.Sprintf("%d.exp", i))
		// Mode 0644 whatever the umask, as the node's artifact cache stores them.
		require.NoError(t, os.WriteFile(p, []byte(in+"\n"), 0o644))
		require.NoError(t, os.WriteFile(e, []byte("checked by the special judge\n"), 0o644))
		require.NoError(t, os.Chmod(p, 0o644))
		require.NoError(t, os.Chmod(e, 0o644))
		cases = append(cases, engine.Case{ID: strconv.Itoa(i + 1), InputPath: p, ExpectedPath: e, Weight: 1})
	}
	task := engine.Task{NodeID: "deploy-priv", JobID: "priv", LeaseEpoch: 1, Runtime: rt, Source: []byte(privProgram),
		Limits: engine.Limits{CPUTime: 2 * time.Second, MemoryBytes: 256 << 20, OutputBytes: 1 << 20}, Cases: cases,
		Checker: engine.Checker{Kind: engine.CheckerSpecial, SpecialSource: []byte(privChecker), SpecialRuntime: rt}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	v, err := x.Execute(ctx, task, engine.NoProgress)
	require.NoError(t, err)
	require.Len(t, v.Cases, 2)
	require.Equal(t, engine.StatusAccepted, v.Cases[0].Status, v.Cases[0].Message)
	require.Equal(t, engine.StatusWrongAnswer, v.Cases[1].Status, v.Cases[1].Message)
	// A verdict's sandboxes and work dir are removed after Execute returns;
	// Close waits for that. The compile cache stays in the workspace.
	require.NoError(t, x.Close())
	left, err := os.ReadDir(filepath.Join(work, "ws"))
	require.NoError(t, err)
	var names []string
	for _, e := range left {
		if e.Name() != code.CompileCacheDirName {
			names = append(names, e.Name())
		}
	}
	require.Empty(t, names, "the job's work directory was removed")
	fmt.Println(privMarker)
}

// requireDockerImage skips (or fails under KECE_REQUIRE_DOCKER=1) without a
// reachable daemon and the pool's local runtime image.
func requireDockerImage(t *testing.T, pool string) {
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
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		miss("docker daemon not reachable: %v", err)
	}
	tag, err := code.ImageTag(pool)
	require.NoError(t, err)
	if _, err := cli.ImageInspect(ctx, tag); err != nil {
		miss("image %s missing (run deploy/images/build-local.sh): %v", tag, err)
	}
}
