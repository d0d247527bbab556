package httpapi

import (
	"context"
	"time"

	"github.com/kece-oj/kece/contracts/businessapi"
)

// settledStatus reports whether a business status word is final for its
// generation: a verdict, SYSTEM_ERROR or CANCELLED.
func settledStatus(s businessapi.SubmissionStatusCode) bool {
	switch s {
	case businessapi.SubmissionStatusCodePending, businessapi.SubmissionStatusCodeCompiling, businessapi.SubmissionStatusCodeJudging:
		return false
	}
	return true
}

// waitSubmissionStatus reads the status and, while the current generation
// has not settled and wait has not passed, waits for its job to settle and
// reads again. The wait holds no database connection: it sleeps on the
// replica's settlement registry, woken at once by results committed here and
// within one poll interval by anything committed elsewhere (a result on
// another replica, a reaper's FAILED, a cancel or rejudge). A settlement that
// lands between the read and the watch is likewise seen by the poller. The
// job followed is re-read after every wake-up, so a rejudge during the wait
// moves the wait to the new generation.
func (b businessAPI) waitSubmissionStatus(ctx context.Context, typ, id string, wait time.Duration) (businessapi.SubmissionStatus, error) {
	st, err := b.submissionStatus(ctx, typ, id)
	if err != nil || wait <= 0 || settledStatus(st.Status) {
		return st, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		jobID, err := parseID("jobId", st.JobId)
		if err != nil {
			return st, err
		}
		woken, done := b.s.settlements.Watch(jobID)
		stop := false
		select {
		case <-woken:
		case <-waitCtx.Done():
			stop = true
		case <-b.s.closing:
			stop = true
		}
		done()
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		// Whatever ended the wait, the answer is the status as it is now.
		if st, err = b.submissionStatus(ctx, typ, id); err != nil || stop || settledStatus(st.Status) {
			return st, err
		}
	}
}
