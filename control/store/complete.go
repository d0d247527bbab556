package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// leaseWrite is one call the lease writer queues: a node's renewal or a
// fast result, never both.
type leaseWrite struct {
	renew  *renewCall
	result *fastResult
}

// writeBatch answers concurrent renewals and fast results. When both kinds
// are queued (distinct jobs) they share one transaction: one UPDATE of
// judge_job renews and completes, fenced alike, then the results' attempts
// and events (resultWrite) — a renewal costs no commit of its own. If any
// item of it fails its fence, nothing is written and each kind goes its own
// way below, so every call gets exactly the answer it would get alone.
func (s *Store) writeBatch(ctx context.Context, calls []*batchCall[leaseWrite, bool]) {
	var renews, results []*batchCall[leaseWrite, bool]
	seen := make(map[int64]bool)
	dup := false
	for _, c := range calls {
		if c.req.renew != nil {
			renews = append(renews, c)
			for _, it := range c.req.renew.items {
				dup = dup || seen[it.JobID]
				seen[it.JobID] = true
			}
			continue
		}
		results = append(results, c)
		dup = dup || seen[c.req.result.jobID]
		seen[c.req.result.jobID] = true
	}
	if len(renews) > 0 && len(results) > 0 && !dup {
		rs := make([]renewCall, len(renews))
		for i, c := range renews {
			rs[i] = *c.req.renew
		}
		items := make([]fastResult, len(results))
		for i, c := range results {
			items[i] = *c.req.result
		}
		slices.SortFunc(items, byJobID)
		if err := s.commitResults(ctx, rs, items); err == nil {
			s.stats.batches.Add(1)
			for _, c := range calls {
				c.resp = true
			}
			return
		}
	}
	if len(renews) > 0 {
		s.renewBatch(ctx, renews)
	}
	if len(results) > 0 {
		s.completeBatch(ctx, results)
	}
}

// Complete records the result of a lease; see complete. It reports the
// outcome, or why the result was refused, to the observer, and wakes the
// waiters it concerns (wakeups.go).
func (s *Store) Complete(ctx context.Context, sess NodeSession, jobID, leaseEpoch int64, res Result) (CompleteResponse, error) {
	out, err := s.complete(ctx, sess, jobID, leaseEpoch, res)
	s.observeResult(ctx, jobID, res, out, err)
	if err == nil {
		s.notifyResult(ctx, sess, jobID, out, false)
	}
	return out, err
}

// complete records the result of a lease. Fencing (DESIGN §5): if this
// (job, lease epoch) already has a receipt, the same digest answers
// ALREADY_COMMITTED and a different one ErrResultConflict — checked before
// anything about expiry. Otherwise the lease must still own a RUNNING job that
// is its submission's current job. Result, job state, attempt receipt and
// settlement event commit together.
func (s *Store) complete(ctx context.Context, sess NodeSession, jobID, leaseEpoch int64, res Result) (CompleteResponse, error) {
	p, err := s.prepareResult(ctx, sess, jobID, leaseEpoch, res)
	if err != nil {
		return CompleteResponse{}, err
	}
	return s.completePrepared(ctx, sess, jobID, leaseEpoch, res, p)
}

// completePrepared is complete after prepareResult: the lease writer for a
// fast result, completeSlow for the rest and for a fast one fenced out.
func (s *Store) completePrepared(ctx context.Context, sess NodeSession, jobID, leaseEpoch int64, res Result, p preparedResult) (CompleteResponse, error) {
	if p.fast != nil {
		done, err := s.writer.do(ctx, leaseWrite{result: p.fast})
		if err != nil {
			return CompleteResponse{}, err
		}
		if done {
			return CompleteResponse{Disposition: Accepted, JobState: StateCompleted}, nil
		}
	}
	return s.completeSlow(ctx, sess, jobID, leaseEpoch, res, p.cases, p.body, p.digest)
}

// errFenced says a fast completion's fencing did not hold for some item;
// nothing was written, and the slow path works out the answer.
var errFenced = errors.New("fast completion fenced out")

// completeFast commits one verdict alone; done is false when its fencing did
// not hold (nothing written).
func (s *Store) completeFast(ctx context.Context, r fastResult) (done bool, err error) {
	err = s.commitResults(ctx, nil, []fastResult{r})
	if errors.Is(err, errFenced) {
		return false, nil
	}
	return err == nil, err
}

// completeBatch commits concurrent fast completions in one transaction: one
// fenced UPDATE of all their jobs and attempts, one multi-row event INSERT,
// one commit. If any item's fencing fails the whole batch rolls back and each
// item is retried alone, so every item gets exactly the answer it would get
// by itself. A job that appears twice in a batch goes alone.
func (s *Store) completeBatch(ctx context.Context, calls []*batchCall[leaseWrite, bool]) {
	seen := make(map[int64]bool, len(calls))
	var batch, alone []*batchCall[leaseWrite, bool]
	for _, c := range calls {
		if seen[c.req.result.jobID] {
			alone = append(alone, c)
			continue
		}
		seen[c.req.result.jobID] = true
		batch = append(batch, c)
	}
	if len(batch) > 1 {
		// Job-id order: batches lock their rows in one order.
		slices.SortFunc(batch, func(a, b *batchCall[leaseWrite, bool]) int {
			return cmp.Compare(a.req.result.jobID, b.req.result.jobID)
		})
		items := make([]fastResult, len(batch))
		for i, c := range batch {
			items[i] = *c.req.result
		}
		if err := s.commitResults(ctx, nil, items); err == nil {
			s.stats.batches.Add(1)
			for _, c := range batch {
				c.resp = true
			}
			batch = nil
		}
	}
	for _, c := range append(batch, alone...) {
		c.resp, c.err = s.completeFast(ctx, *c.req.result)
	}
}

// resultWrite is the one way a result commits (apart from completeSlow,
// its fallback): the leaseUpdate of the results' jobs (with any renewals
// sharing the transaction), one UPDATE closing their attempts with their
// receipts, then one INSERT of their settlement events. The lease writer
// runs it as a transaction of its own (commit); a slot cycle stages it in
// its claim's transaction (inClaim, then events before the claim's
// COMMIT). Its fence is the row counts: unless the job UPDATE changed every
// job and the attempts UPDATE every attempt, nothing commits.
type resultWrite struct {
	ttl    time.Duration
	renews []renewCall
	items  []fastResult // distinct jobs, in job-id order
	// want is how many jobs the job UPDATE changes when every fence holds;
	// jobs and attempts are how many it and the attempts UPDATE changed.
	want           int
	jobs, attempts int64
}

func (s *Store) resultWrite(renews []renewCall, items []fastResult) *resultWrite {
	return &resultWrite{ttl: s.cfg.LeaseTTL, renews: renews, items: items}
}

// writes adds the job and attempt UPDATEs to sc; counted adds a row-count
// read after each (for a script that also reads rows).
func (w *resultWrite) writes(sc *script, counted bool) []func(rowScanner) error {
	jq, jargs, want := leaseUpdate(w.ttl, w.renews, w.items)
	w.want = want
	aq, aargs := attemptReceipts(w.items)
	if !counted {
		sc.exec(jq, jargs...).exec(aq, aargs...)
		return nil
	}
	sc.exec(jq, jargs...).rows(`SELECT ROW_COUNT()`).exec(aq, aargs...).rows(`SELECT ROW_COUNT()`)
	return []func(rowScanner) error{
		func(r rowScanner) error { return r.Scan(&w.jobs) },
		func(r rowScanner) error { return r.Scan(&w.attempts) },
	}
}

// held reports whether every fence held (true when there is nothing to write).
func (w *resultWrite) held() bool {
	return len(w.items) == 0 || (w.jobs == int64(w.want) && w.attempts == int64(len(w.items)))
}

// events adds the results' settlement events to sc (nothing when there are
// no results).
func (w *resultWrite) events(sc *script) error {
	if len(w.items) == 0 {
		return nil
	}
	q, qargs, err := settlementSQL(settlementRows(w.items))
	if err != nil {
		return err
	}
	sc.exec(q, qargs...)
	return nil
}

// commit runs w (at least one result) as a transaction on c in two round
// trips: (begin, the writes) with each statement's row count, then (the
// events, commit). A fence that did not hold returns errFenced, and
// inScripts rolls back.
func (w *resultWrite) commit(ctx context.Context, s *Store, c *scriptConn) error {
	sc := s.begin(&script{})
	w.writes(sc, false)
	n, err := c.counts(ctx, sc)
	if err != nil {
		return fmt.Errorf("store: complete: %w", err)
	}
	if len(n) < 2 {
		return errFenced
	}
	if w.jobs, w.attempts = n[len(n)-2], n[len(n)-1]; !w.held() {
		return errFenced
	}
	sc = &script{}
	if err := w.events(sc); err != nil {
		return err
	}
	if err := c.send(ctx, sc.exec(`COMMIT`)); err != nil {
		return fmt.Errorf("store: complete: settle: %w", err)
	}
	return nil
}

// inClaim stages w in a claim transaction's first round trip, after its
// host-group and node locks; the reads it returns fill in the row counts.
func (w *resultWrite) inClaim(sc *script) []func(rowScanner) error {
	if len(w.items) == 0 {
		return nil
	}
	return w.writes(sc, true)
}

// commitResults commits renews and items through resultWrite in a
// transaction of their own.
func (s *Store) commitResults(ctx context.Context, renews []renewCall, items []fastResult) error {
	return s.inScripts(ctx, func(c *scriptConn) error { return s.resultWrite(renews, items).commit(ctx, s, c) })
}

// fenceFacts is what completeSlow read under its locks about one result.
type fenceFacts struct {
	jobID, leaseEpoch int64
	sess              NodeSession
	digest            string
	// The attempt row of (job, lease epoch), if the lease was ever granted.
	attemptGranted bool
	attemptNode    int64
	hasReceipt     bool
	receipt        string
	// The node now.
	nodeRevoked bool
	nodeEpoch   int64
	// The submission's current job.
	current int64
	// The job now.
	state         JobState
	jobLeaseEpoch int64
	jobNode       sql.NullInt64
	jobSession    sql.NullInt64
	live          bool
}

// fenceResult is the fencing decision for a result (DESIGN §5), apart from
// the SQL so it can be tested as a table: nil and committed=false accept it;
// committed=true answers ALREADY_COMMITTED; otherwise the error says why it
// is refused. The receipt is checked before anything about expiry or
// ownership now, so a resent result of a committed lease always gets the
// same answer.
func fenceResult(f fenceFacts) (committed bool, err error) {
	switch {
	case !f.attemptGranted:
		return false, fmt.Errorf("job %d lease %d was never granted: %w", f.jobID, f.leaseEpoch, ErrLeaseLost)
	case f.attemptNode != f.sess.NodeID:
		return false, fmt.Errorf("job %d lease %d belongs to another node: %w", f.jobID, f.leaseEpoch, ErrLeaseLost)
	case f.hasReceipt && f.receipt == f.digest:
		return true, nil
	case f.hasReceipt:
		return false, fmt.Errorf("job %d lease %d: %w", f.jobID, f.leaseEpoch, ErrResultConflict)
	case f.nodeRevoked:
		return false, fmt.Errorf("node %d: %w", f.sess.NodeID, ErrNodeRevoked)
	case f.nodeEpoch != f.sess.SessionEpoch:
		return false, fmt.Errorf("node %d: %w", f.sess.NodeID, ErrSessionSuperseded)
	case f.state == StateCancelled && f.jobLeaseEpoch == f.leaseEpoch && f.current == f.jobID:
		return false, fmt.Errorf("job %d: %w", f.jobID, ErrJobCancelled)
	case f.current != f.jobID:
		return false, fmt.Errorf("job %d: %w", f.jobID, ErrSuperseded)
	case f.state != StateRunning || f.jobLeaseEpoch != f.leaseEpoch || !f.jobNode.Valid || f.jobNode.Int64 != f.sess.NodeID ||
		f.jobSession.Int64 != f.sess.SessionEpoch || !f.live:
		return false, fmt.Errorf("job %d lease %d: %w", f.jobID, f.leaseEpoch, ErrLeaseLost)
	}
	return false, nil
}

// completeSlow is the fallback of resultWrite: it takes the locks one by
// one in the documented order (doc.go) and answers every case: already
// committed, conflict, lost, cancelled, superseded, infrastructure errors,
// CHECK jobs.
func (s *Store) completeSlow(ctx context.Context, sess NodeSession, jobID, leaseEpoch int64, res Result, cases caseCounts, body []byte, digest string) (CompleteResponse, error) {
	var out CompleteResponse
	var requeuedPool string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		requeuedPool = ""
		j, err := lockResult(ctx, tx, sess, jobID, leaseEpoch)
		if err != nil {
			return err
		}
		committed, err := fenceResult(j.fence(sess, jobID, leaseEpoch, digest))
		if err != nil {
			return err
		}
		if committed {
			out = CompleteResponse{Disposition: AlreadyCommitted, JobState: j.state}
			return nil
		}
		out, requeuedPool, err = s.writeSlow(ctx, tx, sess, j, res, cases, body, digest)
		return err
	})
	if err == nil {
		s.notify(requeuedPool)
	}
	return out, err
}

// slowJob is what completeSlow reads under its locks.
type slowJob struct {
	id, leaseEpoch int64
	typ, sid       string
	nodeEpoch      int64
	revoked        bool
	state          JobState
	nodeID         sql.NullInt64
	sessionEpoch   sql.NullInt64
	jobLeaseEpoch  int64
	live           bool
	kind           JobKind
	pool           string
	generation     int
	attempts       int
	maxAttempts    int
	started        bool
	receipt        sql.NullString
	attemptNode    sql.NullInt64
	current        int64
}

// fence is what fenceResult decides on.
func (j slowJob) fence(sess NodeSession, jobID, leaseEpoch int64, digest string) fenceFacts {
	return fenceFacts{
		jobID: jobID, leaseEpoch: leaseEpoch, sess: sess, digest: digest,
		attemptGranted: j.attemptNode.Valid, attemptNode: j.attemptNode.Int64,
		hasReceipt: j.receipt.Valid, receipt: j.receipt.String,
		nodeRevoked: j.revoked, nodeEpoch: j.nodeEpoch, current: j.current,
		state: j.state, jobLeaseEpoch: j.jobLeaseEpoch, jobNode: j.nodeID, jobSession: j.sessionEpoch, live: j.live,
	}
}

// lockResult locks what a result of (jobID, leaseEpoch) needs, in the
// documented order: the node in share mode (it only has to hold still
// against a new session or a revoke, which take it exclusively; results of
// one node don't exclude each other), then the job with its attempt for
// the lease epoch in one locking read. The submission pointer is not
// needed: the current job is read after the job's lock.
func lockResult(ctx context.Context, tx *sql.Tx, sess NodeSession, jobID, leaseEpoch int64) (slowJob, error) {
	j := slowJob{id: jobID, leaseEpoch: leaseEpoch}
	err := tx.QueryRowContext(ctx,
		`SELECT submission_type, submission_id FROM judge_job WHERE id = ?`, jobID).Scan(&j.typ, &j.sid)
	if errors.Is(err, sql.ErrNoRows) {
		return j, fmt.Errorf("job %d: %w", jobID, ErrNotFound)
	}
	if err != nil {
		return j, fmt.Errorf("store: complete: %w", err)
	}
	err = tx.QueryRowContext(ctx,
		`SELECT session_epoch, revoked_at IS NOT NULL FROM judge_node WHERE id = ? LOCK IN SHARE MODE`, sess.NodeID).Scan(&j.nodeEpoch, &j.revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return j, fmt.Errorf("node %d: %w", sess.NodeID, ErrUnauthenticated)
	}
	if err != nil {
		return j, fmt.Errorf("store: complete: node: %w", err)
	}
	if err := tx.QueryRowContext(ctx,
		`SELECT j.state, j.node_id, j.session_epoch, j.lease_epoch, COALESCE(j.lease_until > NOW(6), FALSE), j.kind,
		        j.pool, j.generation, j.attempt_count, j.max_attempts, j.phase IS NOT NULL, a.receipt_digest, a.node_id
		 FROM judge_job j LEFT JOIN judge_job_attempt a ON a.job_id = j.id AND a.lease_epoch = ?
		 WHERE j.id = ? FOR UPDATE`, leaseEpoch, jobID).Scan(
		&j.state, &j.nodeID, &j.sessionEpoch, &j.jobLeaseEpoch, &j.live, &j.kind, &j.pool,
		&j.generation, &j.attempts, &j.maxAttempts, &j.started, &j.receipt, &j.attemptNode); err != nil {
		return j, fmt.Errorf("store: complete: job: %w", err)
	}
	// The submission's current job is its highest generation. A rejudge
	// locks the job it supersedes before it writes the next generation,
	// so with this job locked the answer cannot change under us.
	if err := tx.QueryRowContext(ctx,
		`SELECT id FROM judge_job WHERE submission_type = ? AND submission_id = ? ORDER BY generation DESC LIMIT 1`,
		j.typ, j.sid).Scan(&j.current); err != nil {
		return j, fmt.Errorf("store: complete: current generation: %w", err)
	}
	return j, nil
}

// writeSlow commits an accepted result of the locked job j: a verdict
// completes it; an infrastructure error requeues it with backoff while
// attempts remain (requeuedPool names its pool), else fails it.
func (s *Store) writeSlow(ctx context.Context, tx *sql.Tx, sess NodeSession, j slowJob, res Result, cases caseCounts, body []byte, digest string) (out CompleteResponse, requeuedPool string, err error) {
	ev := settlement{jobID: j.id, kind: j.kind, typ: j.typ, sid: j.sid, generation: j.generation, nodeID: sess.NodeID}
	if res.Outcome == OutcomeVerdict {
		// Job and attempt receipt in one statement.
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_job j JOIN judge_job_attempt a ON a.job_id = j.id AND a.lease_epoch = ?
			 SET j.state = 'COMPLETED', j.verdict = ?, j.result = ?, j.result_digest = ?, j.cases_done = ?, j.cases_total = ?,
			     j.status_version = j.status_version + 1, j.finished_at = NOW(6), j.updated_at = NOW(6),
			     j.lease_until = NULL,
			     a.outcome = 'COMPLETED', a.receipt_digest = ?, a.ended_at = NOW(6), a.judging_started = TRUE
			 WHERE j.id = ?`, j.leaseEpoch, res.Verdict.Status, body, digest, cases.done, cases.total, digest, j.id); err != nil {
			return out, "", fmt.Errorf("store: complete: job: %w", err)
		}
		ev.status, ev.result = res.Verdict.Status, body
		return CompleteResponse{Disposition: Accepted, JobState: StateCompleted}, "", settle(ctx, tx, ev)
	}
	// Infrastructure error: retry with backoff while attempts remain. A
	// result counts as an attempt whether or not judging started (the
	// node judged the job's inputs unusable, say); a node that only
	// cannot run it releases the lease instead.
	if err := closeAttempt(ctx, tx, j.id, j.leaseEpoch, "INFRA_ERROR", res.Error.Code, digest, j.started); err != nil {
		return out, "", err
	}
	if j.attempts < j.maxAttempts {
		if err := s.requeueLocked(ctx, tx, j.id, j.attempts, res.Error.Code); err != nil {
			return out, "", err
		}
		return CompleteResponse{Disposition: Accepted, JobState: StateQueued}, j.pool, bumpPool(ctx, tx, j.pool)
	}
	if err := failLocked(ctx, tx, j.id, res.Error.Code); err != nil {
		return out, "", err
	}
	ev.status, ev.errorCode = "SYSTEM_ERROR", res.Error.Code
	return CompleteResponse{Disposition: Accepted, JobState: StateFailed}, "", settle(ctx, tx, ev)
}

func closeAttempt(ctx context.Context, tx *sql.Tx, jobID, leaseEpoch int64, outcome, errClass, digest string, started bool) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_job_attempt SET outcome = ?, error_class = NULLIF(?, ''), receipt_digest = NULLIF(?, ''),
		   judging_started = ?, ended_at = NOW(6)
		 WHERE job_id = ? AND lease_epoch = ?`, outcome, errClass, digest, started, jobID, leaseEpoch); err != nil {
		return fmt.Errorf("store: close attempt: %w", err)
	}
	return nil
}

// requeueLocked returns a locked RUNNING job to QUEUED after a backoff.
func (s *Store) requeueLocked(ctx context.Context, tx *sql.Tx, jobID int64, attempts int, errCode string) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_job SET state = 'QUEUED', available_at = NOW(6) + INTERVAL ? MICROSECOND,
		   node_id = NULL, host_group_id = NULL, session_epoch = NULL, lease_until = NULL,
		   last_error_code = ?, status_version = status_version + 1, updated_at = NOW(6)
		 WHERE id = ?`, micros(s.backoff(attempts)), errCode, jobID); err != nil {
		return fmt.Errorf("store: requeue: %w", err)
	}
	return nil
}

func failLocked(ctx context.Context, tx *sql.Tx, jobID int64, errCode string) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_job SET state = 'FAILED', last_error_code = ?, lease_until = NULL,
		   status_version = status_version + 1, finished_at = NOW(6), updated_at = NOW(6)
		 WHERE id = ?`, errCode, jobID); err != nil {
		return fmt.Errorf("store: fail: %w", err)
	}
	return nil
}
