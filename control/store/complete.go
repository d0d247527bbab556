package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kece-oj/kece/control/manifest"
)

// Outcome says whether a result is a user verdict or an infrastructure error.
type Outcome string

// Result outcomes.
const (
	OutcomeVerdict Outcome = "VERDICT"
	OutcomeError   Outcome = "ERROR"
)

// Result is what a node posts for its lease. Its canonical JSON is the
// normalized form whose digest decides ALREADY_COMMITTED vs conflict.
type Result struct {
	Outcome Outcome        `json:"outcome"`
	Verdict *VerdictResult `json:"verdict,omitempty"`
	Error   *ErrorResult   `json:"error,omitempty"`
}

// VerdictResult is a user outcome with per-case detail.
type VerdictResult struct {
	Status     string       `json:"status"`
	Score      int64        `json:"score"`
	MaxScore   int64        `json:"maxScore"`
	CompileLog string       `json:"compileLog,omitempty"`
	Message    string       `json:"message,omitempty"`
	Cases      []CaseResult `json:"cases,omitempty"`
}

// CaseResult is one case of a verdict.
type CaseResult struct {
	CaseID   string `json:"caseId"`
	Status   string `json:"status"`
	Score    int64  `json:"score"`
	TimeMs   int64  `json:"timeMs"`
	WallMs   int64  `json:"wallMs"`
	MemoryKb int64  `json:"memoryKb"`
	ExitCode int    `json:"exitCode"`
	Signal   int    `json:"signal"`
	Message  string `json:"message,omitempty"`
}

// ErrorResult is an infrastructure failure reported by the node.
type ErrorResult struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// Disposition answers an accepted result post.
type Disposition string

// Dispositions.
const (
	Accepted         Disposition = "ACCEPTED"
	AlreadyCommitted Disposition = "ALREADY_COMMITTED"
)

// CompleteResponse tells the node what happened and the job's state now.
type CompleteResponse struct {
	Disposition Disposition
	JobState    JobState
}

var verdictStatuses = map[string]bool{"AC": true, "WA": true, "TLE": true, "MLE": true, "OLE": true, "RE": true, "CE": true}

// Normalize returns the canonical JSON and its SHA-256.
func (r Result) Normalize() ([]byte, string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, "", fmt.Errorf("store: result: %w", err)
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:]), nil
}

func (r Result) validateShape() error {
	switch r.Outcome {
	case OutcomeVerdict:
		if r.Verdict == nil || r.Error != nil {
			return invalid("result", "a VERDICT result has a verdict and no error")
		}
		if !verdictStatuses[r.Verdict.Status] {
			return invalid("verdict.status", "unknown verdict %q", r.Verdict.Status)
		}
		if len(r.Verdict.CompileLog) > manifest.MaxLogBytes {
			return invalid("verdict.compileLog", "is %d bytes, above %d", len(r.Verdict.CompileLog), manifest.MaxLogBytes)
		}
		if len(r.Verdict.Message) > manifest.MaxMessageBytes {
			return invalid("verdict.message", "is above %d bytes", manifest.MaxMessageBytes)
		}
	case OutcomeError:
		if r.Error == nil || r.Verdict != nil || r.Error.Code == "" {
			return invalid("result", "an ERROR result has an error code and no verdict")
		}
		if len(r.Error.Message) > manifest.MaxMessageBytes {
			return invalid("error.message", "is above %d bytes", manifest.MaxMessageBytes)
		}
	default:
		return invalid("outcome", "must be VERDICT or ERROR")
	}
	return nil
}

// checkAgainst validates a verdict against the job's manifest: case ids and
// count, per-case and total score range, log sizes.
func checkAgainst(m manifest.Manifest, v VerdictResult) error {
	if m.Kind == manifest.KindSQL {
		if v.Score < 0 || v.Score > v.MaxScore {
			return invalid("verdict.score", "must be 0..maxScore")
		}
		return nil
	}
	if v.MaxScore != m.MaxScore() {
		return invalid("verdict.maxScore", "is %d, the manifest's weights sum to %d", v.MaxScore, m.MaxScore())
	}
	if v.Status == "CE" && len(v.Cases) == 0 {
		if v.Score != 0 {
			return invalid("verdict.score", "a compile error scores 0")
		}
		return nil
	}
	// Judging may stop at the first failing case, so a failing verdict may
	// list fewer cases; an accepted one lists them all.
	if len(v.Cases) > len(m.Cases) || (v.Status == "AC" && len(v.Cases) != len(m.Cases)) || len(v.Cases) == 0 {
		return invalid("verdict.cases", "has %d cases, the manifest has %d", len(v.Cases), len(m.Cases))
	}
	weights := make(map[string]int64, len(m.Cases))
	for _, c := range m.Cases {
		weights[c.CaseID] = c.Weight
	}
	var total int64
	for i, c := range v.Cases {
		w, ok := weights[c.CaseID]
		if !ok {
			return invalid(fmt.Sprintf("verdict.cases[%d].caseId", i), "%q is not a case of the manifest (or repeats)", c.CaseID)
		}
		delete(weights, c.CaseID)
		if !verdictStatuses[c.Status] {
			return invalid(fmt.Sprintf("verdict.cases[%d].status", i), "unknown status %q", c.Status)
		}
		if c.Score < 0 || c.Score > w {
			return invalid(fmt.Sprintf("verdict.cases[%d].score", i), "must be 0..%d", w)
		}
		if len(c.Message) > manifest.MaxMessageBytes {
			return invalid(fmt.Sprintf("verdict.cases[%d].message", i), "is above %d bytes", manifest.MaxMessageBytes)
		}
		total += c.Score
	}
	if total != v.Score {
		return invalid("verdict.score", "is %d, the cases add up to %d", v.Score, total)
	}
	return nil
}

// complete records the result of a lease. Fencing (DESIGN §5): if this
// (job, lease epoch) already has a receipt, the same digest answers
// ALREADY_COMMITTED and a different one ErrResultConflict — checked before
// anything about expiry. Otherwise the lease must still own a RUNNING job that
// is its submission's current job. Result, job state, attempt receipt and
// settlement event commit together.
func (s *Store) complete(ctx context.Context, sess NodeSession, jobID, leaseEpoch int64, res Result) (CompleteResponse, error) {
	if err := res.validateShape(); err != nil {
		return CompleteResponse{}, err
	}
	body, digest, err := res.Normalize()
	if err != nil {
		return CompleteResponse{}, err
	}
	if len(body) > s.cfg.MaxResultBytes {
		return CompleteResponse{}, invalid("result", "is %d bytes, above %d", len(body), s.cfg.MaxResultBytes)
	}
	facts, err := s.jobFacts(ctx, jobID)
	if err != nil {
		return CompleteResponse{}, err
	}
	if res.Outcome == OutcomeVerdict {
		// Validate before anything is written (manifests are immutable).
		m, err := s.Manifest(ctx, facts.manifestID)
		if err != nil {
			return CompleteResponse{}, err
		}
		if err := checkAgainst(m, *res.Verdict); err != nil {
			return CompleteResponse{}, err
		}
		if facts.kind == KindSubmission {
			out, done, err := s.completeFast(ctx, sess, jobID, leaseEpoch, facts, res, body, digest)
			if err != nil || done {
				return out, err
			}
		}
	}
	return s.completeSlow(ctx, sess, jobID, leaseEpoch, res, body, digest)
}

// jobFacts are the fields of a job that never change after enqueue.
type jobFacts struct {
	typ, sid   string
	manifestID int64
	kind       JobKind
	pool       string
	generation int
}

func (s *Store) jobFacts(ctx context.Context, jobID int64) (jobFacts, error) {
	if f, ok := s.facts.get(jobID); ok {
		return f, nil
	}
	var f jobFacts
	err := s.db.QueryRowContext(ctx,
		`SELECT submission_type, submission_id, manifest_id, kind, pool, generation FROM judge_job WHERE id = ?`, jobID).Scan(
		&f.typ, &f.sid, &f.manifestID, &f.kind, &f.pool, &f.generation)
	if errors.Is(err, sql.ErrNoRows) {
		return f, fmt.Errorf("job %d: %w", jobID, ErrNotFound)
	}
	if err != nil {
		return f, fmt.Errorf("store: complete: %w", err)
	}
	s.facts.put(jobID, f)
	return f, nil
}

// completeFast commits the common case — a verdict for a live lease of a
// business job — as one fenced UPDATE of job and attempt plus the event
// insert. Every fencing condition of completeSlow is in the WHERE clause;
// when any fails nothing is written and done is false, and the slow path
// works out which answer applies.
func (s *Store) completeFast(ctx context.Context, sess NodeSession, jobID, leaseEpoch int64, f jobFacts, res Result, body []byte, digest string) (CompleteResponse, bool, error) {
	payload, err := json.Marshal(SettlementPayload{JobID: fmt.Sprint(jobID), SubmissionType: f.typ, SubmissionID: f.sid,
		Generation: f.generation, Status: res.Verdict.Status, Result: body})
	if err != nil {
		return CompleteResponse{}, false, fmt.Errorf("store: settle: %w", err)
	}
	var done bool
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx,
			`UPDATE judge_job j JOIN judge_job_attempt a ON a.job_id = j.id AND a.lease_epoch = j.lease_epoch
			 SET j.state = 'COMPLETED', j.verdict = ?, j.result = ?, j.result_digest = ?,
			     j.status_version = j.status_version + 1, j.finished_at = NOW(6), j.updated_at = NOW(6),
			     j.lease_until = NULL, a.outcome = 'COMPLETED', a.receipt_digest = ?, a.ended_at = NOW(6)
			 WHERE j.id = ? AND j.state = 'RUNNING' AND j.node_id = ? AND j.session_epoch = ? AND j.lease_epoch = ?
			   AND j.lease_until > NOW(6) AND a.receipt_digest IS NULL
			   AND EXISTS (SELECT 1 FROM judge_node n WHERE n.id = ? AND n.session_epoch = ? AND n.revoked_at IS NULL)
			   AND EXISTS (SELECT 1 FROM judge_submission p
			               WHERE p.submission_type = ? AND p.submission_id = ? AND p.current_job_id = ?)`,
			res.Verdict.Status, body, digest, digest,
			jobID, sess.NodeID, sess.SessionEpoch, leaseEpoch,
			sess.NodeID, sess.SessionEpoch,
			f.typ, f.sid, jobID)
		if err != nil {
			return fmt.Errorf("store: complete: %w", err)
		}
		if n, _ := r.RowsAffected(); n == 0 {
			done = false
			return nil
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO judge_settlement_event (job_id, event_type, submission_type, submission_id, generation, payload)
			 VALUES (?, ?, ?, ?, ?, ?)`, jobID, SettledEventType, f.typ, f.sid, f.generation, payload); err != nil {
			return fmt.Errorf("store: settle: %w", err)
		}
		done = true
		return nil
	})
	if err != nil || !done {
		return CompleteResponse{}, false, err
	}
	return CompleteResponse{Disposition: Accepted, JobState: StateCompleted}, true, nil
}

// completeSlow takes the locks one by one in the documented order and
// answers every case: already committed, conflict, lost, cancelled,
// superseded, infrastructure errors, CHECK jobs.
func (s *Store) completeSlow(ctx context.Context, sess NodeSession, jobID, leaseEpoch int64, res Result, body []byte, digest string) (CompleteResponse, error) {
	var out CompleteResponse
	var requeuedPool string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		requeuedPool = ""
		var typ, sid string
		var manifestID int64
		err := tx.QueryRowContext(ctx,
			`SELECT submission_type, submission_id, manifest_id FROM judge_job WHERE id = ?`, jobID).Scan(&typ, &sid, &manifestID)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("job %d: %w", jobID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: complete: %w", err)
		}
		// Lock order: node → pointer → job → attempt. The node is locked in
		// share mode: it only has to hold still against a new session or a
		// revoke (which take it exclusively); results of one node don't
		// exclude each other.
		var nodeEpoch int64
		var revoked bool
		err = tx.QueryRowContext(ctx,
			`SELECT session_epoch, revoked_at IS NOT NULL FROM judge_node WHERE id = ? LOCK IN SHARE MODE`, sess.NodeID).Scan(&nodeEpoch, &revoked)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("node %d: %w", sess.NodeID, ErrUnauthenticated)
		}
		if err != nil {
			return fmt.Errorf("store: complete: node: %w", err)
		}
		var current int64
		if err := tx.QueryRowContext(ctx,
			`SELECT current_job_id FROM judge_submission WHERE submission_type = ? AND submission_id = ? FOR UPDATE`,
			typ, sid).Scan(&current); err != nil {
			return fmt.Errorf("store: complete: pointer: %w", err)
		}
		var j struct {
			state        JobState
			nodeID       sql.NullInt64
			sessionEpoch sql.NullInt64
			leaseEpoch   int64
			live         bool
			kind         JobKind
			pool         string
			generation   int
			attempts     int
			maxAttempts  int
		}
		// Job, then its attempt for this lease epoch, in one locking read
		// (job → attempt is the lock order).
		var receipt sql.NullString
		var attemptNode sql.NullInt64
		if err := tx.QueryRowContext(ctx,
			`SELECT j.state, j.node_id, j.session_epoch, j.lease_epoch, COALESCE(j.lease_until > NOW(6), FALSE), j.kind,
			        j.pool, j.generation, j.attempt_count, j.max_attempts, a.receipt_digest, a.node_id
			 FROM judge_job j LEFT JOIN judge_job_attempt a ON a.job_id = j.id AND a.lease_epoch = ?
			 WHERE j.id = ? FOR UPDATE`, leaseEpoch, jobID).Scan(
			&j.state, &j.nodeID, &j.sessionEpoch, &j.leaseEpoch, &j.live, &j.kind, &j.pool,
			&j.generation, &j.attempts, &j.maxAttempts, &receipt, &attemptNode); err != nil {
			return fmt.Errorf("store: complete: job: %w", err)
		}
		if !attemptNode.Valid {
			return fmt.Errorf("job %d lease %d was never granted: %w", jobID, leaseEpoch, ErrLeaseLost)
		}
		if attemptNode.Int64 != sess.NodeID {
			return fmt.Errorf("job %d lease %d belongs to another node: %w", jobID, leaseEpoch, ErrLeaseLost)
		}
		if receipt.Valid {
			if receipt.String == digest {
				out = CompleteResponse{Disposition: AlreadyCommitted, JobState: j.state}
				return nil
			}
			return fmt.Errorf("job %d lease %d: %w", jobID, leaseEpoch, ErrResultConflict)
		}
		switch {
		case revoked:
			return fmt.Errorf("node %d: %w", sess.NodeID, ErrNodeRevoked)
		case nodeEpoch != sess.SessionEpoch:
			return fmt.Errorf("node %d: %w", sess.NodeID, ErrSessionSuperseded)
		case j.state == StateCancelled && j.leaseEpoch == leaseEpoch:
			if current != jobID {
				return fmt.Errorf("job %d: %w", jobID, ErrSuperseded)
			}
			return fmt.Errorf("job %d: %w", jobID, ErrJobCancelled)
		case current != jobID:
			return fmt.Errorf("job %d: %w", jobID, ErrSuperseded)
		case j.state != StateRunning || j.leaseEpoch != leaseEpoch || !j.nodeID.Valid || j.nodeID.Int64 != sess.NodeID ||
			j.sessionEpoch.Int64 != sess.SessionEpoch || !j.live:
			return fmt.Errorf("job %d lease %d: %w", jobID, leaseEpoch, ErrLeaseLost)
		}
		if res.Outcome == OutcomeVerdict {
			// Job and attempt receipt in one statement.
			if _, err := tx.ExecContext(ctx,
				`UPDATE judge_job j JOIN judge_job_attempt a ON a.job_id = j.id AND a.lease_epoch = ?
				 SET j.state = 'COMPLETED', j.verdict = ?, j.result = ?, j.result_digest = ?,
				     j.status_version = j.status_version + 1, j.finished_at = NOW(6), j.updated_at = NOW(6),
				     j.lease_until = NULL,
				     a.outcome = 'COMPLETED', a.receipt_digest = ?, a.ended_at = NOW(6)
				 WHERE j.id = ?`, leaseEpoch, res.Verdict.Status, body, digest, digest, jobID); err != nil {
				return fmt.Errorf("store: complete: job: %w", err)
			}
			out = CompleteResponse{Disposition: Accepted, JobState: StateCompleted}
			return settle(ctx, tx, settlement{jobID: jobID, kind: j.kind, typ: typ, sid: sid, generation: j.generation,
				status: res.Verdict.Status, result: body, nodeID: sess.NodeID})
		}
		// Infrastructure error: retry with backoff while attempts remain.
		if err := closeAttempt(ctx, tx, jobID, leaseEpoch, "INFRA_ERROR", res.Error.Code, digest); err != nil {
			return err
		}
		if j.attempts < j.maxAttempts {
			if err := s.requeueLocked(ctx, tx, jobID, j.attempts, res.Error.Code); err != nil {
				return err
			}
			out = CompleteResponse{Disposition: Accepted, JobState: StateQueued}
			requeuedPool = j.pool
			return bumpPool(ctx, tx, j.pool)
		}
		if err := failLocked(ctx, tx, jobID, res.Error.Code); err != nil {
			return err
		}
		out = CompleteResponse{Disposition: Accepted, JobState: StateFailed}
		return settle(ctx, tx, settlement{jobID: jobID, kind: j.kind, typ: typ, sid: sid, generation: j.generation,
			status: "SYSTEM_ERROR", errorCode: res.Error.Code, nodeID: sess.NodeID})
	})
	if err == nil {
		s.notify(requeuedPool)
	}
	return out, err
}

func closeAttempt(ctx context.Context, tx *sql.Tx, jobID, leaseEpoch int64, outcome, errClass, digest string) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_job_attempt SET outcome = ?, error_class = NULLIF(?, ''), receipt_digest = NULLIF(?, ''),
		   ended_at = NOW(6)
		 WHERE job_id = ? AND lease_epoch = ?`, outcome, errClass, digest, jobID, leaseEpoch); err != nil {
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

type settlement struct {
	jobID      int64
	kind       JobKind
	typ, sid   string
	generation int
	status     string
	errorCode  string
	result     []byte
	nodeID     int64
}

// SettledEventType is the event type of a submission's final outcome.
const SettledEventType = "SETTLED"

// SettlementPayload is the JSON body of a SETTLED event.
type SettlementPayload struct {
	JobID          string          `json:"jobId"`
	SubmissionType string          `json:"submissionType"`
	SubmissionID   string          `json:"submissionId"`
	Generation     int             `json:"generation"`
	Status         string          `json:"status"`
	ErrorCode      string          `json:"errorCode,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
}

// settle writes the outbox event of a SUBMISSION job, or finishes the node
// check of a CHECK job (checks never reach the business).
func settle(ctx context.Context, tx *sql.Tx, st settlement) error {
	if st.kind == KindCheck {
		outcome := "FAILED"
		if st.status == "AC" {
			outcome = "PASSED"
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_node_check SET outcome = ?, steps = ?, finished_at = NOW(6) WHERE job_id = ?`,
			outcome, string(st.result), st.jobID); err != nil {
			return fmt.Errorf("store: settle check: %w", err)
		}
		return nil
	}
	payload, err := json.Marshal(SettlementPayload{
		JobID: fmt.Sprint(st.jobID), SubmissionType: st.typ, SubmissionID: st.sid, Generation: st.generation,
		Status: st.status, ErrorCode: st.errorCode, Result: st.result,
	})
	if err != nil {
		return fmt.Errorf("store: settle: %w", err)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO judge_settlement_event (job_id, event_type, submission_type, submission_id, generation, payload)
		 VALUES (?, ?, ?, ?, ?, ?)`, st.jobID, SettledEventType, st.typ, st.sid, st.generation, payload); err != nil {
		return fmt.Errorf("store: settle: %w", err)
	}
	return nil
}
