package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kece-oj/kece/cmd/internal/problems"

	_ "github.com/go-sql-driver/mysql"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/internal/loopback"
)

type demoConfig struct {
	bin, work, mysql, judgeMySQL string
	database                     string // control database to (re)create
	pools                        []string
	timeout                      time.Duration
	keep                         bool
}

type demo struct {
	cfg        demoConfig
	procs      []*child
	url        string
	adminToken string
	admin      *adminapi.ClientWithResponses
	business   *businessapi.ClientWithResponses
}

// child is a started process and the channel closed when it has exited.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

func step(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

func (d *demo) run(ctx context.Context) error {
	if err := d.startControl(ctx); err != nil {
		return err
	}
	if err := d.startNodes(ctx); err != nil {
		return err
	}
	subs, err := d.enqueue(ctx)
	if err != nil {
		return err
	}
	step("wait for verdicts")
	mismatches, err := d.waitVerdicts(ctx, subs)
	if err != nil {
		return err
	}
	step("consume settlement events")
	n, err := d.consumeEvents(ctx, len(subs))
	if err != nil {
		return err
	}
	fmt.Printf("settlement events consumed and acknowledged: %d (one per submission)\n", n)
	if err := d.printSummary(ctx); err != nil {
		return err
	}
	if mismatches > 0 {
		return fmt.Errorf("%d verdicts differ from the expected ones", mismatches)
	}
	step("demo passed")
	if d.cfg.keep {
		d.printConsole()
		fmt.Printf("control plane at %s (Prometheus metrics at %s/metrics); Ctrl-C to stop\n", d.url, d.url)
		<-ctx.Done()
	}
	return nil
}

// startControl makes a fresh control database with an admin and a business
// token, starts kece-control on it and opens the API clients.
func (d *demo) startControl(ctx context.Context) error {
	work, err := filepath.Abs(d.cfg.work)
	if err != nil {
		return err
	}
	d.cfg.work = work
	_ = os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o700); err != nil {
		return err
	}
	step("fresh control database %s", d.cfg.database)
	dsn, err := freshDatabase(ctx, d.cfg.mysql, d.cfg.database)
	if err != nil {
		return err
	}
	ctl := filepath.Join(d.cfg.bin, "kece-control")
	if out, err := exec.CommandContext(ctx, ctl, "migrate", "up", "--mysql-dsn", dsn).CombinedOutput(); err != nil {
		return fmt.Errorf("migrate: %v: %s", err, out)
	}
	adminTok, err := output(ctx, ctl, "token", "create", "--kind", "admin", "--name", "demo-admin", "--mysql-dsn", dsn)
	if err != nil {
		return err
	}
	bizTok, err := output(ctx, ctl, "token", "create", "--kind", "business", "--name", "demo-oj", "--mysql-dsn", dsn)
	if err != nil {
		return err
	}

	addr, err := loopback.FreeAddr()
	if err != nil {
		return err
	}
	d.url = "http://" + addr
	step("kece-control on %s (lease 20s, reap every 1s)", d.url)
	if err := d.start(ctx, "control", ctl, []string{"serve", "--listen", addr, "--artifact-dir", filepath.Join(work, "artifacts"),
		"--mysql-dsn", dsn, "--lease-ttl", "20s", "--reap-interval", "1s", "--heartbeat-interval", "2s", "--renew-interval", "5s"}, nil); err != nil {
		return err
	}
	if err := loopback.WaitHTTPWithin(ctx, d.url+"/healthz", 30*time.Second); err != nil {
		return err
	}
	fmt.Printf("    control metrics (Prometheus): %s/metrics\n", d.url)
	d.adminToken = adminTok
	d.printConsole()
	d.admin, err = adminapi.NewClientWithResponses(d.url, adminapi.WithRequestEditorFn(bearer(adminTok)))
	if err != nil {
		return err
	}
	d.business, err = businessapi.NewClientWithResponses(d.url, businessapi.WithRequestEditorFn(bearer(bizTok)))
	return err
}

// startNodes registers a host group and one node per pool, joins and
// starts each, then verifies and enables it.
func (d *demo) startNodes(ctx context.Context) error {
	step("host group and one node per pool: %s", strings.Join(d.cfg.pools, ", "))
	hg, err := d.admin.CreateHostGroupWithResponse(ctx, adminapi.HostGroupCreate{Name: "demo-host", SlotCapacity: 8})
	if err := check(hg, err, http.StatusCreated); err != nil {
		return fmt.Errorf("create host group: %w", err)
	}
	nodes := map[string]string{}
	for _, pool := range d.cfg.pools {
		cr, err := d.admin.CreateJudgerWithResponse(ctx, adminapi.JudgerCreate{Name: "demo-" + pool, Pool: adminapi.Pool(pool),
			HostGroupId: hg.JSON201.HostGroupId, Slots: 2})
		if err := check(cr, err, http.StatusCreated); err != nil {
			return fmt.Errorf("create %s node: %w", pool, err)
		}
		nodes[pool] = cr.JSON201.Node.NodeId
		if err := d.startNode(ctx, pool, cr.JSON201.JoinCode); err != nil {
			return err
		}
	}
	step("verify each node (a CHECK job it must judge correctly), then enable it: kecectl node verify|enable --wait")
	for _, pool := range d.cfg.pools {
		if err := d.verifyAndEnable(ctx, pool, nodes[pool]); err != nil {
			return err
		}
	}
	return nil
}

// enqueue publishes the test data and enqueues every submission.
func (d *demo) enqueue(ctx context.Context) ([]submission, error) {
	step("publish test data (business API)")
	codeManifest, err := d.publishCode(ctx)
	if err != nil {
		return nil, err
	}
	sqlManifest, err := d.publishSQL(ctx)
	if err != nil {
		return nil, err
	}
	step("enqueue submissions")
	subs := submissions(d.cfg.pools, codeManifest, sqlManifest)
	for _, s := range subs {
		r, err := d.business.EnqueueSubmissionWithResponse(ctx, &businessapi.EnqueueSubmissionParams{}, businessapi.SubmissionCreate{
			SubmissionType: s.typ, SubmissionId: s.id, Language: s.lang, Source: s.source, ManifestId: s.manifest})
		if err := check(r, err, http.StatusAccepted); err != nil {
			return nil, fmt.Errorf("enqueue %s: %w", s.id, err)
		}
	}
	return subs, nil
}

// printConsole says where the admin console is and how to log in: the
// demo's admin token is a throwaway of this fresh database.
func (d *demo) printConsole() {
	fmt.Printf("    admin console: %s/console/  (log in with the admin token %s)\n", d.url, d.adminToken)
	fmt.Printf("    public status page: %s/status\n", d.url)
}

// start runs a child process with its output in work/<name>.log.
func (d *demo) start(ctx context.Context, name, bin string, args, env []string) error {
	logf, err := os.Create(filepath.Join(d.cfg.work, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	d.procs = append(d.procs, c)
	go func() { _ = cmd.Wait(); logf.Close(); close(c.exited) }()
	return nil
}

// stopAll stops the children it started (nodes first), by their PIDs: a
// SIGTERM, then a kill for any still running after 20 s.
func (d *demo) stopAll() {
	for i := len(d.procs) - 1; i >= 0; i-- {
		_ = d.procs[i].cmd.Process.Signal(syscall.SIGTERM)
	}
	grace, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, p := range d.procs {
		select {
		case <-p.exited:
		case <-grace.Done():
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
}

func (d *demo) startNode(ctx context.Context, pool, joinCode string) error {
	dir := filepath.Join(d.cfg.work, "node-"+pool)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	listen, err := loopback.FreeAddr()
	if err != nil {
		return err
	}
	// The host operator's first step: exchange the join code for the
	// credential, so the code never goes into the node's configuration.
	cred := filepath.Join(dir, "credential")
	out, err := output(ctx, filepath.Join(d.cfg.bin, "kece-node"), "join", "--control-url", d.url, "--pool", pool,
		"--credential-file", cred, "--join-code", joinCode)
	if err != nil {
		return fmt.Errorf("kece-node join (%s): %w", pool, err)
	}
	fmt.Printf("    kece-node join --pool %s: %s\n", pool, firstLine(out))
	env := []string{
		"KECE_POOL=" + pool,
		"KECE_CONTROL_URL=" + d.url,
		"KECE_CREDENTIAL_FILE=" + cred,
		"KECE_LOCAL_SLOTS=2",
		"KECE_WORKSPACE=" + filepath.Join(dir, "work"),
		"KECE_CACHE_DIR=" + filepath.Join(dir, "cache"),
		"KECE_CACHE_MAX_BYTES=" + strconv.Itoa(256<<20),
		"KECE_LISTEN=" + listen,
	}
	if pool == string(machineapi.PoolMysql) {
		f := filepath.Join(dir, "judge-dsn")
		if err := os.WriteFile(f, []byte(d.cfg.judgeMySQL+"\n"), 0o600); err != nil {
			return err
		}
		env = append(env, "KECE_JUDGE_MYSQL_DSN_FILE="+f)
	}
	fmt.Printf("    kece-node pool=%s healthz=http://%s/healthz metrics=http://%s/metrics log=%s\n", pool, listen, listen,
		filepath.Join(d.cfg.work, "node-"+pool+".log"))
	return d.start(ctx, "node-"+pool, filepath.Join(d.cfg.bin, "kece-node"), nil, env)
}

func (d *demo) verifyAndEnable(ctx context.Context, pool, nodeID string) error {
	// The node must have joined and sent a heartbeat before its check makes sense.
	if err := poll(ctx, 2*time.Minute, func() (bool, error) {
		r, err := d.admin.GetJudgerWithResponse(ctx, nodeID)
		if err := check(r, err, http.StatusOK); err != nil {
			return false, err
		}
		return r.JSON200.Node.Joined && r.JSON200.Node.Health.Online, nil
	}); err != nil {
		return fmt.Errorf("%s node never came online (see node-%s.log): %w", pool, pool, err)
	}
	// The admin's steps, with the real CLI: verify and enable, each waiting
	// for its outcome.
	start := time.Now()
	name := "demo-" + pool
	if _, err := d.kecectl(ctx, "node", "verify", name, "--reason", "demo: first start", "--wait", "--timeout", "5m"); err != nil {
		return fmt.Errorf("verify %s (see node-%s.log): %w", pool, pool, err)
	}
	if _, err := d.kecectl(ctx, "node", "enable", name, "--reason", "demo: check passed", "--wait", "--timeout", "2m"); err != nil {
		return fmt.Errorf("enable %s: %w", pool, err)
	}
	fmt.Printf("    %-6s node %s verified in %s and enabled\n", pool, nodeID, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// kecectl runs the admin CLI against the demo's control plane.
func (d *demo) kecectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(d.cfg.bin, "kecectl"), args...)
	cmd.Env = append(os.Environ(), "KECE_ADMIN_URL="+d.url, "KECE_ADMIN_TOKEN="+d.adminToken)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("kecectl %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

func (d *demo) publishCode(ctx context.Context) (string, error) {
	m, err := problems.APlusB(ctx, d.business)
	if err != nil {
		return "", err
	}
	r, err := d.business.PublishManifestWithResponse(ctx, m)
	if err := check(r, err, http.StatusCreated); err != nil {
		return "", fmt.Errorf("publish a+b: %w", err)
	}
	fmt.Printf("    a+b: 3 cases, manifest %s\n", r.JSON201.ManifestId)
	return r.JSON201.ManifestId, nil
}

func (d *demo) publishSQL(ctx context.Context) (string, error) {
	m := problems.BigCities()
	r, err := d.business.PublishManifestWithResponse(ctx, m)
	if err := check(r, err, http.StatusCreated); err != nil {
		return "", fmt.Errorf("publish SQL problem: %w", err)
	}
	fmt.Printf("    big cities (SQL SELECT): manifest %s\n", r.JSON201.ManifestId)
	return r.JSON201.ManifestId, nil
}

func (d *demo) waitVerdicts(ctx context.Context, subs []submission) (int, error) {
	got := map[string]*businessapi.SubmissionStatus{}
	start := time.Now()
	err := poll(ctx, 8*time.Minute, func() (bool, error) {
		done := true
		for _, s := range subs {
			if st := got[s.typ+"/"+s.id]; st != nil && terminal(st.Status) {
				continue
			}
			// A waiting read: answers as soon as the submission settles.
			wait := int32(20000)
			r, err := d.business.GetSubmissionWithResponse(ctx, s.typ, s.id, &businessapi.GetSubmissionParams{WaitMs: &wait})
			if err := check(r, err, http.StatusOK); err != nil {
				return false, err
			}
			got[s.typ+"/"+s.id] = r.JSON200
			if !terminal(r.JSON200.Status) {
				done = false
			}
		}
		return done, nil
	})
	if err != nil {
		return 0, err
	}
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "    submission\tlanguage\texpected\tgot\tscore\tcases (time ms)\t")
	mismatches := 0
	for _, s := range subs {
		st := got[s.typ+"/"+s.id]
		mark := ""
		if string(st.Status) != s.want {
			mark = "  <-- MISMATCH"
			mismatches++
		}
		score, cases := "", ""
		if v := st.Verdict; v != nil {
			score = fmt.Sprintf("%g/%d", v.Score, v.MaxScore)
			var parts []string
			for _, c := range v.Cases {
				parts = append(parts, fmt.Sprintf("%s:%s(%d)", c.CaseId, c.Status, c.TimeMs))
			}
			cases = strings.Join(parts, " ")
		}
		fmt.Fprintf(tw, "    %s/%s\t%s\t%s\t%s\t%s\t%s%s\t\n", s.typ, s.id, s.lang, s.want, st.Status, score, cases, mark)
	}
	tw.Flush()
	fmt.Printf("    all %d judged in %s\n", len(subs), time.Since(start).Round(100*time.Millisecond))
	return mismatches, nil
}

func terminal(s businessapi.SubmissionStatusCode) bool {
	switch s {
	case "PENDING", "COMPILING", "JUDGING":
		return false
	}
	return true
}

func (d *demo) consumeEvents(ctx context.Context, want int) (int, error) {
	n := 0
	err := poll(ctx, time.Minute, func() (bool, error) {
		r, err := d.business.ClaimSettlementEventsWithResponse(ctx, businessapi.EventClaimRequest{Consumer: "demo-oj", Max: 100, LeaseMs: 30000})
		if err := check(r, err, http.StatusOK); err != nil {
			return false, err
		}
		if len(r.JSON200.Events) == 0 {
			return n >= want, nil
		}
		ids := make([]businessapi.Id, len(r.JSON200.Events))
		for i, e := range r.JSON200.Events {
			ids[i] = e.EventId
		}
		a, err := d.business.AckSettlementEventsWithResponse(ctx, businessapi.EventAckRequest{Consumer: "demo-oj", EventIds: ids})
		if err := check(a, err, http.StatusOK); err != nil {
			return false, err
		}
		n += len(ids)
		return n >= want, nil
	})
	return n, err
}

func (d *demo) printSummary(ctx context.Context) error {
	r, err := d.business.GetJudgersSummaryWithResponse(ctx)
	if err := check(r, err, http.StatusOK); err != nil {
		return err
	}
	s := r.JSON200
	fmt.Printf("public summary (asOf %s): %d of %d pools ready\n", s.AsOf.Format(time.RFC3339), s.ReadyPools, s.TotalPools)
	for _, p := range s.Pools {
		fmt.Printf("    %-7s ready nodes %d, queued %d\n", p.Pool, p.ReadyNodes, p.QueuedSubmissions)
	}
	return nil
}

// ---- small helpers ----

type statusCoder interface{ StatusCode() int }

// check turns a generated-client answer into an error unless it has the
// wanted status; the error carries the API's code and message.
func check(r statusCoder, err error, want int) error {
	if err != nil {
		return err
	}
	if r.StatusCode() != want {
		var body []byte
		if v := reflect.ValueOf(r); v.Kind() == reflect.Pointer {
			if f := v.Elem().FieldByName("Body"); f.IsValid() && f.Kind() == reflect.Slice {
				body = f.Bytes()
			}
		}
		return fmt.Errorf("HTTP %d: %s", r.StatusCode(), bytes.TrimSpace(body))
	}
	return nil
}

func poll(ctx context.Context, limit time.Duration, f func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		ok, err := f()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up after %s: %w", limit, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func bearer(tok string) func(context.Context, *http.Request) error {
	return func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+tok)
		return nil
	}
}

func output(ctx context.Context, bin string, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", filepath.Base(bin), args[0], err, errb.String())
	}
	return strings.TrimSpace(out.String()), nil
}

func freshDatabase(ctx context.Context, serverDSN, name string) (string, error) {
	db, err := sql.Open("mysql", serverDSN)
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
		return "", fmt.Errorf("control MySQL at %s (start it with scripts/mariadb.sh start control): %w", serverDSN, err)
	}
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		return "", err
	}
	if !strings.HasSuffix(serverDSN, "/") {
		return "", errors.New("-mysql must end with / (no database)")
	}
	i := strings.LastIndex(serverDSN, "/")
	return serverDSN[:i+1] + name, nil
}
