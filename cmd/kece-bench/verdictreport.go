package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kece-oj/kece/telemetry"
)

// The figures of `kece-bench verdict`: one `row=` line per language, kind
// and mode (KECE and native percentiles and their ratio), one `phases=`
// line beside it (where the KECE time went), one `rejudge=` line per
// language and one for all. Every field is key=value.

// nodeSnapshot is one scrape of a node's /metrics.
type nodeSnapshot struct{ s telemetry.Samples }

func scrapeNode(ctx context.Context, n *benchNode) (nodeSnapshot, error) {
	s, err := telemetry.Scrape(ctx, n.metrics)
	if err != nil {
		return nodeSnapshot{}, fmt.Errorf("scrape %s: %w", n.name, err)
	}
	return nodeSnapshot{s}, nil
}

// sumCount is a histogram's sum (seconds) and count over an interval.
type sumCount struct{ sum, count float64 }

func (a sumCount) add(b sumCount) sumCount { return sumCount{a.sum + b.sum, a.count + b.count} }

// meanMs is the mean observation in ms, 0 without observations.
func (a sumCount) meanMs() float64 {
	if a.count == 0 {
		return 0
	}
	return a.sum / a.count * 1000
}

// nodeDelta is what a node's histograms gained over an interval: its jobs
// (claim answer to result post), their compile phase (container start
// included, until judging starts) and their judging phase (cases and
// checker), and per-phase histograms when the node has them.
type nodeDelta struct {
	job, compile, judge sumCount
	phases              map[string]sumCount
}

func (d nodeDelta) add(o nodeDelta) nodeDelta {
	out := nodeDelta{job: d.job.add(o.job), compile: d.compile.add(o.compile), judge: d.judge.add(o.judge)}
	for _, m := range []map[string]sumCount{d.phases, o.phases} {
		for k, v := range m {
			if out.phases == nil {
				out.phases = map[string]sumCount{}
			}
			out.phases[k] = out.phases[k].add(v)
		}
	}
	return out
}

// nodePhaseHistogram is the hook for per-phase figures: a histogram of
// this name with a `phase` label (queue wait, download, sandbox ready,
// compile, run, checker, result post — issue 42, item 2) is read per
// phase when the node exposes it, and its phases are printed with their
// share of the time to verdict. Nodes without it (every node before that
// change) print node_phase_histograms=absent and only the phases below
// that can be derived. If the change names it differently, change it here.
const nodePhaseHistogram = "kece_node_job_phase_seconds"

var phaseLabel = regexp.MustCompile(`phase="([^"]*)"`)

// since is what the node's histograms gained from before to s.
func (s nodeSnapshot) since(before nodeSnapshot) nodeDelta {
	sc := func(name string) sumCount {
		return sumCount{s.s.Sum(name+"_sum") - before.s.Sum(name+"_sum"), s.s.Sum(name+"_count") - before.s.Sum(name+"_count")}
	}
	d := nodeDelta{job: sc("kece_node_job_duration_seconds"), compile: sc("kece_node_compile_seconds"), judge: sc("kece_node_run_seconds")}
	for key := range s.s {
		base, labels, _ := strings.Cut(key, "{")
		m := phaseLabel.FindStringSubmatch(labels)
		if base != nodePhaseHistogram+"_sum" || m == nil {
			continue
		}
		if d.phases == nil {
			d.phases = map[string]sumCount{}
		}
		// Summed over any other labels of the phase (pool, kind).
		d.phases[m[1]] = sumCount{s.s.Sum(nodePhaseHistogram+"_sum", "phase", m[1]) - before.s.Sum(nodePhaseHistogram+"_sum", "phase", m[1]),
			s.s.Sum(nodePhaseHistogram+"_count", "phase", m[1]) - before.s.Sum(nodePhaseHistogram+"_count", "phase", m[1])}
	}
	return d
}

// mean is the arithmetic mean, 0 for none.
func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// ratio is a/b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// printRow prints a row's `row=` and `phases=` lines.
func (b *verdictBench) printRow(r verdictRow) {
	k, n := slices.Sorted(slices.Values(r.kece)), slices.Sorted(slices.Values(r.native))
	kp50, kp95, np50, np95 := pctf(k, 50), pctf(k, 95), pctf(n, 50), pctf(n, 95)
	line := fmt.Sprintf("row=%s n=%d kece_p50_ms=%.0f kece_p95_ms=%.0f native_p50_ms=%.0f native_p95_ms=%.0f ratio_p50=%.2f ratio_p95=%.2f",
		r.name, len(r.kece), kp50, kp95, np50, np95, ratio(kp50, np50), ratio(kp95, np95))
	if r.throughput {
		kw, nw := ms(r.keceWall), ms(r.nativeWall)
		line += fmt.Sprintf(" kece_wall_ms=%.0f native_wall_ms=%.0f ratio_wall=%.2f kece_per_s=%.2f native_per_s=%.2f",
			kw, nw, ratio(kw, nw), ratio(float64(len(r.kece))*1000, kw), ratio(float64(len(r.native))*1000, nw))
	}
	line += fmt.Sprintf(" kece_wrong=%d native_wrong=%d", r.keceWrong, r.nativeWrong)
	if len(r.notAC) > 0 {
		var seen []string
		for _, k := range slices.Sorted(maps.Keys(r.notAC)) {
			seen = append(seen, fmt.Sprintf("%s:%d", k, r.notAC[k]))
		}
		line += " not_ac=" + strings.Join(seen, ",")
	}
	fmt.Fprintf(b.out, "%s load1=%s\n", line, strings.Split(loadAvg(), ",")[0])
	printPhases(b.out, r)
}

// printPhases splits the row's mean KECE time to verdict: queue wait
// (created → first claim, from the jobs' timestamps); the node's job (claim
// answer → result post) made of its compile phase (container start
// included, until judging starts), its judging phase (cases and checker)
// and the rest before the executor starts (manifest and data downloads);
// and api, what is left: the enqueue request, the claim's answer reaching
// the node, and the result's commit reaching the waiting read. exec is the
// job's first claim → finish on the database clock, for comparison with
// the node's own figure. Shares are of the mean time to verdict.
func printPhases(w io.Writer, r verdictRow) {
	lat, queue, exec, job := mean(r.kece), mean(r.queueMs), mean(r.execMs), r.node.job.meanMs()
	compile, judge := r.node.compile.meanMs(), r.node.judge.meanMs()
	api, other := lat-queue-job, job-compile-judge
	line := fmt.Sprintf("phases=%s latency_ms_mean=%.0f queue_ms_mean=%.1f exec_ms_mean=%.0f node_job_ms_mean=%.0f node_compile_ms_mean=%.0f "+
		"node_judge_ms_mean=%.0f node_download_ms_mean=%.1f api_ms_mean=%.1f share_queue=%.3f share_compile=%.3f share_judge=%.3f "+
		"share_download=%.3f share_api=%.3f", r.name, lat, queue, exec, job, compile, judge, other, api,
		ratio(queue, lat), ratio(compile, lat), ratio(judge, lat), ratio(other, lat), ratio(api, lat))
	if len(r.node.phases) == 0 {
		fmt.Fprintf(w, "%s node_phase_histograms=absent\n", line)
		return
	}
	line += " node_phase_histograms=present"
	for _, p := range slices.Sorted(maps.Keys(r.node.phases)) {
		m := r.node.phases[p].meanMs()
		line += fmt.Sprintf(" phase_%s_ms_mean=%.1f share_phase_%s=%.3f", p, m, p, ratio(m, lat))
	}
	fmt.Fprintln(w, line)
}

// printRejudge prints a language's `rejudge=` line.
func (b *verdictBench) printRejudge(rj rejudgeResult) {
	fw, rw := ms(rj.firstWall), ms(rj.rejudgeWall)
	fmt.Fprintf(b.out, "rejudge=%s n=%d first_wall_ms=%.0f rejudge_wall_ms=%.0f speedup=%.2f first_node_job_ms_mean=%.0f rejudge_node_job_ms_mean=%.0f "+
		"first_node_compile_ms_mean=%.0f rejudge_node_compile_ms_mean=%.0f wrong=%d load1=%s\n",
		rj.lang, len(rj.ids), fw, rw, ratio(fw, rw), rj.firstNode.job.meanMs(), rj.rejudgeNode.job.meanMs(),
		rj.firstNode.compile.meanMs(), rj.rejudgeNode.compile.meanMs(), rj.wrong, strings.Split(loadAvg(), ",")[0])
}

// printRejudgeTotal prints the `rejudge=all` line: every language's
// rejudge and first judging added up.
func printRejudgeTotal(w io.Writer, rjs []rejudgeResult) {
	var first, again time.Duration
	n, wrong := 0, 0
	for _, rj := range rjs {
		first, again, n, wrong = first+rj.firstWall, again+rj.rejudgeWall, n+len(rj.ids), wrong+rj.wrong
	}
	fmt.Fprintf(w, "rejudge=all n=%d first_wall_ms=%.0f rejudge_wall_ms=%.0f speedup=%.2f wrong=%d\n",
		n, ms(first), ms(again), ratio(ms(first), ms(again)), wrong)
}
