package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/kece-oj/kece/cmd/internal/problems"
	"github.com/kece-oj/kece/contracts/businessapi"
)

// The KECE side of `kece-bench verdict`: submissions through the business
// API, verdicts read with its waiting read, the jobs' timestamps through
// the admin API and the node's phase figures from its /metrics.

// verdictSample is one judged submission: how long it took and whether it
// was judged AC.
type verdictSample struct {
	ms     float64
	ok     bool
	status string // the verdict, or what went wrong
	jobID  string // KECE only
}

// verdictRow is one row: a language, a problem kind and a mode, KECE and
// native side by side.
type verdictRow struct {
	name                   string // language/kind/mode
	throughput             bool
	kece, native           []float64 // ms per submission
	keceWall, nativeWall   time.Duration
	keceWrong, nativeWrong int
	notAC                  map[string]int // side:status → count, of the submissions not judged AC
	ids, jobs              []string       // KECE submission and job ids
	node                   nodeDelta
	queueMs, execMs        []float64 // from the jobs' timestamps (admin API)
}

// add records one KECE and one native sample.
func (r *verdictRow) add(k, n verdictSample, id string) {
	r.kece, r.native = append(r.kece, k.ms), append(r.native, n.ms)
	r.ids, r.jobs = append(r.ids, id), append(r.jobs, k.jobID)
	if !k.ok {
		r.keceWrong++
		r.countNotAC("kece:" + k.status)
	}
	if !n.ok {
		r.nativeWrong++
		r.countNotAC("native:" + n.status)
	}
}

func (r *verdictRow) countNotAC(key string) {
	if r.notAC == nil {
		r.notAC = map[string]int{}
	}
	r.notAC[key]++
}

// publishVerdictProblem publishes the a+b problem of one kind: the
// tolerant checker, SumChecker with the testlib header, or SumInteractor.
func publishVerdictProblem(ctx context.Context, f *fleet, kind string, cases []problems.Case, header string) (string, error) {
	ck := businessapi.Checker{Type: businessapi.CheckerTypeTolerant}
	var err error
	switch kind {
	case kindTestlib:
		p := businessapi.CheckerProtocolTestlib
		ck.Type = businessapi.CheckerTypeSpecial
		ck.Special, err = problems.Special(ctx, f.biz, checkerLanguage, problems.SumChecker, map[string]string{"testlib.h": header}, &p)
	case kindInteractive:
		ck.Type = businessapi.CheckerTypeInteractive
		ck.Special, err = problems.Special(ctx, f.biz, checkerLanguage, problems.SumInteractor, nil, nil)
	}
	if err != nil {
		return "", err
	}
	m, err := problems.CodeManifest(ctx, f.biz, cases, ck)
	if err != nil {
		return "", err
	}
	return f.publish(ctx, m, "a+b "+kind)
}

// checkerLanguage is the language of the special checker and the
// interactor, whatever the submission's language.
const checkerLanguage = "cpp17"

// nextID is a new submission id.
func (b *verdictBench) nextID(prefix, lang, kind string) string {
	b.seq++
	return fmt.Sprintf("%s-%s-%s-%d", prefix, lang, kind, b.seq)
}

// judgeKECE enqueues the language's a+b program for the kind's problem and
// reads its verdict with waiting reads: the time from the enqueue request
// to the answer that carries the verdict.
func (b *verdictBench) judgeKECE(ctx context.Context, lang, kind, id string) (verdictSample, error) {
	src, _ := problems.SumProgram(lang)
	src = uniqueSource(lang, src, id)
	start := time.Now()
	r, err := b.f.biz.EnqueueSubmissionWithResponse(ctx, nil, businessapi.SubmissionCreate{SubmissionType: verdictSubmissionType,
		SubmissionId: id, Language: lang, Source: src, ManifestId: b.manifests[kind]})
	if err != nil {
		return verdictSample{}, fmt.Errorf("enqueue %s: %w", id, err)
	}
	if r.JSON202 == nil {
		return verdictSample{}, fmt.Errorf("enqueue %s: %d %s", id, r.StatusCode(), r.Body)
	}
	return b.waitSettled(ctx, id, r.JSON202.Generation, start)
}

// waitSettled reads submission id with waiting reads until its generation
// gen has settled; the sample's time runs from start.
func (b *verdictBench) waitSettled(ctx context.Context, id string, gen int64, start time.Time) (verdictSample, error) {
	deadline := start.Add(b.cfg.timeout)
	for {
		wait := int32(min(time.Until(deadline), time.Minute).Milliseconds())
		r, err := b.f.biz.GetSubmissionWithResponse(ctx, verdictSubmissionType, id, &businessapi.GetSubmissionParams{WaitMs: &wait})
		if err != nil {
			return verdictSample{}, fmt.Errorf("read %s: %w", id, err)
		}
		if r.JSON200 == nil {
			return verdictSample{}, fmt.Errorf("read %s: %d %s", id, r.StatusCode(), r.Body)
		}
		s := r.JSON200
		if s.Generation >= gen && settledStatus(s.Status) {
			ms := ms(time.Since(start))
			return verdictSample{ms: ms, ok: s.Status == businessapi.SubmissionStatusCodeAC, status: string(s.Status), jobID: s.JobId}, nil
		}
		if time.Now().After(deadline) {
			return verdictSample{}, fmt.Errorf("%s not judged within %s (status %s; node logs in %s)", id, b.cfg.timeout, s.Status, b.f.work)
		}
		if s.Generation < gen {
			// Not the generation asked about yet (cannot happen after a
			// 202 in one replica; a poll interval, not a wait for a goroutine).
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// settledStatus is whether a status ends a generation: a verdict,
// SYSTEM_ERROR or CANCELLED.
func settledStatus(s businessapi.SubmissionStatusCode) bool {
	switch s {
	case businessapi.SubmissionStatusCodePending, businessapi.SubmissionStatusCodeCompiling, businessapi.SubmissionStatusCodeJudging:
		return false
	}
	return true
}

// latencyRow judges n submissions one at a time, alternating one KECE
// submission and the same natively.
func (b *verdictBench) latencyRow(ctx context.Context, node *benchNode, lang, kind string) (verdictRow, error) {
	row := verdictRow{name: lang + "/" + kind + "/latency"}
	before, err := scrapeNode(ctx, node)
	if err != nil {
		return row, err
	}
	for range b.cfg.n {
		id := b.nextID("lat", lang, kind)
		k, err := b.judgeKECE(ctx, lang, kind, id)
		if err != nil {
			return row, err
		}
		n, err := b.native.judge(ctx, lang, kind)
		if err != nil {
			return row, err
		}
		row.add(k, n, id)
	}
	return row, b.finishRow(ctx, node, before, &row)
}

// throughputRow judges n submissions in waves of as many at once as the
// pool has slots, alternating one KECE wave and one native wave. Each
// submission's time is its own; a side's wall time is the sum of its waves.
func (b *verdictBench) throughputRow(ctx context.Context, node *benchNode, lang, kind string) (verdictRow, error) {
	row := verdictRow{name: lang + "/" + kind + "/throughput", throughput: true}
	before, err := scrapeNode(ctx, node)
	if err != nil {
		return row, err
	}
	for done := 0; done < b.cfg.n; {
		w := min(b.cfg.slots, b.cfg.n-done)
		ids := make([]string, w)
		for i := range ids {
			ids[i] = b.nextID("thr", lang, kind)
		}
		ks, kWall, err := wave(w, func(i int) (verdictSample, error) { return b.judgeKECE(ctx, lang, kind, ids[i]) })
		if err != nil {
			return row, err
		}
		ns, nWall, err := wave(w, func(int) (verdictSample, error) { return b.native.judge(ctx, lang, kind) })
		if err != nil {
			return row, err
		}
		for i := range w {
			row.add(ks[i], ns[i], ids[i])
		}
		row.keceWall += kWall
		row.nativeWall += nWall
		done += w
	}
	return row, b.finishRow(ctx, node, before, &row)
}

// wave runs judge(0..w-1) at once and returns the samples and the wave's
// wall time; the first error wins.
func wave(w int, judge func(i int) (verdictSample, error)) ([]verdictSample, time.Duration, error) {
	out := make([]verdictSample, w)
	errs := make([]error, w)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range w {
		wg.Go(func() { out[i], errs[i] = judge(i) })
	}
	wg.Wait()
	wall := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return nil, 0, err
		}
	}
	return out, wall, nil
}

// finishRow adds the node's figures over the row and the jobs' timestamps.
func (b *verdictBench) finishRow(ctx context.Context, node *benchNode, before nodeSnapshot, row *verdictRow) error {
	after, err := scrapeNode(ctx, node)
	if err != nil {
		return err
	}
	row.node = after.since(before)
	row.queueMs, row.execMs, err = b.jobTimes(ctx, row.jobs)
	b.wrong += row.keceWrong + row.nativeWrong
	return err
}

// jobTimes reads each job through the admin API: queue wait (created →
// first claim) and execution (first claim → finished), database clock.
func (b *verdictBench) jobTimes(ctx context.Context, jobs []string) (queueMs, execMs []float64, err error) {
	for _, id := range jobs {
		r, err := b.admin.GetJudgeJobWithResponse(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		if r.StatusCode() != http.StatusOK || r.JSON200 == nil {
			return nil, nil, fmt.Errorf("admin job %s: %d %s", id, r.StatusCode(), r.Body)
		}
		j := r.JSON200.Job
		if j.StartedAt == nil || j.FinishedAt == nil {
			continue
		}
		queueMs = append(queueMs, ms(j.StartedAt.Sub(j.CreatedAt)))
		execMs = append(execMs, ms(j.FinishedAt.Sub(*j.StartedAt)))
	}
	return queueMs, execMs, nil
}

// rejudgeResult is one language's rejudge row: its throughput submissions,
// the wall time of their first judging (the sum of their KECE waves) and of
// their rejudge (every rejudge sent at once, to the last verdict).
type rejudgeResult struct {
	lang                   string
	ids                    []string
	firstWall, rejudgeWall time.Duration
	firstNode, rejudgeNode nodeDelta
	wrong                  int
}

// rejudgeRow rejudges the language's throughput submissions at once
// (test data unchanged) and waits for every new verdict.
func (b *verdictBench) rejudgeRow(ctx context.Context, node *benchNode, rj *rejudgeResult) error {
	before, err := scrapeNode(ctx, node)
	if err != nil {
		return err
	}
	start := time.Now()
	samples, _, err := wave(len(rj.ids), func(i int) (verdictSample, error) {
		id := rj.ids[i]
		r, err := b.f.biz.RejudgeSubmissionWithResponse(ctx, verdictSubmissionType, id, businessapi.ReasonRequest{Reason: "kece-bench verdict"})
		if err != nil {
			return verdictSample{}, fmt.Errorf("rejudge %s: %w", id, err)
		}
		if r.JSON202 == nil {
			return verdictSample{}, fmt.Errorf("rejudge %s: %d %s", id, r.StatusCode(), r.Body)
		}
		return b.waitSettled(ctx, id, r.JSON202.Generation, start)
	})
	if err != nil {
		return err
	}
	for _, s := range samples {
		rj.rejudgeWall = max(rj.rejudgeWall, time.Duration(s.ms*float64(time.Millisecond)))
		if !s.ok {
			rj.wrong++
		}
	}
	b.wrong += rj.wrong
	after, err := scrapeNode(ctx, node)
	if err != nil {
		return err
	}
	rj.rejudgeNode = after.since(before)
	return nil
}

// uniqueSource is src with a comment naming the submission: each
// submission's bytes differ, as students' do, so its first judging compiles
// (the node's compile cache serves only equal bytes) and a rejudge is what
// the cache is for.
func uniqueSource(lang, src, id string) string {
	if lang == "python3" {
		return src + "\n# submission " + id + "\n"
	}
	return src + "\n// submission " + id + "\n"
}
