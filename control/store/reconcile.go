package store

import (
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

// maxViolationsPerRule bounds each rule's query so a badly broken database
// still yields a readable report.
const maxViolationsPerRule = 1000

// Subject types of a violation.
const (
	SubjectJob        = "JOB"
	SubjectAttempt    = "ATTEMPT"
	SubjectNode       = "NODE"
	SubjectHostGroup  = "HOST_GROUP"
	SubjectSubmission = "SUBMISSION"
	SubjectEvent      = "EVENT"
)

// Reconciliation rules. Each names one invariant of DESIGN §3–§5.
const (
	// RuleRunningWithoutLease: a RUNNING job lacks an owner or a lease deadline.
	RuleRunningWithoutLease = "RUNNING_WITHOUT_LEASE"
	// RuleRunningWithoutOpenAttempt: a RUNNING job has no open (RUNNING)
	// attempt for its current lease epoch.
	RuleRunningWithoutOpenAttempt = "RUNNING_WITHOUT_OPEN_ATTEMPT"
	// RuleStrayOpenAttempt: an attempt is still open but is not the current
	// lease of a RUNNING job (so a job would have two open attempts, or a
	// finished job one).
	RuleStrayOpenAttempt = "STRAY_OPEN_ATTEMPT"
	// RuleQueuedWithOwner: a QUEUED or terminal job still names a node lease.
	RuleQueuedWithOwner = "NOT_RUNNING_WITH_LEASE"
	// RuleNodeOverCapacity / RuleGroupOverCapacity: RUNNING jobs holding
	// more slots than the node has (the group's capacity), and at least one
	// of them leased after the last capacity change (a shrink below work in
	// flight is allowed and drains by itself). A job holds its slot weight,
	// counted here at most as the whole node (group): a job heavier than
	// that runs there alone, as the claim allows (docs/scheduling.md, "Slot
	// weights"), and is over capacity only with anything beside it.
	RuleNodeOverCapacity  = "NODE_OVER_CAPACITY"
	RuleGroupOverCapacity = "GROUP_OVER_CAPACITY"
	// RuleSettlementMissing: a SUBMISSION job that ended (COMPLETED, FAILED
	// or CANCELLED) has no SETTLED event.
	RuleSettlementMissing = "SETTLEMENT_EVENT_MISSING"
	// RuleSettlementUnexpected: a SETTLED event of a CHECK job or of a job
	// that has not ended.
	RuleSettlementUnexpected = "SETTLEMENT_EVENT_UNEXPECTED"
	// RulePointerDangling: a submission pointer names no job, a job of
	// another submission, or nothing at all.
	RulePointerDangling = "POINTER_DANGLING"
	// RulePointerNotHighest: the pointer's job is not the highest generation
	// of its submission, or the generations disagree.
	RulePointerNotHighest = "POINTER_NOT_HIGHEST_GENERATION"
	// RulePointerMissing: a submission has a generation above 1 but no
	// pointer row (a rejudge always writes one; only generation 1 may go
	// without).
	RulePointerMissing = "POINTER_MISSING"
	// RuleSupersededLive: a job that is not its submission's current one is
	// still QUEUED or RUNNING.
	RuleSupersededLive = "SUPERSEDED_JOB_LIVE"
	// RuleReaperStuck: a RUNNING job's lease expired more than two reap
	// intervals ago.
	RuleReaperStuck = "REAPER_STUCK"
	// RuleReceiptOnLiveJob: an attempt holds a verdict receipt but its job is
	// not COMPLETED.
	RuleReceiptOnLiveJob = "RECEIPT_ON_UNFINISHED_JOB"
	// RuleTwoEffectiveResults: a job has more than one accepted verdict.
	RuleTwoEffectiveResults = "TWO_EFFECTIVE_RESULTS"
	// RuleResultWithoutReceipt: a COMPLETED job has no attempt whose receipt
	// is its result digest.
	RuleResultWithoutReceipt = "RESULT_WITHOUT_RECEIPT"
	// RuleRevokedNotDisabled: a revoked node is not DISABLED or still has a
	// credential.
	RuleRevokedNotDisabled = "REVOKED_NODE_ACTIVE"
)

// Violation is one broken invariant.
type Violation struct {
	// Rule is one of the Rule… constants.
	Rule string `json:"rule"`
	// SubjectType is one of the Subject… constants; SubjectID its row id.
	SubjectType string `json:"subjectType"`
	SubjectID   int64  `json:"subjectId"`
	// Message says what is wrong in words.
	Message string `json:"message"`
	// Details holds related ids and values (job, node, counts, epochs).
	Details map[string]any `json:"details,omitempty"`
}

// Report is the outcome of one Reconcile run. It is read-only: nothing was
// changed. OK() is false when any violation is listed.
type Report struct {
	// AsOf is the database time when the checks started.
	AsOf time.Time `json:"asOf"`
	// Rules lists the rules checked, in order.
	Rules []string `json:"rulesChecked"`
	// Violations lists every violation found, by rule.
	Violations []Violation `json:"violations"`
}

// OK reports whether no invariant is broken.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// WriteCSV writes one line per violation after a header:
// rule,subject_type,subject_id,message,details (details as JSON).
func (r Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"rule", "subject_type", "subject_id", "message", "details"}); err != nil {
		return fmt.Errorf("reconcile csv: %w", err)
	}
	for _, v := range r.Violations {
		var d []byte
		if len(v.Details) > 0 {
			d, _ = json.Marshal(v.Details)
		}
		if err := cw.Write([]string{v.Rule, v.SubjectType, strconv.FormatInt(v.SubjectID, 10), v.Message, string(d)}); err != nil {
			return fmt.Errorf("reconcile csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("reconcile csv: %w", err)
	}
	return nil
}

// ReconcileOptions tune Reconcile.
type ReconcileOptions struct {
	// ReapInterval is the replicas' reap scan interval; a lease expired for
	// longer than twice this is RuleReaperStuck. 0 means ReapIntervalDefault.
	ReapInterval time.Duration
}

// Reconcile checks the scheduling invariants with ReconcileOptions{}.
func (s *Store) Reconcile(ctx context.Context) (Report, error) {
	return s.ReconcileWith(ctx, ReconcileOptions{})
}

type rule struct {
	name, subject, query string
	args                 []any
	// message renders a row: id, then the extra columns as strings.
	message func(extra []string) (string, map[string]any)
}

// ReconcileWith checks the scheduling invariants: leases and attempts,
// capacity, settlement events, submission pointers, the reaper and result
// receipts. It runs read-only queries outside any transaction (each sees
// committed data), so a job moving between two queries can rarely show up;
// re-run before acting on a single violation.
func (s *Store) ReconcileWith(ctx context.Context, o ReconcileOptions) (Report, error) {
	if o.ReapInterval <= 0 {
		o.ReapInterval = ReapIntervalDefault
	}
	var rep Report
	if err := s.db.Pool.QueryRowContext(ctx, `SELECT NOW(6)`).Scan(&rep.AsOf); err != nil {
		return rep, fmt.Errorf("store: reconcile: %w", err)
	}
	lim := maxViolationsPerRule
	rules := []rule{
		{RuleRunningWithoutLease, SubjectJob,
			`SELECT id, COALESCE(node_id, 0), IF(lease_until IS NULL, 'no', 'yes') FROM judge_job
			 WHERE state = 'RUNNING' AND (node_id IS NULL OR lease_until IS NULL OR session_epoch IS NULL OR lease_epoch < 1)
			 ORDER BY id LIMIT ?`, []any{lim},
			func(x []string) (string, map[string]any) {
				return "RUNNING job has no complete lease (owner, session, epoch, deadline)", map[string]any{"nodeId": x[0], "leaseUntil": x[1]}
			}},
		{RuleRunningWithoutOpenAttempt, SubjectJob,
			`SELECT j.id, j.lease_epoch, COALESCE(a.outcome, 'MISSING') FROM judge_job j
			 LEFT JOIN judge_job_attempt a ON a.job_id = j.id AND a.lease_epoch = j.lease_epoch
			 WHERE j.state = 'RUNNING' AND (a.id IS NULL OR a.outcome <> 'RUNNING' OR a.node_id <> j.node_id)
			 ORDER BY j.id LIMIT ?`, []any{lim},
			func(x []string) (string, map[string]any) {
				return fmt.Sprintf("RUNNING job's attempt for lease epoch %s is %s", x[0], x[1]),
					map[string]any{"leaseEpoch": x[0], "attemptOutcome": x[1]}
			}},
		{RuleStrayOpenAttempt, SubjectAttempt,
			`SELECT a.id, a.job_id, a.lease_epoch, j.state, j.lease_epoch FROM judge_job_attempt a
			 JOIN judge_job j ON j.id = a.job_id
			 WHERE a.outcome = 'RUNNING' AND (j.state <> 'RUNNING' OR j.lease_epoch <> a.lease_epoch)
			 ORDER BY a.id LIMIT ?`, []any{lim},
			func(x []string) (string, map[string]any) {
				return fmt.Sprintf("attempt (job %s, lease epoch %s) is open but the job is %s at lease epoch %s", x[0], x[1], x[2], x[3]),
					map[string]any{"jobId": x[0], "leaseEpoch": x[1], "jobState": x[2], "jobLeaseEpoch": x[3]}
			}},
		{RuleQueuedWithOwner, SubjectJob,
			`SELECT id, state, COALESCE(node_id, 0) FROM judge_job
			 WHERE state <> 'RUNNING' AND (lease_until IS NOT NULL OR (state = 'QUEUED' AND node_id IS NOT NULL))
			 ORDER BY id LIMIT ?`, []any{lim},
			func(x []string) (string, map[string]any) {
				return fmt.Sprintf("%s job still holds a lease", x[0]), map[string]any{"state": x[0], "nodeId": x[1]}
			}},
		{RuleNodeOverCapacity, SubjectNode,
			`SELECT n.id, SUM(LEAST(j.slot_weight, GREATEST(n.slots, 1))), n.slots FROM judge_node n
			 JOIN judge_job j ON j.node_id = n.id AND j.state = 'RUNNING'
			 JOIN judge_job_attempt a ON a.job_id = j.id AND a.lease_epoch = j.lease_epoch
			 GROUP BY n.id, n.slots, n.updated_at
			 HAVING SUM(LEAST(j.slot_weight, GREATEST(n.slots, 1))) > n.slots AND MAX(a.started_at) > n.updated_at
			 ORDER BY n.id LIMIT ?`, []any{lim},
			func(x []string) (string, map[string]any) {
				return fmt.Sprintf("node's running jobs hold %s slots of %s", x[0], x[1]), map[string]any{"running": x[0], "slots": x[1]}
			}},
		{RuleGroupOverCapacity, SubjectHostGroup,
			`SELECT g.id, SUM(LEAST(j.slot_weight, GREATEST(g.slot_capacity, 1))), g.slot_capacity FROM judge_host_group g
			 JOIN judge_job j ON j.host_group_id = g.id AND j.state = 'RUNNING'
			 JOIN judge_job_attempt a ON a.job_id = j.id AND a.lease_epoch = j.lease_epoch
			 GROUP BY g.id, g.slot_capacity, g.updated_at
			 HAVING SUM(LEAST(j.slot_weight, GREATEST(g.slot_capacity, 1))) > g.slot_capacity AND MAX(a.started_at) > g.updated_at
			 ORDER BY g.id LIMIT ?`, []any{lim},
			func(x []string) (string, map[string]any) {
				return fmt.Sprintf("host group's running jobs hold %s slots of a capacity of %s", x[0], x[1]), map[string]any{"running": x[0], "capacity": x[1]}
			}},
		{RuleSettlementMissing, SubjectJob,
			`SELECT j.id, j.state, j.submission_type, j.submission_id FROM judge_job j
			 LEFT JOIN judge_settlement_event e ON e.job_id = j.id AND e.event_type = 'SETTLED'
			 WHERE j.kind = 'SUBMISSION' AND j.state IN ('COMPLETED', 'FAILED', 'CANCELLED') AND e.id IS NULL
			 ORDER BY j.id LIMIT ?`, []any{lim},
			func(x []string) (string, map[string]any) {
				return fmt.Sprintf("%s submission job %s/%s has no settlement event", x[0], x[1], x[2]),
					map[string]any{"state": x[0], "submissionType": x[1], "submissionId": x[2]}
			}},
		{RuleSettlementUnexpected, SubjectEvent,
			`SELECT e.id, e.job_id, COALESCE(j.kind, 'MISSING'), COALESCE(j.state, 'MISSING') FROM judge_settlement_event e
			 LEFT JOIN judge_job j ON j.id = e.job_id
			 WHERE j.id IS NULL OR j.kind <> 'SUBMISSION' OR j.state IN ('QUEUED', 'RUNNING')
			 ORDER BY e.id LIMIT ?`, []any{lim},
			func(x []string) (string, map[string]any) {
				return fmt.Sprintf("settlement event of job %s, which is a %s job in state %s", x[0], x[1], x[2]),
					map[string]any{"jobId": x[0], "kind": x[1], "jobState": x[2]}
			}},
		{RulePointerDangling, SubjectSubmission,
			`SELECT p.id, p.submission_type, p.submission_id, p.current_job_id FROM judge_submission p
			 LEFT JOIN judge_job j ON j.id = p.current_job_id
			 WHERE j.id IS NULL OR j.submission_type <> p.submission_type OR j.submission_id <> p.submission_id
			 ORDER BY p.id LIMIT ?`, []any{lim},
			func(x []string) (string, map[string]any) {
				return fmt.Sprintf("submission %s/%s points at job %s, which is not one of its jobs", x[0], x[1], x[2]),
					map[string]any{"submissionType": x[0], "submissionId": x[1], "currentJobId": x[2]}
			}},
		{RulePointerNotHighest, SubjectSubmission,
			`SELECT p.id, p.submission_type, p.submission_id, p.current_job_id, p.generation, j.generation,
			        (SELECT MAX(k.generation) FROM judge_job k
			         WHERE k.submission_type = p.submission_type AND k.submission_id = p.submission_id)
			 FROM judge_submission p JOIN judge_job j ON j.id = p.current_job_id
			 WHERE j.generation <> p.generation OR j.generation <> (SELECT MAX(k.generation) FROM judge_job k
			         WHERE k.submission_type = p.submission_type AND k.submission_id = p.submission_id)
			 ORDER BY p.id LIMIT ?`, []any{lim},
			func(x []string) (string, map[string]any) {
				return fmt.Sprintf("submission %s/%s points at job %s (generation %s, pointer says %s) but the highest generation is %s",
						x[0], x[1], x[2], x[4], x[3], x[5]),
					map[string]any{"submissionType": x[0], "submissionId": x[1], "currentJobId": x[2], "pointerGeneration": x[3],
						"jobGeneration": x[4], "highestGeneration": x[5]}
			}},
		{RulePointerMissing, SubjectJob,
			`SELECT j.id, j.submission_type, j.submission_id, j.generation FROM judge_job j
			 WHERE j.generation > 1 AND NOT EXISTS (SELECT 1 FROM judge_submission p
			   WHERE p.submission_type = j.submission_type AND p.submission_id = j.submission_id)
			 ORDER BY j.id LIMIT ?`, []any{lim},
			func(x []string) (string, map[string]any) {
				return fmt.Sprintf("submission %s/%s has generation %s but no pointer row", x[0], x[1], x[2]),
					map[string]any{"submissionType": x[0], "submissionId": x[1], "generation": x[2]}
			}},
		{RuleSupersededLive, SubjectJob,
			`SELECT j.id, j.state, n.id FROM judge_job j
			 JOIN judge_job n ON n.submission_type = j.submission_type AND n.submission_id = j.submission_id
			   AND n.generation = (SELECT MAX(k.generation) FROM judge_job k
			                       WHERE k.submission_type = j.submission_type AND k.submission_id = j.submission_id)
			 WHERE j.state IN ('QUEUED', 'RUNNING') AND n.id <> j.id
			 ORDER BY j.id LIMIT ?`, []any{lim},
			func(x []string) (string, map[string]any) {
				return fmt.Sprintf("%s job is not its submission's current job (%s)", x[0], x[1]), map[string]any{"state": x[0], "currentJobId": x[1]}
			}},
		{RuleReaperStuck, SubjectJob,
			`SELECT id, TIMESTAMPDIFF(MICROSECOND, lease_until, NOW(6)) DIV 1000, COALESCE(node_id, 0) FROM judge_job
			 WHERE state = 'RUNNING' AND lease_until < NOW(6) - INTERVAL ? MICROSECOND
			 ORDER BY id LIMIT ?`, []any{jobdb.Micros(2 * o.ReapInterval), lim},
			func(x []string) (string, map[string]any) {
				return fmt.Sprintf("lease expired %s ms ago and was not reaped (reap interval %s)", x[0], o.ReapInterval),
					map[string]any{"expiredMs": x[0], "nodeId": x[1]}
			}},
		{RuleReceiptOnLiveJob, SubjectAttempt,
			`SELECT a.id, a.job_id, a.lease_epoch, j.state FROM judge_job_attempt a JOIN judge_job j ON j.id = a.job_id
			 WHERE a.outcome = 'COMPLETED' AND a.receipt_digest IS NOT NULL AND j.state <> 'COMPLETED'
			 ORDER BY a.id LIMIT ?`, []any{lim},
			func(x []string) (string, map[string]any) {
				return fmt.Sprintf("attempt (job %s, lease epoch %s) holds a verdict receipt but the job is %s", x[0], x[1], x[2]),
					map[string]any{"jobId": x[0], "leaseEpoch": x[1], "jobState": x[2]}
			}},
		{RuleTwoEffectiveResults, SubjectJob,
			`SELECT job_id, COUNT(*) FROM judge_job_attempt WHERE outcome = 'COMPLETED'
			 GROUP BY job_id HAVING COUNT(*) > 1 ORDER BY job_id LIMIT ?`, []any{lim},
			func(x []string) (string, map[string]any) {
				return fmt.Sprintf("job has %s accepted verdicts", x[0]), map[string]any{"completedAttempts": x[0]}
			}},
		{RuleResultWithoutReceipt, SubjectJob,
			`SELECT j.id, COALESCE(j.result_digest, '') FROM judge_job j
			 WHERE j.state = 'COMPLETED' AND NOT EXISTS (SELECT 1 FROM judge_job_attempt a
			   WHERE a.job_id = j.id AND a.outcome = 'COMPLETED' AND a.receipt_digest = j.result_digest)
			 ORDER BY j.id LIMIT ?`, []any{lim},
			func(x []string) (string, map[string]any) {
				return "COMPLETED job has no attempt whose receipt is its result", map[string]any{"resultDigest": x[0]}
			}},
		{RuleRevokedNotDisabled, SubjectNode,
			`SELECT id, desired_state, credential_hash IS NOT NULL FROM judge_node
			 WHERE revoked_at IS NOT NULL AND (desired_state <> 'DISABLED' OR credential_hash IS NOT NULL OR session_token_hash IS NOT NULL)
			 ORDER BY id LIMIT ?`, []any{lim},
			func(x []string) (string, map[string]any) {
				return fmt.Sprintf("revoked node is %s or still holds a credential/session", x[0]), map[string]any{"desiredState": x[0]}
			}},
	}
	rep.Violations = []Violation{}
	for _, r := range rules {
		rep.Rules = append(rep.Rules, r.name)
		vs, err := s.runRule(ctx, r)
		if err != nil {
			return rep, err
		}
		rep.Violations = append(rep.Violations, vs...)
	}
	return rep, nil
}

// textDetail names details that stay strings even when they look numeric.
func textDetail(k string) bool {
	return k == "submissionId" || k == "submissionType" || k == "resultDigest"
}

func (s *core) runRule(ctx context.Context, r rule) ([]Violation, error) {
	rows, err := s.db.Pool.QueryContext(ctx, r.query, r.args...)
	if err != nil {
		return nil, fmt.Errorf("store: reconcile %s: %w", r.name, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, fmt.Errorf("store: reconcile %s: %w", r.name, err)
	}
	var out []Violation
	for rows.Next() {
		var id int64
		extra := make([]sql.NullString, len(cols)-1)
		dest := []any{&id}
		for i := range extra {
			dest = append(dest, &extra[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("store: reconcile %s: %w", r.name, err)
		}
		x := make([]string, len(extra))
		for i, e := range extra {
			x[i] = e.String
		}
		msg, details := r.message(x)
		for k, v := range details {
			// Numeric ids and counts read better as numbers in JSON.
			if sv, ok := v.(string); ok && !textDetail(k) {
				if n, err := strconv.ParseInt(sv, 10, 64); err == nil {
					details[k] = n
				}
			}
		}
		out = append(out, Violation{Rule: r.name, SubjectType: r.subject, SubjectID: id, Message: msg, Details: details})
	}
	return out, rows.Err()
}
