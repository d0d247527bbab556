package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kece-oj/kece/cmd/internal/problems"
	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/control/store"
)

// runVerdict is the time-to-verdict benchmark (issue 42): what a student
// waits for, from enqueue to the verdict read with the business API's
// waiting read, through a real kece-control and one real kece-node per
// pool, beside the same compile and run commands executed natively on this
// host with the same inputs and the same checker logic.
//
// Per language and problem kind (a+b with the tolerant checker, with a
// testlib special checker, interactive) it judges -n submissions one at a
// time (latency: one KECE submission, then the same natively, alternating),
// then -n in waves of as many at once as the pool has slots (throughput:
// one KECE wave, then one native wave); then it rejudges each language's
// throughput submissions at once and times the last verdict against their
// first judging. docs/verdict-time.md says what each figure is.
func runVerdict(ctx context.Context, args []string) error {
	cfg, err := parseVerdict(args)
	if err != nil {
		return err
	}
	return verdictRun(ctx, cfg, os.Stdout)
}

// verdictConfig is what `kece-bench verdict` was asked for.
type verdictConfig struct {
	n, slots         int
	languages, kinds []string
	rejudge          bool
	testlib          string // a real testlib.h to use instead of problems.TestlibHeader
	timeout          time.Duration
	dsn, bin         string
}

// The problem kinds of the benchmark.
const (
	kindTolerant    = "tolerant"
	kindTestlib     = "testlib"
	kindInteractive = "interactive"
)

var (
	verdictLanguagesDefault = []string{"c17", "cpp17", "java17", "python3", "javascript", "arkts"}
	verdictKinds            = []string{kindTolerant, kindTestlib, kindInteractive}
)

func parseVerdict(args []string) (verdictConfig, error) {
	fs := flag.NewFlagSet("verdict", flag.ContinueOnError)
	n := fs.Int("n", 20, "submissions per language and problem kind, one at a time (latency) and again in waves of -slots (throughput)")
	langs := fs.String("languages", strings.Join(verdictLanguagesDefault, ","), "comma list of languages")
	kinds := fs.String("kinds", strings.Join(verdictKinds, ","), "comma list of problem kinds: tolerant, testlib (special checker), interactive")
	slots := fs.Int("slots", 2, "slots of each node (one node and host per pool); a throughput wave is this many submissions")
	rejudge := fs.Bool("rejudge", true, "rejudge each language's throughput submissions at once and compare with their first judging")
	testlib := fs.String("testlib", "", "a testlib.h to upload with the special checker (and compile natively) instead of the built-in protocol header")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up waiting for one verdict after this long")
	dsn := fs.String("dsn", "", "control MySQL server DSN without database (default $KECE_BENCH_MYSQL_DSN or the private MariaDB)")
	bin := fs.String("bin", "", "directory with kece-control, kece-node, kece-sandbox-init (default: next to kece-bench, else ./bin)")
	if err := settings.ParseWithEnv(fs, "KECE_BENCH_VERDICT_", args, os.Getenv); err != nil {
		return verdictConfig{}, err
	}
	cfg := verdictConfig{n: *n, slots: *slots, languages: splitList(*langs), kinds: splitList(*kinds), rejudge: *rejudge,
		testlib: *testlib, timeout: *timeout, dsn: *dsn, bin: *bin}
	return cfg, cfg.validate()
}

// validate names every bad setting at once.
func (c verdictConfig) validate() error {
	var errs []error
	if c.n < 1 {
		errs = append(errs, settings.Errorf("-n", "must be at least 1, not %d", c.n))
	}
	if c.slots < 1 || c.slots > 64 {
		errs = append(errs, settings.Errorf("-slots", "must be 1..64, not %d", c.slots))
	}
	if len(c.languages) == 0 {
		errs = append(errs, settings.Errorf("-languages", "names no language"))
	}
	for _, l := range c.languages {
		if _, ok := problems.SumProgram(l); !ok {
			errs = append(errs, settings.Errorf("-languages", "no a+b program for %q (want %s)", l, strings.Join(verdictLanguagesDefault, ", ")))
		}
	}
	if len(c.kinds) == 0 {
		errs = append(errs, settings.Errorf("-kinds", "names no problem kind"))
	}
	for _, k := range c.kinds {
		if !slices.Contains(verdictKinds, k) {
			errs = append(errs, settings.Errorf("-kinds", "unknown kind %q (want %s)", k, strings.Join(verdictKinds, ", ")))
		}
	}
	if c.timeout <= 0 {
		errs = append(errs, settings.Errorf("-timeout", "must be positive"))
	}
	return errors.Join(errs...)
}

// splitList splits a comma list, dropping empty items and spaces.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// verdictSubmissionType is the submission type of every benchmark submission.
const verdictSubmissionType = "BENCH"

// verdictBench is one run: the fleet, the published problems and the
// native judge of each language.
type verdictBench struct {
	cfg       verdictConfig
	out       io.Writer
	f         *fleet
	admin     *adminapi.ClientWithResponses
	cases     []problems.Case
	manifests map[string]string     // kind → manifest id
	nodes     map[string]*benchNode // pool → its node
	native    *nativeHost
	seq       int
	wrong     int // submissions, either side, not judged AC
}

// verdictRun runs the benchmark and writes its key=value lines to out. A
// run in which any submission was not judged AC (on either side) prints
// every line and then fails.
func verdictRun(ctx context.Context, cfg verdictConfig, out io.Writer) error {
	started := time.Now()
	b := &verdictBench{cfg: cfg, out: out, cases: problems.SumCases(verdictCases), manifests: map[string]string{}, nodes: map[string]*benchNode{}}
	var err error
	header := problems.TestlibHeader
	if cfg.testlib != "" {
		data, err := os.ReadFile(cfg.testlib)
		if err != nil {
			return settings.Errorf("-testlib", "%v", err)
		}
		header = string(data)
	}
	// The host's tools first: a missing one is named before anything starts.
	if b.native, err = newNativeHost(ctx, cfg.languages, cfg.kinds, b.cases, header); err != nil {
		return err
	}
	defer b.native.close()
	fmt.Fprintf(out, "mode=real_kece_control_and_nodes docker=real languages=%s kinds=%s n=%d slots_per_node=%d cases=%d testlib_header=%s\n",
		strings.Join(cfg.languages, ","), strings.Join(cfg.kinds, ","), cfg.n, cfg.slots, verdictCases, b.headerName())
	fmt.Fprintf(out, "native_tools=%s\n", b.native.toolList())
	fmt.Fprintf(out, "loadavg=%s\n", loadAvg())
	if err := b.start(ctx, header); err != nil {
		return err
	}
	defer b.f.stop()
	var rejudges []rejudgeResult
	for _, lang := range cfg.languages {
		rj, err := b.language(ctx, lang)
		if err != nil {
			return err
		}
		if cfg.rejudge {
			rejudges = append(rejudges, rj)
		}
	}
	if len(rejudges) > 0 {
		printRejudgeTotal(out, rejudges)
	}
	fmt.Fprintf(out, "loadavg=%s\n", loadAvg())
	fmt.Fprintf(out, "elapsed_s=%.0f wrong=%d\n", time.Since(started).Seconds(), b.wrong)
	if b.wrong > 0 {
		return fmt.Errorf("%d submissions were not judged AC (KECE or native; the lines above say which rows)", b.wrong)
	}
	return nil
}

// verdictCases is the number of cases of every problem.
const verdictCases = 10

func (b *verdictBench) headerName() string {
	if b.cfg.testlib == "" {
		return "builtin"
	}
	return "file"
}

// start starts the control plane and one node per pool, publishes the
// problems and opens the admin API (the jobs' timestamps).
func (b *verdictBench) start(ctx context.Context, header string) error {
	var err error
	if b.f, err = startFleet(ctx, fleetConfig{bin: b.cfg.bin, dsn: b.cfg.dsn}); err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			b.f.stop()
		}
	}()
	for _, lang := range b.cfg.languages {
		pool, _ := contracts.PoolOfLanguage(lang)
		if b.nodes[pool] != nil {
			continue
		}
		if b.nodes[pool], err = b.f.addNode(ctx, pool, b.cfg.slots); err != nil {
			return err
		}
	}
	if err := b.f.waitReady(ctx, 2*time.Minute); err != nil {
		return err
	}
	for _, kind := range b.cfg.kinds {
		if b.manifests[kind], err = publishVerdictProblem(ctx, b.f, kind, b.cases, header); err != nil {
			return err
		}
	}
	adminToken, err := b.f.st.Tokens().IssueToken(ctx, store.TokenSpec{Kind: store.TokenAdmin, Name: "bench-admin"})
	if err != nil {
		return err
	}
	b.admin, err = adminapi.NewClientWithResponses(b.f.url, adminapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+adminToken)
		return nil
	}))
	if err != nil {
		return err
	}
	ok = true
	return nil
}

// language runs every row of one language and, with -rejudge, its
// rejudge row.
func (b *verdictBench) language(ctx context.Context, lang string) (rejudgeResult, error) {
	pool, _ := contracts.PoolOfLanguage(lang)
	node := b.nodes[pool]
	rj := rejudgeResult{lang: lang}
	for _, kind := range b.cfg.kinds {
		// Warm-up, not counted: the image's files in the page cache, the
		// problem's data in the node's cache, the host's compilers loaded.
		if _, err := b.judgeKECE(ctx, lang, kind, b.nextID("warm", lang, kind)); err != nil {
			return rj, err
		}
		if _, err := b.native.judge(ctx, lang, kind); err != nil {
			return rj, err
		}
		lat, err := b.latencyRow(ctx, node, lang, kind)
		if err != nil {
			return rj, err
		}
		b.printRow(lat)
		thr, err := b.throughputRow(ctx, node, lang, kind)
		if err != nil {
			return rj, err
		}
		b.printRow(thr)
		rj.ids = append(rj.ids, thr.ids...)
		rj.firstWall += thr.keceWall
		rj.firstNode = rj.firstNode.add(thr.node)
	}
	if !b.cfg.rejudge {
		return rj, nil
	}
	if err := b.rejudgeRow(ctx, node, &rj); err != nil {
		return rj, err
	}
	b.printRejudge(rj)
	return rj, nil
}

// loadAvg is /proc/loadavg's three averages, comma separated.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ",")
}
