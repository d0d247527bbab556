package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/internal/duration"
)

var (
	jobStates       = []string{"QUEUED", "RUNNING", "COMPLETED", "FAILED", "CANCELLED"}
	verdictStatuses = []string{"AC", "PARTIAL", "WA", "TLE", "MLE", "OLE", "RE", "CE"}
)

// timeFlag reads a time flag: an RFC 3339 time, or a duration meaning that
// long ago (by this machine's clock). Empty is nil.
func timeFlag(name, v string) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return &t, nil
	}
	d, err := duration.Parse(v)
	if err != nil || d <= 0 {
		return nil, usagef("%s %q: want an RFC 3339 time (2026-11-30T10:00:00Z) or a positive duration ago (90m, 24h, 7d)", name, v)
	}
	t := time.Now().Add(-d)
	return &t, nil
}

func (c *cli) jobCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "job",
		Aliases: []string{"jobs"},
		Short:   "Judge jobs: list, show, rejudge, cancel",
		Args:    groupArgs,
		RunE:    groupRun,
	}
	cmd.AddCommand(c.jobList(), c.jobShow(), c.jobRejudge(), c.jobCancel())
	return cmd
}

// jobArg checks a job id argument.
func jobArg(s string) error {
	if !validID(s) {
		return usagef("%q is not a job id (a positive decimal number)", s)
	}
	return nil
}

func (c *cli) jobList() *cobra.Command {
	var state, pool, kind, typ, submission, verdict, since, until, before string
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--submission TYPE/ID] [--state S] [--verdict V] [--pool P] [--kind K] [--type T] [--since T] [--until T] [--limit N] [--before ID]",
		Short: "Search jobs, newest first",
		Args:  exactArgs(),
		RunE: c.action(func(*cobra.Command, []string) error {
			if limit < 1 || limit > 500 {
				return usagef("--limit must be 1..500")
			}
			l := int32(limit)
			p := adminapi.ListJudgeJobsParams{Limit: &l}
			if submission != "" {
				t, id, ok := strings.Cut(submission, "/")
				if !ok || t == "" || id == "" {
					return usagef("--submission %q: want TYPE/ID, e.g. ALGO/1234", submission)
				}
				if typ != "" && typ != t {
					return usagef("--type %s and --submission %s name different types", typ, submission)
				}
				typ = t
				p.SubmissionId = &id
			}
			if verdict != "" {
				v := adminapi.VerdictStatus(strings.ToUpper(verdict))
				p.Verdict = &v
			}
			var err error
			if p.CreatedAfter, err = timeFlag("--since", since); err != nil {
				return err
			}
			if p.CreatedBefore, err = timeFlag("--until", until); err != nil {
				return err
			}
			if state != "" {
				v := adminapi.JobState(strings.ToUpper(state))
				p.State = &v
			}
			if pool != "" {
				v := adminapi.Pool(pool)
				p.Pool = &v
			}
			if kind != "" {
				v := adminapi.JobKind(strings.ToUpper(kind))
				p.Kind = &v
			}
			if typ != "" {
				p.SubmissionType = &typ
			}
			if before != "" {
				p.BeforeId = &before
			}
			api, err := c.api()
			if err != nil {
				return err
			}
			r, err := api.ListJudgeJobsWithResponse(c.ctx, &p)
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.emit(r.JSON200, func() error {
				w := c.table()
				jobRows(w, r.JSON200.Jobs)
				if err := w.Flush(); err != nil {
					return err
				}
				if r.JSON200.NextBeforeId != nil {
					fmt.Fprintf(c.out, "more: --before %s\n", *r.JSON200.NextBeforeId)
				}
				return nil
			})
		}),
	}
	f := cmd.Flags()
	f.StringVar(&state, "state", "", "only this state: "+strings.Join(jobStates, ", "))
	f.StringVar(&pool, "pool", "", "only this pool")
	f.StringVar(&kind, "kind", "", "SUBMISSION or CHECK")
	f.StringVar(&typ, "type", "", "only this submission type")
	f.StringVar(&submission, "submission", "", "only this submission's jobs, every generation: TYPE/ID")
	f.StringVar(&verdict, "verdict", "", "only COMPLETED jobs with this verdict: "+strings.Join(verdictStatuses, ", "))
	f.StringVar(&since, "since", "", "only jobs created at or after: RFC 3339 time, or a duration ago (90m, 7d)")
	f.StringVar(&until, "until", "", "only jobs created before: RFC 3339 time, or a duration ago")
	f.IntVar(&limit, "limit", 50, "page size (1..500)")
	f.StringVar(&before, "before", "", "only jobs with a smaller id (the previous page's 'more: --before')")
	_ = cmd.RegisterFlagCompletionFunc("verdict", fixedCompletion(verdictStatuses...))
	_ = cmd.RegisterFlagCompletionFunc("state", fixedCompletion(jobStates...))
	_ = cmd.RegisterFlagCompletionFunc("pool", fixedCompletion(contracts.Pools()...))
	_ = cmd.RegisterFlagCompletionFunc("kind", fixedCompletion("SUBMISSION", "CHECK"))
	return cmd
}

func jobRows(w *tabwriter.Writer, js []adminapi.JudgeJob) {
	row(w, "ID", "KIND", "SUBMISSION", "GEN", "POOL", "STATE", "VERDICT", "PHASE", "CASES", "ATTEMPTS", "NODE", "ERROR", "CREATED")
	for _, j := range js {
		row(w, j.JobId, j.Kind, j.SubmissionType+"/"+j.SubmissionId, j.Generation, j.Pool, j.State, deref(j.Verdict, "-"), deref(j.Phase, "-"),
			fmt.Sprintf("%d/%d", j.CasesDone, j.CasesTotal), fmt.Sprintf("%d/%d", j.AttemptCount, j.MaxAttempts),
			deref(j.NodeId, "-"), deref(j.LastErrorCode, ""), stamp(j.CreatedAt))
	}
}

func (c *cli) jobShow() *cobra.Command {
	var follow bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "show JOB_ID [--follow]",
		Short: "One job with its verdict and attempts; --follow watches it until it ends",
		Long: `One job with its verdict, case results, attempts, generations and audit,
and where each attempt's time went as its node measured it (phases: queue
wait, download, sandbox, compile, checker compile, runs, checking, the
executor's call and claim to result; CACHED names what was ready before it
was needed) when the node sent that with its result.

--follow watches the job until it ends: on a terminal a progress line
(state, phase, cases done), then the job as without --follow; in a pipe or
with -o json one JSON object per line each time the job changes, the last
when it ended. The exit status is 1 when the job ends FAILED or CANCELLED,
or --timeout passes.`,
		Args: exactArgs("JOB_ID"),
		RunE: c.action(func(_ *cobra.Command, args []string) error {
			if err := jobArg(args[0]); err != nil {
				return err
			}
			if follow {
				return c.showFollow(args[0], timeout)
			}
			d, err := c.getJob(args[0])
			if err != nil {
				return err
			}
			return c.printJob(d)
		}),
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "watch the job until it ends (a progress line on a terminal, JSON lines otherwise)")
	timeout = WaitTimeoutDefault
	cmd.Flags().Var(duration.Value{D: &timeout}, "timeout", "give up following after this long (with --follow)")
	return cmd
}

// printJob prints one job as `job show` does (or as -o json|yaml).
func (c *cli) printJob(d *adminapi.JudgeJobDetail) error {
	return c.emit(d, func() error {
		w := c.table()
		jobRows(w, []adminapi.JudgeJob{d.Job})
		_ = w.Flush()
		if d.Job.Current != nil && !*d.Job.Current {
			fmt.Fprintln(c.out, "superseded: a newer generation of this submission exists")
		}
		if v := d.Verdict; v != nil {
			fmt.Fprintf(c.out, "verdict: %s, score %g/%d\n", v.Status, v.Score, v.MaxScore)
			w = c.table()
			row(w, "  CASE", "STATUS", "SCORE", "TIME", "MEMORY")
			for _, cs := range v.Cases {
				row(w, "  "+cs.CaseId, cs.Status, strconv.FormatFloat(cs.Score, 'f', -1, 64), strconv.FormatInt(cs.TimeMs, 10)+"ms",
					strconv.FormatInt(cs.MemoryKb, 10)+"KiB")
			}
			_ = w.Flush()
		}
		fmt.Fprintln(c.out, "attempts:")
		w = c.table()
		row(w, "  LEASE", "NODE", "SESSION", "OUTCOME", "ERROR", "STARTED", "ENDED")
		for _, a := range d.Attempts {
			ended := "-"
			if a.EndedAt != nil {
				ended = stamp(*a.EndedAt)
			}
			row(w, "  "+strconv.FormatInt(a.LeaseEpoch, 10), a.NodeId, a.SessionEpoch, a.Outcome, deref(a.ErrorCode, ""),
				stamp(a.StartedAt), ended)
		}
		_ = w.Flush()
		c.printPhases(d.Attempts)
		if len(d.Generations) > 1 {
			fmt.Fprintln(c.out, "generations:")
			w = c.table()
			row(w, "  JOB", "GEN", "STATE", "VERDICT", "CURRENT", "CREATED")
			for _, g := range d.Generations {
				row(w, "  "+g.JobId, g.Generation, g.State, deref(g.Verdict, "-"), yesNo(g.Current), stamp(g.CreatedAt))
			}
			_ = w.Flush()
		}
		if len(d.Audit) > 0 {
			fmt.Fprintln(c.out, "audit:")
			w = c.table()
			auditRows(w, d.Audit, "  ")
		}
		return w.Flush()
	})
}

// printPhases prints where each attempt's time went, for the attempts
// whose node reported it with its result; nothing when none did.
func (c *cli) printPhases(as []adminapi.Attempt) {
	var w *tabwriter.Writer
	for _, a := range as {
		p := a.Phases
		if p == nil {
			continue
		}
		if w == nil {
			fmt.Fprintln(c.out, "phases:")
			w = c.table()
			row(w, "  LEASE", "QUEUE", "DOWNLOAD", "SANDBOX", "COMPILE", "CHECKER", "RUN", "CHECK", "EXECUTOR", "TOTAL", "CACHED")
		}
		queue := "-"
		if p.QueueMs != nil {
			queue = phaseMs(*p.QueueMs)
		}
		var cached []string
		for _, f := range []struct {
			on   bool
			name string
		}{{p.CompileCached, "compile"}, {p.CheckerCached, "checker"}, {p.SandboxWarm, "sandbox"}} {
			if f.on {
				cached = append(cached, f.name)
			}
		}
		row(w, "  "+strconv.FormatInt(a.LeaseEpoch, 10), queue, phaseMs(p.DownloadMs), phaseMs(p.SandboxMs), phaseMs(p.CompileMs),
			phaseMs(p.CheckerMs), phaseMs(p.RunMs), phaseMs(p.CheckMs), phaseMs(p.ExecuteMs), phaseMs(p.TotalMs),
			orDash(strings.Join(cached, ",")))
	}
	if w != nil {
		_ = w.Flush()
	}
}

// phaseMs prints a phase's milliseconds: as they are below a second, in
// seconds above.
func phaseMs(ms int64) string {
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + "ms"
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', 2, 64) + "s"
}

func (c *cli) jobRejudge() *cobra.Command {
	var reason string
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "rejudge JOB_ID --reason TEXT [--wait]",
		Short: "Judge the submission again as a new generation",
		Args:  exactArgs("JOB_ID"),
		RunE: c.action(func(_ *cobra.Command, args []string) error {
			api, err := c.jobVerb(reason, args[0])
			if err != nil {
				return err
			}
			r, err := api.RejudgeJudgeJobWithResponse(c.ctx, args[0], adminapi.ReasonRequest{Reason: reason})
			if err := c.result(r, err, http.StatusAccepted); err != nil {
				return err
			}
			if wait {
				if c.output == outputTable {
					fmt.Fprintf(c.out, "rejudge queued: job %s, generation %d\n", r.JSON202.JobId, r.JSON202.Generation)
				}
				return c.waitRejudged(r.JSON202.JobId, timeout)
			}
			return c.emit(r.JSON202, func() error {
				_, err := fmt.Fprintf(c.out, "rejudge queued: job %s, generation %d (%s)\n", r.JSON202.JobId, r.JSON202.Generation, r.JSON202.State)
				return err
			})
		}),
	}
	reasonFlag(cmd, &reason)
	waitFlags(cmd, &wait, &timeout, "the new generation ended (exit 1 unless it COMPLETED)")
	return cmd
}

func (c *cli) jobCancel() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel JOB_ID --reason TEXT",
		Short: "Cancel a queued or running job",
		Args:  exactArgs("JOB_ID"),
		RunE: c.action(func(_ *cobra.Command, args []string) error {
			api, err := c.jobVerb(reason, args[0])
			if err != nil {
				return err
			}
			r, err := api.CancelJudgeJobWithResponse(c.ctx, args[0], adminapi.ReasonRequest{Reason: reason})
			if err := c.result(r, err, http.StatusOK); err != nil {
				return err
			}
			return c.emit(r.JSON200, func() error {
				_, err := fmt.Fprintf(c.out, "job %s: %s\n", r.JSON200.JobId, r.JSON200.State)
				return err
			})
		}),
	}
	reasonFlag(cmd, &reason)
	return cmd
}

// jobVerb opens an audited job verb (rejudge, cancel): a valid job id, a
// reason, then the client — checked in that order, as each verb did.
func (c *cli) jobVerb(reason, arg string) (*adminapi.ClientWithResponses, error) {
	if err := jobArg(arg); err != nil {
		return nil, err
	}
	if err := needReason(reason); err != nil {
		return nil, err
	}
	return c.api()
}
