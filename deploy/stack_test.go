package deploy

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/dbtest"

	"github.com/kece-oj/kece/internal/loopback"
)

// The end-to-end tests of this package run the binaries as an operator
// does: built by the Makefile with a version stamp, a kece-control on a
// fresh database, nodes joined with the command kecectl prints.

// stampedVersion is what the shared build is stamped with.
const stampedVersion = "v9.9.9-e2e"

var (
	binOnce sync.Once
	binDir  string
	binErr  error

	imgOnce sync.Once
	imgErr  error
)

// TestMain removes what the shared builds left: the binaries' directory
// and the test-tagged images.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	if imgErr == nil && imgBuilt {
		_ = exec.Command("docker", "rmi", "kece/kece-control:"+stampedVersion, "kece/kece-node:"+stampedVersion).Run()
	}
	os.Exit(code)
}

var imgBuilt bool

// stampedImages builds kece/kece-control and kece/kece-node tagged
// stampedVersion once per run with `make images` (without moving :latest
// or saving) and returns the node image.
func stampedImages(t *testing.T) (control, node string) {
	t.Helper()
	imgOnce.Do(func() {
		cmd := exec.Command(filepath.Join(root, "scripts/images.sh"), stampedVersion)
		cmd.Env = append(os.Environ(), "TAG_LATEST=0", "NO_SAVE=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			imgErr = fmt.Errorf("scripts/images.sh: %v\n%s", err, out)
		}
		imgBuilt = true
	})
	require.NoError(t, imgErr)
	return "kece/kece-control:" + stampedVersion, "kece/kece-node:" + stampedVersion
}

// stampedBins builds every binary once per test run with `make build
// VERSION=… BINDIR=…` (CGO off, as the release builds them) and returns the
// directory.
func stampedBins(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kece-deploy-bin-")
		if err != nil {
			binErr = err
			return
		}
		binDir = dir
		cmd := exec.Command("make", "-C", root, "build", "VERSION="+stampedVersion, "BINDIR="+dir, "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("make build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return binDir
}

// goBuild builds one command with extra go build arguments (another stamp,
// an -overlay) into a fresh directory.
func goBuild(t *testing.T, pkg string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	all := append([]string{"build", "-o", dir + "/"}, args...)
	cmd := exec.Command("go", append(all, pkg)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build %s: %s", pkg, out)
	return filepath.Join(dir, filepath.Base(pkg))
}

// needTCP fails (when env=1) or skips when addr does not answer.
func needTCP(t *testing.T, what, addr, env string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		if os.Getenv(env) == "1" {
			t.Fatalf("%s required (%s=1) but unreachable at %s: %v", what, env, addr, err)
		}
		t.Skipf("%s unreachable at %s: %v (set %s=1 to fail instead)", what, addr, err, env)
	}
	c.Close()
}

// plane is a running kece-control with its tokens.
type plane struct {
	t          *testing.T
	bin        string
	url, addr  string
	dsn        string
	admin, biz string
}

// startPlane migrates a fresh database, creates an admin and a business
// token with kece-control itself and starts `kece-control serve` with
// short intervals.
func startPlane(t *testing.T, ctx context.Context, bin string) *plane {
	t.Helper()
	needTCP(t, "judge MariaDB", "127.0.0.1:33062", "KECE_REQUIRE_MYSQL")
	_, dsn := dbtest.Open(t)
	p := &plane{t: t, bin: bin, dsn: dsn, addr: freeAddr(t)}
	p.url = "http://" + p.addr
	ctl := filepath.Join(bin, "kece-control")
	p.admin = strings.TrimSpace(mustRun(t, ctx, nil, ctl, "token", "create", "--kind", "admin", "--name", "e2e-admin", "--mysql-dsn", dsn))
	p.biz = strings.TrimSpace(mustRun(t, ctx, nil, ctl, "token", "create", "--kind", "business", "--name", "e2e-oj", "--mysql-dsn", dsn))
	startProc(t, "control", ctl, []string{"serve", "--listen", p.addr, "--artifact-dir", t.TempDir(), "--mysql-dsn", dsn,
		"--lease-ttl", "10s", "--reap-interval", "500ms", "--heartbeat-interval", "1s", "--renew-interval", "3s"}, nil)
	waitHTTP(t, ctx, p.url+"/healthz")
	p.ctl(ctx, "host-group", "create", "--name", "e2e-host", "--slots", "16")
	return p
}

// ctl runs kecectl against the plane and returns its stdout.
func (p *plane) ctl(ctx context.Context, args ...string) string {
	p.t.Helper()
	return mustRun(p.t, ctx, []string{"KECE_ADMIN_URL=" + p.url, "KECE_ADMIN_TOKEN=" + p.admin},
		filepath.Join(p.bin, "kecectl"), args...)
}

// waitOnline waits until `kecectl node list` shows node name online.
func (p *plane) waitOnline(ctx context.Context, name string, within time.Duration) {
	p.t.Helper()
	re := regexp.MustCompile(`(?m)^\d+\s+` + regexp.QuoteMeta(name) + `\s+\S+\s+\S+\s+\S+\s+yes\s`)
	require.Eventually(p.t, func() bool { return re.MatchString(p.ctl(ctx, "node", "list")) }, within, 250*time.Millisecond,
		"node %s never listed online", name)
}

// verifyEnable runs the check of node name and enables it, as an admin does.
func (p *plane) verifyEnable(ctx context.Context, name string) {
	p.t.Helper()
	require.Contains(p.t, p.ctl(ctx, "node", "verify", name, "--reason", "e2e", "--wait"), "PASSED")
	require.Contains(p.t, p.ctl(ctx, "node", "enable", name, "--reason", "e2e", "--wait"), "ENABLED")
}

var joinLineRE = regexp.MustCompile(`(?m)^on the host: (kece-node join .*)$`)

// createNode registers a node and returns the join command kecectl printed,
// as the operator would paste it.
func (p *plane) createNode(ctx context.Context, name, pool string) string {
	p.t.Helper()
	out := p.ctl(ctx, "node", "create", "--name", name, "--pool", pool, "--group", "e2e-host", "--slots", "2")
	m := joinLineRE.FindStringSubmatch(out)
	require.NotNil(p.t, m, "kecectl node create printed no join command:\n%s", out)
	return m[1]
}

func mustRun(t *testing.T, ctx context.Context, env []string, bin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s %s: %s%s", filepath.Base(bin), strings.Join(args, " "), out, stderr.String())
	return string(out)
}

// proc is a started child process; exited is closed once it has exited.
type proc struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
}

// log returns what the process has written so far.
func (p *proc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// startProc runs a child until the test ends (SIGTERM by PID, a kill after
// 20 s); its output goes to a file, whose tail is logged if the test fails.
func startProc(t *testing.T, name, bin string, args, env []string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start(), "start %s", name)
	p := &proc{cmd: cmd, exited: make(chan struct{}), logPath: logPath}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
		}
		logf.Close()
		if t.Failed() {
			b := []byte(p.log())
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("--- %s log (tail) ---\n%s", name, bytes.TrimSpace(b))
		}
	})
	return p
}

// httpBody GETs url and returns the body of a 200 answer.
func httpBody(t *testing.T, url string) string {
	t.Helper()
	r, err := http.Get(url)
	require.NoError(t, err)
	defer r.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(r.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.StatusCode, "%s: %s", url, b.String())
	return b.String()
}

// requireDocker skips (or fails under KECE_REQUIRE_DOCKER=1) without the
// docker CLI and a daemon that answers it.
func requireDocker(t *testing.T) {
	t.Helper()
	out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput()
	if err == nil {
		return
	}
	if os.Getenv("KECE_REQUIRE_DOCKER") == "1" {
		t.Fatalf("KECE_REQUIRE_DOCKER=1 but docker does not answer: %v: %s", err, out)
	}
	t.Skipf("docker does not answer: %v (set KECE_REQUIRE_DOCKER=1 to fail instead)", err)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := loopback.FreeAddr()
	require.NoError(t, err)
	return addr
}

func waitHTTP(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	require.NoError(t, loopback.WaitHTTP(ctx, url))
}
