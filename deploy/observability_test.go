package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/metrics"
	"github.com/kece-oj/kece/control/replica"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/worker"
)

const (
	alertRules = "deploy/observability/kece-alerts.yml"
	dashboard  = "deploy/observability/kece-dashboard.json"
)

// promBinary finds prometheus or promtool: $KECE_PROMETHEUS / $KECE_PROMTOOL,
// the PATH, or what scripts/prometheus.sh unpacked under .run/prometheus.
// Missing, the test skips, or fails under KECE_REQUIRE_PROMETHEUS=1 (CI).
func promBinary(t *testing.T, name, env string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p, err := filepath.Abs(repo(".run/prometheus/root/usr/bin/" + name)); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("KECE_REQUIRE_PROMETHEUS") == "1" {
		t.Fatalf("%s not found (KECE_REQUIRE_PROMETHEUS=1): run scripts/prometheus.sh install or set %s", name, env)
	}
	t.Skipf("%s not found: run scripts/prometheus.sh install or set %s", name, env)
	return ""
}

func TestAlertRulesCheck(t *testing.T) {
	t.Parallel()
	promtool := promBinary(t, "promtool", "KECE_PROMTOOL")
	out, err := exec.Command(promtool, "check", "rules", repo(alertRules)).CombinedOutput()
	require.NoError(t, err, "promtool check rules: %s", out)
}

// obsBackend judges jobs AC after reporting a short compile phase, so every
// node histogram has observations; a source "infra-once" fails its first
// run and "infra-always" every run with a checker infrastructure error, so
// retries and SYSTEM_ERROR have series too.
type obsBackend struct {
	mu   sync.Mutex
	runs map[string]int
}

func (b *obsBackend) Execute(_ context.Context, task engine.Task, p engine.ProgressSink) (engine.Verdict, error) {
	p.Report(engine.Progress{Phase: engine.PhaseCompiling, CasesTotal: len(task.Cases)})
	p.Report(engine.Progress{Phase: engine.PhaseJudging, CasesTotal: len(task.Cases)})
	b.mu.Lock()
	b.runs[task.JobID]++
	runs := b.runs[task.JobID]
	b.mu.Unlock()
	if src := string(task.Source); src == "infra-always" || (src == "infra-once" && runs == 1) {
		return engine.Verdict{}, engine.Infraf(engine.InfraCheckerFailed, "checker crashed")
	}
	v := engine.Verdict{Status: engine.StatusAccepted}
	for _, c := range task.Cases {
		v.Cases = append(v.Cases, engine.CaseResult{ID: c.ID, Status: engine.StatusAccepted, Score: float64(c.Weight), CPUTime: time.Millisecond})
		v.Score += float64(c.Weight)
		v.MaxScore += c.Weight
	}
	return v, nil
}

// Runtime is asked for a language id; every one this node is sent is cpp's.
func (*obsBackend) Runtime(string) (engine.RuntimeSpec, error) {
	return engine.RuntimeSpec{Pool: "cpp", Image: "obs", SourceFile: "main", RunCmd: []string{"./main"}}, nil
}
func (*obsBackend) Janitor(context.Context, func(string, int64) bool) error { return nil }
func (*obsBackend) Health(context.Context) worker.Health {
	return worker.Health{Runtime: "obs 1", Dependencies: []worker.Dependency{{Name: "obs", Healthy: true}}}
}
func (*obsBackend) Close() error { return nil }

// observedFleet runs a control plane and one node that has judged a job, and
// returns their /metrics URLs.
func observedFleet(t *testing.T) (controlURL, nodeURL string) {
	t.Helper()
	env := controltest.Start(t, controltest.Options{Store: store.Config{LeaseTTL: 10 * time.Second, MaxAttempts: 2},
		HTTP: httpapi.Config{HeartbeatInterval: 200 * time.Millisecond}, Replica: replica.Config{Metrics: metrics.Config{FleetCacheTTL: time.Nanosecond}}})
	man := env.PublishCode(manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64}, manifest.Checker{Type: "tolerant"},
		controltest.Case{In: "1\n", Out: "1\n", Weight: 100})
	nd := env.NewNode("cpp", 2, 2)
	env.ForceEnable(nd.ID)
	dir := t.TempDir()
	n, err := worker.New(worker.Config{Pool: "cpp", ControlURL: env.URL, CredentialFile: filepath.Join(dir, "cred.json"),
		JoinCode: nd.JoinCode, LocalSlots: 2, CacheDir: filepath.Join(dir, "cache"), Listen: "127.0.0.1:0",
		NewBackend:        func(context.Context, string) (worker.Backend, error) { return &obsBackend{runs: map[string]int{}}, nil },
		HeartbeatInterval: 200 * time.Millisecond, ClaimWait: time.Second, Version: "test"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-n.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("node not ready")
	}
	// AC, AC after one infrastructure error, FAILED after two.
	for i, src := range []string{"int main(){}", "infra-once", "infra-always"} {
		job := env.Enqueue("ALGO", fmt.Sprintf("obs-%d", i), "cpp17", src, man)
		var j store.Job
		require.Eventually(t, func() bool {
			var err error
			j, err = env.Store.Jobs().GetJob(env.Ctx, job)
			require.NoError(t, err)
			return j.State.Terminal()
		}, 15*time.Second, 20*time.Millisecond)
		require.Equal(t, []store.JobState{store.StateCompleted, store.StateCompleted, store.StateFailed}[i], j.State, src)
	}
	return env.URL + "/metrics", "http://" + n.Addr() + "/metrics"
}

func fetch(t *testing.T, u string) []byte {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, u)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return b
}

// A real scrape of a running control plane and node passes `promtool check
// metrics`; a real Prometheus scrapes both, loads the alert rules (each
// evaluates without error) and answers every dashboard panel query and every
// alert expression (its comparison turned into a 0/1 `bool` so a quiet fleet
// still returns series) with at least one series.
func TestPrometheusScrapesDashboardAndAlerts(t *testing.T) {
	t.Parallel()
	promtool := promBinary(t, "promtool", "KECE_PROMTOOL")
	prometheus := promBinary(t, "prometheus", "KECE_PROMETHEUS")
	controlMetrics, nodeMetrics := observedFleet(t)

	for _, u := range []string{controlMetrics, nodeMetrics} {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(string(fetch(t, u)))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool check metrics %s:\n%s", u, out)
		require.Empty(t, strings.TrimSpace(string(out)), "promtool check metrics %s reports problems", u)
	}

	dir := t.TempDir()
	rules, err := filepath.Abs(repo(alertRules))
	require.NoError(t, err)
	target := func(u string) string { p, _ := url.Parse(u); return p.Host }
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: kece-control
    static_configs: [{targets: [%q]}]
  - job_name: kece-node
    static_configs: [{targets: [%q]}]
`, rules, target(controlMetrics), target(nodeMetrics))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(prometheus, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	api := "http://" + addr

	query := func(expr string) (status string, n int, errMsg string) {
		resp, err := http.Get(api + "/api/v1/query?query=" + url.QueryEscape(expr))
		if err != nil {
			return "", 0, err.Error()
		}
		defer resp.Body.Close()
		var r struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return "", 0, err.Error()
		}
		return r.Status, len(r.Data.Result), r.Error
	}
	// hasSeries asks until expr returns a series: on a loaded machine one
	// scrape may miss its 1 s timeout (or the fleet read its own), and then
	// every series of that target is stale until the next scrape.
	hasSeries := func(expr string) (status string, n int, errMsg string) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			status, n, errMsg = query(expr)
			if status != "success" || n > 0 || time.Now().After(deadline) {
				return status, n, errMsg
			}
			time.Sleep(500 * time.Millisecond) // the poll interval of an HTTP query to another process
		}
	}
	// Both targets up, with enough samples for rate() over any window.
	require.Eventually(t, func() bool {
		st, n, _ := query(`up == 1`)
		return st == "success" && n == 2
	}, 60*time.Second, 200*time.Millisecond, "prometheus never scraped both targets:\n%s", &logs)
	time.Sleep(4 * time.Second) // four more scrapes at 1s: rate() needs two samples in its window

	var d struct {
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				AllValue   string `json:"allValue"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(fetchFile(t, dashboard), &d))
	// The pool and instance variables list real values, and every panel
	// filters by both (as Grafana's "All": the allValue regex).
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		if v.Name == "pool" || v.Name == "instance" {
			vars[v.Name] = v.AllValue
			inner := strings.TrimSuffix(strings.TrimPrefix(v.Definition, "label_values("), ")")
			metric, label, ok := strings.Cut(inner, ", ")
			require.True(t, ok, "variable %s: %s", v.Name, v.Definition)
			st, n, msg := hasSeries("count by (" + label + ") (" + metric + ")")
			require.Equal(t, "success", st, "variable %s: %s", v.Name, msg)
			require.Positive(t, n, "variable %s has no values", v.Name)
		}
	}
	require.Equal(t, map[string]string{"pool": ".*", "instance": ".*"}, vars, "the dashboard has pool and instance variables")
	exprs := 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			require.Contains(t, tg.Expr, `instance=~"$instance"`, "panel %q", p.Title)
			expr := strings.NewReplacer("$pool", vars["pool"], "$instance", vars["instance"]).Replace(tg.Expr)
			st, n, msg := hasSeries(expr)
			require.Equal(t, "success", st, "panel %q: %s: %s", p.Title, expr, msg)
			require.Positive(t, n, "panel %q returns no series: %s", p.Title, expr)
			exprs++
		}
	}
	require.GreaterOrEqual(t, exprs, 20)

	var rf struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(fetchFile(t, alertRules), &rf))
	cmp := regexp.MustCompile(`(==|!=|>=|<=|>|<) (-?[0-9][0-9.e]*)`)
	alerts := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			expr := cmp.ReplaceAllString(r.Expr, "$1 bool $2")
			st, n, msg := hasSeries(expr)
			require.Equal(t, "success", st, "alert %s: %s: %s", r.Alert, expr, msg)
			require.Positive(t, n, "alert %s returns no series: %s", r.Alert, expr)
			alerts++
		}
	}
	require.GreaterOrEqual(t, alerts, 6)

	// Prometheus itself loaded and evaluated every rule without error.
	require.Eventually(t, func() bool {
		resp, err := http.Get(api + "/api/v1/rules")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var r struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name      string `json:"name"`
						Health    string `json:"health"`
						LastError string `json:"lastError"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&r) != nil {
			return false
		}
		n := 0
		for _, g := range r.Data.Groups {
			for _, rule := range g.Rules {
				require.NotEqual(t, "err", rule.Health, "rule %s: %s", rule.Name, rule.LastError)
				if rule.Health == "ok" {
					n++
				}
			}
		}
		return n == alerts
	}, 20*time.Second, 200*time.Millisecond)
}

// Every alert links to its section of docs/operations.md, which exists
// (the anchor is GitHub's: the heading, lower case).
func TestAlertsHaveRunbooks(t *testing.T) {
	t.Parallel()
	var rf struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(fetchFile(t, alertRules), &rf))
	headings := map[string]bool{}
	for _, l := range strings.Split(string(fetchFile(t, "docs/operations.md")), "\n") {
		if h, ok := strings.CutPrefix(l, "### "); ok {
			headings[strings.ToLower(strings.TrimSpace(h))] = true
		}
	}
	n := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			u := r.Annotations["runbook_url"]
			page, anchor, ok := strings.Cut(u, "#")
			require.True(t, ok, "alert %s has no runbook_url anchor: %q", r.Alert, u)
			require.True(t, strings.HasSuffix(page, "/docs/operations.md"), "alert %s: %s", r.Alert, u)
			require.Equal(t, strings.ToLower(r.Alert), anchor, "alert %s links to its own section", r.Alert)
			require.True(t, headings[anchor], "docs/operations.md has no section \"### %s\"", r.Alert)
			n++
		}
	}
	require.GreaterOrEqual(t, n, 12)
}

func fetchFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(repo(p))
	require.NoError(t, err)
	return b
}
