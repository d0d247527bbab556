package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// The main job end to end, as `make demo` runs it: real kece-control and
// kece-node processes for every pool, real Docker sandboxes and the judge
// MariaDB. It needs both servers and the runtime images (make deps); it
// skips without them unless KECE_REQUIRE_DOCKER / KECE_REQUIRE_MYSQL ask for
// a failure instead.
func TestDemoEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end with real processes; not in -short")
	}
	need := func(what, addr, env string) {
		c, err := net.DialTimeout("unix", addr, time.Second)
		if addr[0] != '/' {
			c, err = net.DialTimeout("tcp", addr, time.Second)
		}
		if err != nil {
			if os.Getenv(env) == "1" {
				t.Fatalf("%s required (%s=1) but unreachable at %s: %v", what, env, addr, err)
			}
			t.Skipf("%s unreachable at %s: %v (set %s=1 to fail instead)", what, addr, err, env)
		}
		c.Close()
	}
	need("Docker", "/var/run/docker.sock", "KECE_REQUIRE_DOCKER")
	need("control MariaDB", "127.0.0.1:33061", "KECE_REQUIRE_MYSQL")
	need("judge MariaDB", "127.0.0.1:33062", "KECE_REQUIRE_MYSQL")

	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "../kece-control", "../kece-node", "../kecectl", "../kece-sandbox-init")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build binaries: %v\n%s", err, out)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	d := &demo{cfg: demoConfig{bin: bin, work: t.TempDir(), mysql: "root@tcp(127.0.0.1:33061)/",
		judgeMySQL: "root@tcp(127.0.0.1:33062)/", database: "kece_demo_test_" + hex.EncodeToString(b[:]),
		pools: []string{"cpp", "python", "java", "arkts", "mysql"}}}
	t.Cleanup(func() {
		if db, err := sql.Open("mysql", d.cfg.mysql); err == nil {
			_, _ = db.Exec("DROP DATABASE IF EXISTS " + d.cfg.database)
			db.Close()
		}
	})
	err := d.run(ctx)
	d.stopAll()
	if err != nil {
		t.Fatalf("demo: %v (logs in %s)", err, d.cfg.work)
	}
}
