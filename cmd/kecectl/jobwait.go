package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/kece-oj/kece/contracts/adminapi"
)

// jobEnded: the job will not change state any more.
func jobEnded(s adminapi.JobState) bool {
	switch s {
	case adminapi.JobStateCompleted, adminapi.JobStateFailed, adminapi.JobStateCancelled:
		return true
	}
	return false
}

// jobLine is a job's progress as one status line.
func jobLine(j adminapi.JudgeJob) string {
	s := fmt.Sprintf("job %s (%s/%s, generation %d): %s", j.JobId, j.SubmissionType, j.SubmissionId, j.Generation, j.State)
	if j.Phase != nil && j.State == adminapi.JobStateRunning {
		s += " " + string(*j.Phase)
	}
	if j.CasesTotal > 0 && (j.State == adminapi.JobStateRunning || jobEnded(j.State)) {
		s += fmt.Sprintf(", %d/%d cases", j.CasesDone, j.CasesTotal)
	}
	if j.Verdict != nil {
		s += ", verdict " + string(*j.Verdict)
	}
	if j.LastErrorCode != nil && j.State == adminapi.JobStateFailed {
		s += ", last error " + *j.LastErrorCode
	}
	return s
}

// getJob reads one job with its verdict, attempts and generations.
func (c *cli) getJob(id string) (*adminapi.JudgeJobDetail, error) {
	api, err := c.api()
	if err != nil {
		return nil, err
	}
	r, err := api.GetJudgeJobWithResponse(c.ctx, id)
	if err := c.result(r, err, http.StatusOK); err != nil {
		return nil, err
	}
	return r.JSON200, nil
}

// errJobDidNotComplete: a followed job ended FAILED or CANCELLED (exit 1,
// as any waited-for outcome that failed).
var errJobDidNotComplete = errors.New("the job did not complete")

// followJob polls job id until it ends or timeout passes. Each time its
// status line changes, changed is called with the job; the last detail
// read is returned. An ended job that is not COMPLETED is an error after
// the detail.
func (c *cli) followJob(id string, timeout time.Duration, p *progress, changed func(adminapi.JudgeJob) error) (*adminapi.JudgeJobDetail, error) {
	var d *adminapi.JudgeJobDetail
	last := ""
	err := c.poll(timeout, p, func(time.Duration) (string, bool, error) {
		var err error
		if d, err = c.getJob(id); err != nil {
			return "", false, err
		}
		line := jobLine(d.Job)
		if line != last && changed != nil {
			if err := changed(d.Job); err != nil {
				return "", false, err
			}
		}
		last = line
		return line, jobEnded(d.Job.State), nil
	})
	if err != nil {
		return d, err
	}
	if d.Job.State != adminapi.JobStateCompleted {
		return d, fmt.Errorf("%w: %s", errJobDidNotComplete, jobLine(d.Job))
	}
	return d, nil
}

// waitRejudged follows the new generation a rejudge queued until it ends.
func (c *cli) waitRejudged(id string, timeout time.Duration) error {
	p := c.progress()
	d, err := c.followJob(id, timeout, p, nil)
	if d != nil && (err == nil || errors.Is(err, errJobDidNotComplete)) {
		p.done(jobLine(d.Job))
		if eerr := c.emitFinal(d); eerr != nil {
			return eerr
		}
	}
	return err
}

// showFollow is `job show --follow`: on a terminal a progress line that
// rewrites itself, then the job as `show` prints it; otherwise (a pipe, a
// log, -o json|yaml) one JSON object per line each time the job changes,
// the last one when it ended.
func (c *cli) showFollow(id string, timeout time.Duration) error {
	p := c.progress()
	if p.tty && c.output == outputTable {
		d, err := c.followJob(id, timeout, p, nil)
		p.close()
		if d != nil && (err == nil || errors.Is(err, errJobDidNotComplete)) {
			if perr := c.printJob(d); perr != nil {
				return perr
			}
		}
		return err
	}
	// The JSON lines are the progress: no status line besides them.
	enc := json.NewEncoder(c.out)
	_, err := c.followJob(id, timeout, &progress{w: io.Discard}, func(j adminapi.JudgeJob) error { return enc.Encode(j) })
	return err
}
