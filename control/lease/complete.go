package lease

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kece-oj/kece/control/internal/jobdb"
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
func (s *Engine) writeBatch(ctx context.Context, calls []*jobdb.BatchCall[leaseWrite, bool]) {
	var renews, results []*jobdb.BatchCall[leaseWrite, bool]
	seen := make(map[int64]bool)
	dup := false
	for _, c := range calls {
		if c.Req.renew != nil {
			renews = append(renews, c)
			for _, it := range c.Req.renew.items {
				dup = dup || seen[it.JobID]
				seen[it.JobID] = true
			}
			continue
		}
		results = append(results, c)
		dup = dup || seen[c.Req.result.jobID]
		seen[c.Req.result.jobID] = true
	}
	if len(renews) > 0 && len(results) > 0 && !dup {
		rs := make([]renewCall, len(renews))
		for i, c := range renews {
			rs[i] = *c.Req.renew
		}
		items := make([]fastResult, len(results))
		for i, c := range results {
			items[i] = *c.Req.result
		}
		slices.SortFunc(items, byJobID)
		if err := s.commitResults(ctx, rs, items); err == nil {
			s.db.Stats.Batches.Add(1)
			for _, c := range calls {
				c.Resp = true
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

// Complete records the result of a lease; see complete.
func (s *Engine) Complete(ctx context.Context, sess jobdb.NodeSession, jobID, leaseEpoch int64, res Result) (CompleteResponse, error) {
	return s.complete(ctx, sess, jobID, leaseEpoch, res)
}

// complete records the result of a lease. Fencing (DESIGN §5): if this
// (job, lease epoch) already has a receipt, the same digest answers
// ALREADY_COMMITTED and a different one ErrResultConflict — checked before
// anything about expiry. Otherwise the lease must still own a RUNNING job that
// is its submission's current job. Result, job state, attempt receipt and
// settlement event commit together.
func (s *Engine) complete(ctx context.Context, sess jobdb.NodeSession, jobID, leaseEpoch int64, res Result) (CompleteResponse, error) {
	p, err := s.prepareResult(ctx, sess, jobID, leaseEpoch, res)
	if err != nil {
		return CompleteResponse{}, err
	}
	return s.completePrepared(ctx, sess, jobID, leaseEpoch, res, p)
}

// completePrepared is complete after prepareResult: the lease writer for a
// fast result, completeSlow for the rest and for a fast one fenced out.
func (s *Engine) completePrepared(ctx context.Context, sess jobdb.NodeSession, jobID, leaseEpoch int64, res Result, p preparedResult) (CompleteResponse, error) {
	if p.fast != nil {
		done, err := s.writer.Do(ctx, leaseWrite{result: p.fast})
		if err != nil {
			return CompleteResponse{}, err
		}
		if done {
			return CompleteResponse{Disposition: Accepted, JobState: jobdb.StateCompleted}, nil
		}
	}
	return s.completeSlow(ctx, sess, jobID, leaseEpoch, res, p.cases, p.body, p.digest)
}

// errFenced says a fast completion's fencing did not hold for some item;
// nothing was written, and the slow path works out the answer.
var errFenced = errors.New("fast completion fenced out")

// completeFast commits one verdict alone; done is false when its fencing did
// not hold (nothing written).
func (s *Engine) completeFast(ctx context.Context, r fastResult) (done bool, err error) {
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
func (s *Engine) completeBatch(ctx context.Context, calls []*jobdb.BatchCall[leaseWrite, bool]) {
	seen := make(map[int64]bool, len(calls))
	var batch, alone []*jobdb.BatchCall[leaseWrite, bool]
	for _, c := range calls {
		if seen[c.Req.result.jobID] {
			alone = append(alone, c)
			continue
		}
		seen[c.Req.result.jobID] = true
		batch = append(batch, c)
	}
	if len(batch) > 1 {
		// Job-id order: batches lock their rows in one order.
		slices.SortFunc(batch, func(a, b *jobdb.BatchCall[leaseWrite, bool]) int {
			return cmp.Compare(a.Req.result.jobID, b.Req.result.jobID)
		})
		items := make([]fastResult, len(batch))
		for i, c := range batch {
			items[i] = *c.Req.result
		}
		if err := s.commitResults(ctx, nil, items); err == nil {
			s.db.Stats.Batches.Add(1)
			for _, c := range batch {
				c.Resp = true
			}
			batch = nil
		}
	}
	for _, c := range append(batch, alone...) {
		c.Resp, c.Err = s.completeFast(ctx, *c.Req.result)
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

func (s *Engine) resultWrite(renews []renewCall, items []fastResult) *resultWrite {
	return &resultWrite{ttl: s.db.Cfg.LeaseTTL, renews: renews, items: items}
}

// writes adds the job and attempt UPDATEs to sc; counted adds a row-count
// read after each (for a script that also reads rows).
func (w *resultWrite) writes(sc *jobdb.Script, counted bool) []func(jobdb.RowScanner) error {
	jq, jargs, want := leaseUpdate(w.ttl, w.renews, w.items)
	w.want = want
	aq, aargs := attemptReceipts(w.items)
	if !counted {
		sc.Exec(jq, jargs...).Exec(aq, aargs...)
		return nil
	}
	sc.Exec(jq, jargs...).Rows(`SELECT ROW_COUNT()`).Exec(aq, aargs...).Rows(`SELECT ROW_COUNT()`)
	return []func(jobdb.RowScanner) error{
		func(r jobdb.RowScanner) error { return r.Scan(&w.jobs) },
		func(r jobdb.RowScanner) error { return r.Scan(&w.attempts) },
	}
}

// held reports whether every fence held (true when there is nothing to write).
func (w *resultWrite) held() bool {
	return len(w.items) == 0 || (w.jobs == int64(w.want) && w.attempts == int64(len(w.items)))
}

// events adds the results' settlement events to sc (nothing when there are
// no results).
func (w *resultWrite) events(sc *jobdb.Script) error {
	if len(w.items) == 0 {
		return nil
	}
	q, qargs, err := jobdb.SettlementSQL(settlementRows(w.items))
	if err != nil {
		return err
	}
	sc.Exec(q, qargs...)
	return nil
}

// commit runs w (at least one result) as a transaction on c in two round
// trips: (begin, the writes) with each statement's row count, then (the
// events, commit). A fence that did not hold returns errFenced, and
// inScripts rolls back.
func (w *resultWrite) commit(ctx context.Context, s *Engine, c *jobdb.ScriptConn) error {
	sc := s.db.Begin(&jobdb.Script{})
	w.writes(sc, false)
	n, err := c.Counts(ctx, sc)
	if err != nil {
		return fmt.Errorf("store: complete: %w", err)
	}
	if len(n) < 2 {
		return errFenced
	}
	if w.jobs, w.attempts = n[len(n)-2], n[len(n)-1]; !w.held() {
		return errFenced
	}
	sc = &jobdb.Script{}
	if err := w.events(sc); err != nil {
		return err
	}
	if err := c.Send(ctx, sc.Exec(`COMMIT`)); err != nil {
		return fmt.Errorf("store: complete: settle: %w", err)
	}
	return nil
}

// inClaim stages w in a claim transaction's first round trip, after its
// host-group and node locks; the reads it returns fill in the row counts.
func (w *resultWrite) inClaim(sc *jobdb.Script) []func(jobdb.RowScanner) error {
	if len(w.items) == 0 {
		return nil
	}
	return w.writes(sc, true)
}

// commitResults commits renews and items through resultWrite in a
// transaction of their own.
func (s *Engine) commitResults(ctx context.Context, renews []renewCall, items []fastResult) error {
	return s.db.InScripts(ctx, func(c *jobdb.ScriptConn) error { return s.resultWrite(renews, items).commit(ctx, s, c) })
}

// fenceFacts is what completeSlow read under its locks about one result.
type fenceFacts struct {
	jobID, leaseEpoch int64
	sess              jobdb.NodeSession
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
	state         jobdb.JobState
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
		return false, fmt.Errorf("job %d lease %d was never granted: %w", f.jobID, f.leaseEpoch, jobdb.ErrLeaseLost)
	case f.attemptNode != f.sess.NodeID:
		return false, fmt.Errorf("job %d lease %d belongs to another node: %w", f.jobID, f.leaseEpoch, jobdb.ErrLeaseLost)
	case f.hasReceipt && f.receipt == f.digest:
		return true, nil
	case f.hasReceipt:
		return false, fmt.Errorf("job %d lease %d: %w", f.jobID, f.leaseEpoch, jobdb.ErrResultConflict)
	case f.nodeRevoked:
		return false, fmt.Errorf("node %d: %w", f.sess.NodeID, jobdb.ErrNodeRevoked)
	case f.nodeEpoch != f.sess.SessionEpoch:
		return false, fmt.Errorf("node %d: %w", f.sess.NodeID, jobdb.ErrSessionSuperseded)
	case f.state == jobdb.StateCancelled && f.jobLeaseEpoch == f.leaseEpoch && f.current == f.jobID:
		return false, fmt.Errorf("job %d: %w", f.jobID, jobdb.ErrJobCancelled)
	case f.current != f.jobID:
		return false, fmt.Errorf("job %d: %w", f.jobID, jobdb.ErrSuperseded)
	case f.state != jobdb.StateRunning || f.jobLeaseEpoch != f.leaseEpoch || !f.jobNode.Valid || f.jobNode.Int64 != f.sess.NodeID ||
		f.jobSession.Int64 != f.sess.SessionEpoch || !f.live:
		return false, fmt.Errorf("job %d lease %d: %w", f.jobID, f.leaseEpoch, jobdb.ErrLeaseLost)
	}
	return false, nil
}

// completeSlow is the fallback of resultWrite: it takes the locks one by
// one in the documented order (control/store/doc.go) and answers every
// case: already committed, conflict, lost, cancelled, superseded,
// infrastructure errors, CHECK jobs.
func (s *Engine) completeSlow(ctx context.Context, sess jobdb.NodeSession, jobID, leaseEpoch int64, res Result, cases caseCounts, body []byte, digest string) (CompleteResponse, error) {
	var out CompleteResponse
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
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
		out, err = s.writeSlow(ctx, tx, sess, j, res, cases, body, digest)
		return err
	})
	return out, err
}

// slowJob is what completeSlow reads under its locks.
type slowJob struct {
	id, leaseEpoch int64
	typ, sid       string
	nodeEpoch      int64
	revoked        bool
	state          jobdb.JobState
	nodeID         sql.NullInt64
	sessionEpoch   sql.NullInt64
	jobLeaseEpoch  int64
	live           bool
	kind           jobdb.JobKind
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
func (j slowJob) fence(sess jobdb.NodeSession, jobID, leaseEpoch int64, digest string) fenceFacts {
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
func lockResult(ctx context.Context, tx *sql.Tx, sess jobdb.NodeSession, jobID, leaseEpoch int64) (slowJob, error) {
	j := slowJob{id: jobID, leaseEpoch: leaseEpoch}
	err := tx.QueryRowContext(ctx,
		`SELECT submission_type, submission_id FROM judge_job WHERE id = ?`, jobID).Scan(&j.typ, &j.sid)
	if errors.Is(err, sql.ErrNoRows) {
		return j, fmt.Errorf("job %d: %w", jobID, jobdb.ErrNotFound)
	}
	if err != nil {
		return j, fmt.Errorf("store: complete: %w", err)
	}
	err = tx.QueryRowContext(ctx,
		`SELECT session_epoch, revoked_at IS NOT NULL FROM judge_node WHERE id = ? LOCK IN SHARE MODE`, sess.NodeID).Scan(&j.nodeEpoch, &j.revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return j, fmt.Errorf("node %d: %w", sess.NodeID, jobdb.ErrUnauthenticated)
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
func (s *Engine) writeSlow(ctx context.Context, tx *sql.Tx, sess jobdb.NodeSession, j slowJob, res Result, cases caseCounts, body []byte, digest string) (out CompleteResponse, err error) {
	ev := jobdb.Settlement{JobID: j.id, Kind: j.kind, Typ: j.typ, Sid: j.sid, Generation: j.generation, NodeID: sess.NodeID}
	phases, err := res.phasesJSON()
	if err != nil {
		return out, err
	}
	if res.Outcome == OutcomeVerdict {
		// Job and attempt receipt in one statement.
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_job j JOIN judge_job_attempt a ON a.job_id = j.id AND a.lease_epoch = ?
			 SET j.state = 'COMPLETED', j.verdict = ?, j.result = ?, j.result_digest = ?, j.cases_done = ?, j.cases_total = ?,
			     j.status_version = j.status_version + 1, j.finished_at = NOW(6), j.updated_at = NOW(6),
			     j.lease_until = NULL,
			     a.outcome = 'COMPLETED', a.receipt_digest = ?, a.ended_at = NOW(6), a.judging_started = TRUE, a.phases = ?
			 WHERE j.id = ?`, j.leaseEpoch, res.Verdict.Status, body, digest, cases.done, cases.total, digest, phases, j.id); err != nil {
			return out, fmt.Errorf("store: complete: job: %w", err)
		}
		ev.Status, ev.Result = res.Verdict.Status, body
		return CompleteResponse{Disposition: Accepted, JobState: jobdb.StateCompleted}, jobdb.Settle(ctx, tx, ev)
	}
	// Infrastructure error: retry with backoff while attempts remain. A
	// result counts as an attempt whether or not judging started (the
	// node judged the job's inputs unusable, say); a node that only
	// cannot run it releases the lease instead.
	if err := closeAttempt(ctx, tx, j.id, j.leaseEpoch, "INFRA_ERROR", res.Error.Code, digest, j.started, phases); err != nil {
		return out, err
	}
	if j.attempts < j.maxAttempts {
		if err := s.requeueLocked(ctx, tx, j.id, j.attempts, res.Error.Code); err != nil {
			return out, err
		}
		return CompleteResponse{Disposition: Accepted, JobState: jobdb.StateQueued}, jobdb.BumpPool(ctx, tx, j.pool)
	}
	if err := failLocked(ctx, tx, j.id, res.Error.Code); err != nil {
		return out, err
	}
	ev.Status, ev.ErrorCode = "SYSTEM_ERROR", res.Error.Code
	return CompleteResponse{Disposition: Accepted, JobState: jobdb.StateFailed}, jobdb.Settle(ctx, tx, ev)
}

// closeAttempt ends an attempt; phases (nil: none) are its node's timings,
// when a result ends it.
func closeAttempt(ctx context.Context, tx *sql.Tx, jobID, leaseEpoch int64, outcome, errClass, digest string, started bool, phases []byte) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_job_attempt SET outcome = ?, error_class = NULLIF(?, ''), receipt_digest = NULLIF(?, ''),
		   judging_started = ?, ended_at = NOW(6), phases = ?
		 WHERE job_id = ? AND lease_epoch = ?`, outcome, errClass, digest, started, phases, jobID, leaseEpoch); err != nil {
		return fmt.Errorf("store: close attempt: %w", err)
	}
	return nil
}

// requeueLocked returns a locked RUNNING job to QUEUED after a backoff.
func (s *Engine) requeueLocked(ctx context.Context, tx *sql.Tx, jobID int64, attempts int, errCode string) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_job SET state = 'QUEUED', available_at = NOW(6) + INTERVAL ? MICROSECOND,
		   node_id = NULL, host_group_id = NULL, session_epoch = NULL, lease_until = NULL,
		   last_error_code = ?, status_version = status_version + 1, updated_at = NOW(6)
		 WHERE id = ?`, jobdb.Micros(s.db.Backoff(attempts)), errCode, jobID); err != nil {
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

// caseColumn builds `col = CASE id WHEN ? THEN … ELSE col END`, one WHEN per
// job.
type caseColumn struct {
	text strings.Builder
	args []any
}

func (c *caseColumn) when(id int64, then string, args ...any) {
	c.text.WriteString(" WHEN ? THEN " + then)
	c.args = append(append(c.args, id), args...)
}

// set appends the assignment (none when no job has a WHEN) to sets/args.
func (c *caseColumn) set(col string, sets *[]string, args *[]any) { c.setOn("id", col, sets, args) }

// setOn is set for a table whose job id column is key.
func (c *caseColumn) setOn(key, col string, sets *[]string, args *[]any) {
	if len(c.args) == 0 {
		return
	}
	*sets = append(*sets, col+" = CASE "+key+c.text.String()+" ELSE "+col+" END")
	*args = append(*args, c.args...)
}

// leaseUpdate is the one UPDATE of judge_job that extends the leases of
// renews (with their progress) and completes the jobs of results; n is how
// many rows it changes when every item's fence holds. The jobs must be
// distinct. Every item is fenced alike: its (job, lease epoch, node,
// session) in the row constructor, RUNNING, unexpired, and its node's
// session current and not revoked. The node fence is a single-table
// subquery on purpose: under READ COMMITTED InnoDB reads it without locks,
// where a multi-table UPDATE would share-lock every node row of the batch
// and queue behind those nodes' claims. No fence reads the submission: a
// job that is not its submission's current one is never RUNNING (a
// rejudge cancels the job it supersedes in the transaction that makes the
// new generation, under that job's lock), so state = 'RUNNING' covers it.
//
// Single-table UPDATE assignments run left to right, so progress_seq is set
// after the renewals' IF()s that compare against the stored value, and
// status_version (the business sees COMPILING → JUDGING as a status change)
// before phase. id IN (…) in ascending order lets the optimizer use the
// primary key whatever it does with the row constructor, and locks the rows
// in one order.
func leaseUpdate(ttl time.Duration, renews []renewCall, results []fastResult) (q string, args []any, n int) {
	var state, verdict, result, digest, version, phase, done, total, seq, finished, lease caseColumn
	var fence strings.Builder
	var fa []any
	var ids []int64
	guard := func(id, epoch int64, sess jobdb.NodeSession) {
		if len(ids) > 0 {
			fence.WriteString(", ")
		}
		fence.WriteString("(?, ?, ?, ?)")
		fa = append(fa, id, epoch, sess.NodeID, sess.SessionEpoch)
		ids = append(ids, id)
	}
	for _, r := range results {
		state.when(r.jobID, "'COMPLETED'")
		verdict.when(r.jobID, "?", r.status)
		result.when(r.jobID, "?", r.body)
		digest.when(r.jobID, "?", r.digest)
		version.when(r.jobID, "status_version + 1")
		done.when(r.jobID, "?", r.cases.done)
		total.when(r.jobID, "?", r.cases.total)
		finished.when(r.jobID, "NOW(6)")
		lease.when(r.jobID, "NULL")
		guard(r.jobID, r.leaseEpoch, r.sess)
	}
	for _, c := range renews {
		for _, it := range c.items {
			version.when(it.JobID, "status_version + IF(? > progress_seq AND ? <> '' AND ? <> COALESCE(phase, 'COMPILING'), 1, 0)",
				it.ProgressSeq, it.Phase, it.Phase)
			phase.when(it.JobID, "IF(? > progress_seq AND ? <> '', ?, phase)", it.ProgressSeq, it.Phase, it.Phase)
			done.when(it.JobID, "IF(? > progress_seq, GREATEST(cases_done, ?), cases_done)", it.ProgressSeq, it.CasesDone)
			total.when(it.JobID, "IF(? > progress_seq, ?, cases_total)", it.ProgressSeq, it.CasesTotal)
			seq.when(it.JobID, "GREATEST(progress_seq, ?)", it.ProgressSeq)
			guard(it.JobID, it.LeaseEpoch, c.sess)
		}
	}
	var sets []string
	state.set("state", &sets, &args)
	verdict.set("verdict", &sets, &args)
	result.set("result", &sets, &args)
	digest.set("result_digest", &sets, &args)
	version.set("status_version", &sets, &args)
	phase.set("phase", &sets, &args)
	done.set("cases_done", &sets, &args)
	total.set("cases_total", &sets, &args)
	seq.set("progress_seq", &sets, &args)
	finished.set("finished_at", &sets, &args)
	switch {
	case len(renews) == 0:
		sets = append(sets, "lease_until = NULL")
	case len(results) == 0:
		sets = append(sets, "lease_until = NOW(6) + INTERVAL ? MICROSECOND")
		args = append(args, jobdb.Micros(ttl))
	default:
		sets = append(sets, "lease_until = CASE id"+lease.text.String()+" ELSE NOW(6) + INTERVAL ? MICROSECOND END")
		args = append(append(args, lease.args...), jobdb.Micros(ttl))
	}
	sets = append(sets, "updated_at = NOW(6)")
	slices.Sort(ids)
	idList, idArgs := jobdb.InList(ids)
	q = `UPDATE judge_job SET ` + strings.Join(sets, ",\n   ") + `
	 WHERE id IN (` + idList + `) AND (id, lease_epoch, node_id, session_epoch) IN (` + fence.String() + `)
	   AND state = 'RUNNING' AND lease_until > NOW(6)
	   AND EXISTS (SELECT 1 FROM judge_node n
	               WHERE n.id = judge_job.node_id AND n.session_epoch = judge_job.session_epoch AND n.revoked_at IS NULL)`
	return q, append(append(args, idArgs...), fa...), len(ids)
}

// attemptReceipts is the UPDATE that closes the attempts of results
// (distinct jobs) with their receipts. The job left RUNNING for exactly
// these lease epochs, so their attempts have no receipt yet; the IS NULL is
// a belt to the fence.
func attemptReceipts(items []fastResult) (string, []any) {
	var digest, attempts strings.Builder
	var phases caseColumn
	var da, aa []any
	ids := make([]int64, len(items))
	for i, r := range items {
		digest.WriteString(" WHEN ? THEN ?")
		da = append(da, r.jobID, r.digest)
		if r.phases != nil {
			phases.when(r.jobID, "?", r.phases)
		}
		if i > 0 {
			attempts.WriteString(", ")
		}
		attempts.WriteString("(?, ?)")
		aa = append(aa, r.jobID, r.leaseEpoch)
		ids[i] = r.jobID
	}
	in, idArgs := jobdb.InList(ids)
	// The phases column only when some node sent phases: a batch without
	// them is the statement it was before.
	var sets []string
	phases.setOn("job_id", "phases", &sets, &da)
	return `UPDATE judge_job_attempt SET outcome = 'COMPLETED', receipt_digest = CASE job_id` + digest.String() + ` END,
		   ended_at = NOW(6), judging_started = TRUE` + strings.Join(append([]string{""}, sets...), ", ") + `
		 WHERE job_id IN (` + in + `) AND (job_id, lease_epoch) IN (` + attempts.String() + `) AND receipt_digest IS NULL`,
		append(append(da, idArgs...), aa...)
}

// settlementRows are the settlement events of results.
func settlementRows(items []fastResult) []jobdb.SettlementRow {
	evs := make([]jobdb.SettlementRow, len(items))
	for i, r := range items {
		evs[i] = jobdb.SettlementRow{JobID: r.jobID, Typ: r.f.typ, Sid: r.f.sid, Generation: r.f.generation, Payload: r.payload}
	}
	return evs
}
