package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kece-oj/kece/cmd/internal/problems"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/ratelimit"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/internal/loopback"
	"github.com/kece-oj/kece/internal/reference"
	"github.com/kece-oj/kece/telemetry"
)

// fleet is a real deployment on this machine for the capacity benchmarks:
// a kece-control process on a fresh database and kece-node processes (real
// Docker, or the judge MySQL for the mysql pool), started from the binaries
// `make build` writes to bin/. The bench registers hosts and nodes through
// the store on the same database (and enables them without the self-check,
// which has its own tests); submissions go through the business API.
type fleet struct {
	bin, work string
	db        *sql.DB
	dsn       string
	drop      func()
	st        *store.Store
	url       string
	bizToken  string
	biz       *businessapi.ClientWithResponses
	judgeDSN  string
	control   *child
	nodes     []*benchNode
}

// child is a process the bench started; it stops it by its PID.
type child struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
}

// benchNode is one kece-node process.
type benchNode struct {
	*child
	pool    string
	id      int64
	slots   int
	metrics string // its /metrics URL
}

type fleetConfig struct {
	bin, dsn, judgeDSN string
	controlArgs        []string
}

// binDir finds the directory with kece-control, kece-node and
// kece-sandbox-init: the flag, this binary's directory, or ./bin.
func binDir(flagDir string) (string, error) {
	cands := []string{flagDir}
	if exe, err := os.Executable(); err == nil {
		cands = append(cands, filepath.Dir(exe))
	}
	cands = append(cands, "bin")
	for _, d := range cands {
		if d == "" {
			continue
		}
		ok := true
		for _, b := range []string{"kece-control", "kece-node", "kece-sandbox-init"} {
			if st, err := os.Stat(filepath.Join(d, b)); err != nil || !st.Mode().IsRegular() {
				ok = false
			}
		}
		if ok {
			return filepath.Abs(d)
		}
	}
	return "", errors.New("kece-control, kece-node and kece-sandbox-init not found (run `make build`, or pass -bin DIR)")
}

func startFleet(ctx context.Context, cfg fleetConfig) (*fleet, error) {
	bin, err := binDir(cfg.bin)
	if err != nil {
		return nil, err
	}
	f := &fleet{bin: bin, judgeDSN: cfg.judgeDSN}
	if f.work, err = os.MkdirTemp("", "kece-capacity-"); err != nil {
		return nil, err
	}
	if f.db, f.dsn, f.drop, err = freshDatabase(ctx, cfg.dsn, 32); err != nil {
		return nil, err
	}
	if f.st, err = store.New(f.db, store.Config{}); err != nil {
		f.stop()
		return nil, err
	}
	if f.bizToken, err = f.st.IssueToken(ctx, benchToken("bench")); err != nil {
		f.stop()
		return nil, err
	}
	addr, err := loopback.FreeAddr()
	if err != nil {
		f.stop()
		return nil, err
	}
	f.url = "http://" + addr
	args := append([]string{"serve", "--listen", addr, "--artifact-dir", filepath.Join(f.work, "artifacts"),
		"--mysql-dsn", f.dsn, "--log-level", "warn"}, cfg.controlArgs...)
	if f.control, err = f.spawn("control", filepath.Join(bin, "kece-control"), args, nil); err != nil {
		f.stop()
		return nil, err
	}
	if err := loopback.WaitHTTPWithin(ctx, f.url+"/healthz", 30*time.Second); err != nil {
		f.stop()
		return nil, fmt.Errorf("kece-control did not come up (log %s): %w", f.logPath("control"), err)
	}
	f.biz, err = businessapi.NewClientWithResponses(f.url, businessapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+f.bizToken)
		return nil
	}))
	if err != nil {
		f.stop()
		return nil, err
	}
	return f, nil
}

func (f *fleet) logPath(name string) string { return filepath.Join(f.work, name+".log") }

func (f *fleet) spawn(name, bin string, args, env []string) (*child, error) {
	logf, err := os.Create(f.logPath(name))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(c.exited) }()
	return c, nil
}

// stopChild sends SIGTERM (a node drains) and kills after 20 s.
func stopChild(c *child) {
	if c == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// stop ends every process the fleet started (nodes first), drops the
// database and removes the work directory unless keepLogs.
func (f *fleet) stop() {
	for _, n := range f.nodes {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, n := range f.nodes {
		stopChild(n.child)
	}
	stopChild(f.control)
	if f.drop != nil {
		f.drop()
	}
	if f.work != "" {
		_ = os.RemoveAll(f.work)
	}
}

// addNode registers a host of `slots` capacity with one node of pool,
// enables it and starts its kece-node process.
func (f *fleet) addNode(ctx context.Context, pool string, slots int) (*benchNode, error) {
	name := fmt.Sprintf("%s-%d", pool, len(f.nodes)+1)
	n, err := f.registerNode(ctx, name, pool, slots, f.url, f.judgeDSN, "bench")
	if err != nil {
		return nil, err
	}
	c, err := f.spawn("node-"+name, filepath.Join(f.bin, "kece-node"), []string{"--heartbeat-interval", "1s"}, n.env)
	if err != nil {
		return nil, err
	}
	bn := &benchNode{child: c, pool: pool, id: n.id, slots: slots, metrics: "http://" + n.listen + "/metrics"}
	f.nodes = append(f.nodes, bn)
	return bn, nil
}

// registeredNode is a node registered by registerNode: its id, the
// environment its kece-node process starts with, and that process's
// listen address (metrics).
type registeredNode struct {
	id     int64
	env    []string
	listen string
}

// registerNode creates a host group of `slots` capacity with one node of
// pool named name, enables it (verification has its own tests; the benches
// enable directly), and prepares its directory and environment: it joins
// controlURL (one replica, or a comma list) with its one-time code, and a
// mysql node judges on judgeDSN.
func (f *fleet) registerNode(ctx context.Context, name, pool string, slots int, controlURL, judgeDSN, actor string) (registeredNode, error) {
	g, err := f.st.CreateHostGroup(ctx, "host-"+name, slots, actor)
	if err != nil {
		return registeredNode{}, err
	}
	n, code, err := f.st.CreateNode(ctx, store.NodeSpec{Name: name, Pool: pool, HostGroupID: g.ID, Slots: slots}, actor)
	if err != nil {
		return registeredNode{}, err
	}
	if err := enableNode(ctx, f.db, n.ID); err != nil {
		return registeredNode{}, err
	}
	dir := filepath.Join(f.work, "node-"+name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return registeredNode{}, err
	}
	listen, err := loopback.FreeAddr()
	if err != nil {
		return registeredNode{}, err
	}
	env := []string{"KECE_POOL=" + pool, "KECE_CONTROL_URL=" + controlURL, "KECE_CREDENTIAL_FILE=" + filepath.Join(dir, "credential"),
		"KECE_JOIN_CODE=" + code.Code, "KECE_LOCAL_SLOTS=" + strconv.Itoa(slots), "KECE_WORKSPACE=" + filepath.Join(dir, "work"),
		"KECE_CACHE_DIR=" + filepath.Join(dir, "cache"), "KECE_LISTEN=" + listen, "KECE_LOG_LEVEL=warn"}
	if pool == string(machineapi.PoolMysql) {
		p := filepath.Join(dir, "judge-dsn")
		if err := os.WriteFile(p, []byte(judgeDSN+"\n"), 0o600); err != nil {
			return registeredNode{}, err
		}
		env = append(env, "KECE_JUDGE_MYSQL_DSN_FILE="+p)
	}
	return registeredNode{id: n.ID, env: env, listen: listen}, nil
}

// waitReady waits until every node the fleet started is online and
// serving its /metrics.
func (f *fleet) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for _, n := range f.nodes {
		for {
			node, err := f.st.GetNode(ctx, n.id)
			if err != nil {
				return err
			}
			if node.Online {
				if _, err := telemetry.Scrape(ctx, n.metrics); err == nil {
					break
				}
			}
			select {
			case <-n.exited:
				return fmt.Errorf("kece-node %s exited (log %s)", n.name, f.logPath(n.name))
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("kece-node %s not online within %s (log %s)", n.name, limit, f.logPath(n.name))
			}
		}
	}
	return nil
}

// publishAPlusB publishes the a+b problem (3 cases) through the business API.
func (f *fleet) publishAPlusB(ctx context.Context) (string, error) {
	m, err := problems.APlusB(ctx, f.biz)
	if err != nil {
		return "", err
	}
	return f.publish(ctx, m, "a+b")
}

// publishSQL publishes the mysql pool's SELECT problem (problems.BigCities).
func (f *fleet) publishSQL(ctx context.Context) (string, error) {
	return f.publish(ctx, problems.BigCities(), "SQL")
}

// publish publishes m and returns its manifest id; publishing the same
// problem again answers 200 with the same manifest.
func (f *fleet) publish(ctx context.Context, m businessapi.Manifest, what string) (string, error) {
	r, err := f.biz.PublishManifestWithResponse(ctx, m)
	if err != nil {
		return "", err
	}
	switch {
	case r.JSON201 != nil:
		return r.JSON201.ManifestId, nil
	case r.JSON200 != nil:
		return r.JSON200.ManifestId, nil
	}
	return "", fmt.Errorf("publish %s: %d %s", what, r.StatusCode(), r.Body)
}

// Accepted sources per pool (a+b, or the SQL problem), and their languages.
var benchPrograms = func() map[string]struct{ lang, source string } {
	m := map[string]struct{ lang, source string }{
		string(machineapi.PoolMysql): {"mysql", problems.BigCitiesAnswer},
	}
	for _, pool := range contracts.Pools() {
		if p, ok := reference.APlusB(pool); ok {
			m[pool] = struct{ lang, source string }{p.Language, p.Source}
		}
	}
	return m
}()

// rss reads a process's resident set (VmRSS) and peak (VmHWM) in bytes.
func rss(pid int) (cur, peak int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			cur = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return cur, peak, nil
}

// isTerminal says whether f is a character device (a terminal), where a
// progress bar may be drawn.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// benchToken is the business token of a benchmark: unlimited, because the
// benchmarks measure the scheduler, and the control plane's per-token rate
// limit (control/ratelimit) would cap the offered load instead.
func benchToken(name string) store.TokenSpec {
	return store.TokenSpec{Kind: store.TokenBusiness, Name: name, RateLimit: &ratelimit.Limit{}}
}
