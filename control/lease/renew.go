package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

// RenewItem is one lease a node wants extended, with its progress.
type RenewItem struct {
	JobID       int64
	LeaseEpoch  int64
	ProgressSeq int64
	Phase       string // COMPILING or JUDGING; empty keeps the current one
	CasesDone   int
	CasesTotal  int
}

// RenewState answers one renew item.
type RenewState string

// Renew answers.
const (
	RenewOK        RenewState = "OK"
	RenewLost      RenewState = "LOST"
	RenewCancelled RenewState = "CANCELLED"
)

// RenewResult answers one RenewItem.
type RenewResult struct {
	JobID      int64
	LeaseEpoch int64
	State      RenewState
	Remaining  time.Duration
}

// Renew extends the session's live leases in one transaction. An expired
// lease is LOST even if not yet reaped; progress only moves forward.
func (s *Engine) Renew(ctx context.Context, sess jobdb.NodeSession, items []RenewItem) ([]RenewResult, error) {
	if len(items) == 0 {
		return nil, nil
	}
	for _, it := range items {
		if it.Phase != "" && it.Phase != "COMPILING" && it.Phase != "JUDGING" {
			return nil, jobdb.Invalid("phase", "must be COMPILING or JUDGING, got %q", it.Phase)
		}
	}
	sorted := append([]RenewItem(nil), items...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].JobID < sorted[j].JobID })
	if ok, err := s.writer.Do(ctx, leaseWrite{renew: &renewCall{sess: sess, items: sorted}}); err != nil || ok {
		if err != nil {
			return nil, err
		}
		out := make([]RenewResult, len(items))
		for i, it := range items {
			out[i] = RenewResult{JobID: it.JobID, LeaseEpoch: it.LeaseEpoch, State: RenewOK, Remaining: s.db.Cfg.LeaseTTL}
		}
		return out, nil
	}
	// Some lease did not renew: work out each answer item by item. Repeating
	// a renewal that did commit above is harmless (the lease is extended
	// again; progress only moves forward).
	results := make(map[[2]int64]RenewResult, len(items))
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		clear(results)
		for _, it := range sorted {
			// Assignments run left to right: progress_seq is updated last so
			// the IF()s compare against the stored value, and status_version
			// (the business sees COMPILING → JUDGING as a status change)
			// before phase.
			r, err := tx.ExecContext(ctx,
				`UPDATE judge_job SET lease_until = NOW(6) + INTERVAL ? MICROSECOND,
				   status_version = status_version + IF(? > progress_seq AND ? <> '' AND ? <> COALESCE(phase, 'COMPILING'), 1, 0),
				   phase = IF(? > progress_seq AND ? <> '', ?, phase),
				   cases_done = IF(? > progress_seq, GREATEST(cases_done, ?), cases_done),
				   cases_total = IF(? > progress_seq, ?, cases_total),
				   progress_seq = GREATEST(progress_seq, ?), updated_at = NOW(6)
				 WHERE id = ? AND state = 'RUNNING' AND node_id = ? AND session_epoch = ? AND lease_epoch = ?
				   AND lease_until > NOW(6)
				   AND EXISTS (SELECT 1 FROM judge_node n WHERE n.id = ? AND n.session_epoch = ? AND n.revoked_at IS NULL)`,
				jobdb.Micros(s.db.Cfg.LeaseTTL),
				it.ProgressSeq, it.Phase, it.Phase,
				it.ProgressSeq, it.Phase, it.Phase,
				it.ProgressSeq, it.CasesDone,
				it.ProgressSeq, it.CasesTotal,
				it.ProgressSeq,
				it.JobID, sess.NodeID, sess.SessionEpoch, it.LeaseEpoch, sess.NodeID, sess.SessionEpoch)
			if err != nil {
				return fmt.Errorf("store: renew: %w", err)
			}
			key := [2]int64{it.JobID, it.LeaseEpoch}
			if n, _ := r.RowsAffected(); n == 1 {
				results[key] = RenewResult{JobID: it.JobID, LeaseEpoch: it.LeaseEpoch, State: RenewOK, Remaining: s.db.Cfg.LeaseTTL}
				continue
			}
			var state jobdb.JobState
			var epoch int64
			err = tx.QueryRowContext(ctx, `SELECT state, lease_epoch FROM judge_job WHERE id = ?`, it.JobID).Scan(&state, &epoch)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				results[key] = RenewResult{JobID: it.JobID, LeaseEpoch: it.LeaseEpoch, State: RenewLost}
			case err != nil:
				return fmt.Errorf("store: renew: %w", err)
			case state == jobdb.StateCancelled && epoch == it.LeaseEpoch:
				results[key] = RenewResult{JobID: it.JobID, LeaseEpoch: it.LeaseEpoch, State: RenewCancelled}
			default:
				results[key] = RenewResult{JobID: it.JobID, LeaseEpoch: it.LeaseEpoch, State: RenewLost}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]RenewResult, 0, len(items))
	for _, it := range items {
		out = append(out, results[[2]int64{it.JobID, it.LeaseEpoch}])
	}
	return out, nil
}

// renewCall is one node's renewal as the renew batcher queues it (items in
// ascending job id).
type renewCall struct {
	sess  jobdb.NodeSession
	items []RenewItem
}

// renewBatch extends the leases of concurrent renewals (of any nodes) in one
// autocommit UPDATE: one commit for all of them. When some lease of the
// batch did not renew, each call runs again alone, so each gets the answer
// it would get by itself (renewing again is harmless: the lease is extended
// again, progress only moves forward).
func (s *Engine) renewBatch(ctx context.Context, calls []*jobdb.BatchCall[leaseWrite, bool]) {
	seen := make(map[int64]bool)
	dup := false
	for _, c := range calls {
		for _, it := range c.Req.renew.items {
			dup = dup || seen[it.JobID]
			seen[it.JobID] = true
		}
	}
	if len(calls) > 1 && !dup {
		reqs := make([]renewCall, len(calls))
		for i, c := range calls {
			reqs[i] = *c.Req.renew
		}
		if ok, err := s.renewAll(ctx, reqs); err == nil && ok {
			s.db.Stats.Batches.Add(1)
			for _, c := range calls {
				c.Resp = true
			}
			return
		}
	}
	for _, c := range calls {
		c.Resp, c.Err = s.renewAll(ctx, []renewCall{*c.Req.renew})
	}
}

// renewAll extends every item's lease in one autocommit statement — the
// common case, where all of them are live. It reports false when some item
// did not renew (lost, cancelled, a stale session); what did renew stays
// renewed, and Renew answers item by item.
func (s *Engine) renewAll(ctx context.Context, calls []renewCall) (bool, error) {
	q, args, n := leaseUpdate(s.db.Cfg.LeaseTTL, calls, nil)
	r, err := s.db.Pool.ExecContext(ctx, q, args...)
	if err != nil {
		if jobdb.Retryable(err) {
			return false, nil
		}
		return false, fmt.Errorf("store: renew: %w", err)
	}
	got, _ := r.RowsAffected()
	return got == int64(n), nil
}
