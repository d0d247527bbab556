package store

import (
	"slices"
	"strings"
	"time"
)

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
func (c *caseColumn) set(col string, sets *[]string, args *[]any) {
	if len(c.args) == 0 {
		return
	}
	*sets = append(*sets, col+" = CASE id"+c.text.String()+" ELSE "+col+" END")
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
	guard := func(id, epoch int64, sess NodeSession) {
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
		args = append(args, micros(ttl))
	default:
		sets = append(sets, "lease_until = CASE id"+lease.text.String()+" ELSE NOW(6) + INTERVAL ? MICROSECOND END")
		args = append(append(args, lease.args...), micros(ttl))
	}
	sets = append(sets, "updated_at = NOW(6)")
	slices.Sort(ids)
	idList, idArgs := inList(ids)
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
	var da, aa []any
	ids := make([]int64, len(items))
	for i, r := range items {
		digest.WriteString(" WHEN ? THEN ?")
		da = append(da, r.jobID, r.digest)
		if i > 0 {
			attempts.WriteString(", ")
		}
		attempts.WriteString("(?, ?)")
		aa = append(aa, r.jobID, r.leaseEpoch)
		ids[i] = r.jobID
	}
	in, idArgs := inList(ids)
	return `UPDATE judge_job_attempt SET outcome = 'COMPLETED', receipt_digest = CASE job_id` + digest.String() + ` END,
		   ended_at = NOW(6), judging_started = TRUE
		 WHERE job_id IN (` + in + `) AND (job_id, lease_epoch) IN (` + attempts.String() + `) AND receipt_digest IS NULL`,
		append(append(da, idArgs...), aa...)
}

// settlementRows are the settlement events of results.
func settlementRows(items []fastResult) []settlementRow {
	evs := make([]settlementRow, len(items))
	for i, r := range items {
		evs[i] = settlementRow{jobID: r.jobID, typ: r.f.typ, sid: r.f.sid, generation: r.f.generation, payload: r.payload}
	}
	return evs
}
