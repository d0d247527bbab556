package browsertest

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kece-oj/kece/internal/loopback"
)

// need fails (when required by env) or skips when addr does not answer.
func need(t *testing.T, what, addr, env string) {
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

// chromium finds the browser: KECE_CHROMIUM, then the PATH.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KECE_CHROMIUM"); p != "" {
		return p
	}
	for _, n := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("KECE_REQUIRE_BROWSER") == "1" {
		t.Fatal("chromium required (KECE_REQUIRE_BROWSER=1) but not found: run scripts/chromium.sh install or set KECE_CHROMIUM")
	}
	t.Skip("chromium not found (scripts/chromium.sh install); set KECE_REQUIRE_BROWSER=1 to fail instead")
	return ""
}

// build compiles the binaries under test into a temp dir.
func build(t *testing.T, pkgs ...string) string {
	t.Helper()
	bin := t.TempDir()
	args := append([]string{"build", "-o", bin + "/"}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// start runs a child process until the test ends (SIGTERM by PID, then a
// kill after 10 s); its output goes to a log file printed if the test fails.
func start(t *testing.T, name, bin string, args, env []string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				if len(b) > 6000 {
					b = b[len(b)-6000:]
				}
				t.Logf("--- %s log (tail) ---\n%s", name, bytes.TrimSpace(b))
			}
		}
	})
}

func runOut(ctx context.Context, bin string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return string(out), err
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := loopback.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func waitHTTP(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	if err := loopback.WaitHTTP(ctx, url); err != nil {
		t.Fatal(err)
	}
}
