package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kece-oj/kece/internal/loopback"
)

// mariaInstance is a private MariaDB server the chaos run starts, crashes
// (SIGKILL) and starts again on the same port and data directory. It never
// touches the shared servers of scripts/mariadb.sh.
type mariaInstance struct {
	name, dir string
	port      int
	proc      *child
}

// newMaria initialises a data directory under work and picks a port.
func newMaria(ctx context.Context, work, name string) (*mariaInstance, error) {
	dir := filepath.Join(work, "mariadb-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addr, err := loopback.FreeAddr()
	if err != nil {
		return nil, err
	}
	_, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	m := &mariaInstance{name: name, dir: dir, port: port}
	// A private tmpdir: bootstraps running at once on one machine (other
	// runs, tests) otherwise share /tmp and trip over each other's
	// temporary tables.
	if err := os.MkdirAll(m.tmp(), 0o755); err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, "mariadb-install-db", "--no-defaults", "--datadir="+filepath.Join(dir, "data"), "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db", "--tmpdir="+m.tmp()).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("mariadb-install-db for %s (is mariadb-server installed? scripts/mariadb.sh installs it): %w\n%s", name, err, out)
	}
	return m, nil
}

func (m *mariaInstance) sock() string { return filepath.Join(m.dir, "mysqld.sock") }

func (m *mariaInstance) tmp() string { return filepath.Join(m.dir, "tmp") }

// serverDSN is the root DSN over TCP, without a database.
func (m *mariaInstance) serverDSN() string { return fmt.Sprintf("root@tcp(127.0.0.1:%d)/", m.port) }

// start runs mariadbd (durable settings, as scripts/mariadb.sh) and waits
// until it answers; the first start also lets root in over TCP.
func (m *mariaInstance) start(ctx context.Context) error {
	_ = os.Remove(m.sock())
	logf, err := os.OpenFile(filepath.Join(m.dir, "mysqld.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("/usr/sbin/mariadbd", "--no-defaults", "--user=root", "--datadir="+filepath.Join(m.dir, "data"),
		"--bind-address=127.0.0.1", "--port="+strconv.Itoa(m.port), "--socket="+m.sock(),
		"--pid-file="+filepath.Join(m.dir, "mysqld.pid"), "--log-error="+filepath.Join(m.dir, "mysqld.log"),
		"--tmpdir="+m.tmp(), "--skip-name-resolve", "--innodb-flush-log-at-trx-commit=1", "--sync-binlog=1",
		"--innodb-buffer-pool-size=128M", "--max-connections=500", "--innodb-lock-wait-timeout=10",
		"--character-set-server=utf8mb4", "--collation-server=utf8mb4_bin", "--default-time-zone=+00:00",
		"--transaction-isolation=READ-COMMITTED")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start mariadbd %s: %w", m.name, err)
	}
	c := &child{name: "mariadb-" + m.name, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(c.exited) }()
	m.proc = c
	db, err := sql.Open("mysql", "root@unix("+m.sock()+")/")
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(90 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err = db.PingContext(pctx)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-c.exited:
			return fmt.Errorf("mariadbd %s exited at start (log %s)", m.name, filepath.Join(m.dir, "mysqld.log"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mariadbd %s not ready within 90s (log %s): %w", m.name, filepath.Join(m.dir, "mysqld.log"), err)
		}
	}
	_, err = db.ExecContext(ctx, "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; ")
	if err == nil {
		_, err = db.ExecContext(ctx, "GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
	}
	return err
}

// crash kills the server without a shutdown (InnoDB recovers at start).
func (m *mariaInstance) crash() {
	if m.proc == nil {
		return
	}
	_ = m.proc.cmd.Process.Signal(syscall.SIGKILL)
	<-m.proc.exited
}

// stop shuts the server down cleanly (SIGTERM), or kills it after 60 s.
func (m *mariaInstance) stop() {
	if m.proc == nil {
		return
	}
	_ = m.proc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.proc.exited:
	case <-time.After(60 * time.Second):
		m.crash()
	}
}

// tcpFailover stands in for the load balancer an operator puts in front of
// a Galera cluster (HAProxy with a primary and backups, MaxScale): each new
// connection goes to the preferred backend, or to the next one that accepts
// when it does not, and stays on the one that last worked (sticky, so a
// node that comes back does not split the writers again). Connections to a
// node that dies break, and the client's pool dials again.
type tcpFailover struct {
	ln       net.Listener
	backends []string

	mu       sync.Mutex
	cur      int
	switches int
	conns    map[net.Conn]struct{}
	closed   bool
}

func newTCPFailover(backends []string) (*tcpFailover, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &tcpFailover{ln: ln, backends: backends, conns: map[net.Conn]struct{}{}}
	go p.accept()
	return p, nil
}

func (p *tcpFailover) addr() string { return p.ln.Addr().String() }

// current is the backend new connections go to now.
func (p *tcpFailover) current() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.backends[p.cur]
}

func (p *tcpFailover) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *tcpFailover) serve(c net.Conn) {
	p.mu.Lock()
	start := p.cur
	p.mu.Unlock()
	var up net.Conn
	for k := range p.backends {
		i := (start + k) % len(p.backends)
		d, err := net.DialTimeout("tcp", p.backends[i], time.Second)
		if err != nil {
			continue
		}
		up = d
		p.mu.Lock()
		if p.cur != i {
			p.cur = i
			p.switches++
		}
		p.mu.Unlock()
		break
	}
	if up == nil {
		c.Close()
		return
	}
	if !p.track(c, up) {
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Either side ending ends both: a dead backend must not leave a
		// client half-open.
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

func (p *tcpFailover) track(c, up net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		up.Close()
		return false
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	return true
}

func (p *tcpFailover) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// galeraCluster is the cluster of scripts/galera.sh: the bench asks the
// script for node addresses and to kill and restart nodes.
type galeraCluster struct {
	script string
	addrs  []string // node i+1's client address
}

func openGalera(ctx context.Context, script string) (*galeraCluster, error) {
	g := &galeraCluster{script: script}
	out, err := exec.CommandContext(ctx, script, "status").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s status: %w\n%s", script, err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var port string
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "port="); ok {
				port = v
			}
		}
		if strings.HasSuffix(line, " down") || !strings.Contains(line, "cluster_size=") {
			return nil, fmt.Errorf("galera cluster not fully up (run `%s start`): %s", script, line)
		}
		if !strings.Contains(line, "state=Synced") {
			return nil, fmt.Errorf("galera node not synced (run `%s start`): %s", script, line)
		}
		g.addrs = append(g.addrs, "127.0.0.1:"+port)
	}
	if len(g.addrs) < 3 {
		return nil, fmt.Errorf("want 3 galera nodes from `%s status`, got %d", script, len(g.addrs))
	}
	return g, nil
}

func (g *galeraCluster) run(ctx context.Context, verb string, node int) error {
	out, err := exec.CommandContext(ctx, g.script, verb, strconv.Itoa(node)).CombinedOutput()
	if err != nil {
		return errors.Join(fmt.Errorf("%s %s %d: %w", g.script, verb, node, err), errors.New(string(out)))
	}
	return nil
}

// clusterSize asks a node for wsrep_cluster_size.
func clusterSize(ctx context.Context, addr string) (int, error) {
	db, err := sql.Open("mysql", "root@tcp("+addr+")/")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var name string
	var n int
	err = db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'").Scan(&name, &n)
	return n, err
}
