package lease

import (
	"context"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

// Wake-ups have one owner: the store, after the commit that warrants them.
// Every commit that makes work ready (an enqueue, a rejudge, a requeue by
// the reaper, a drain or a release), frees a node's capacity (a result, a
// release) or settles a job (a result, a cancel) tells the replica's
// Notifier here, and nowhere else: the HTTP layer wakes no one. The store is
// the one place that knows, per commit, which pool, how many jobs and
// whether the job settled; the replica (control/replica) only hands it the
// Notifier, which fans out to the long-poll hub and the settlement waiters.
// Other replicas learn the same facts from the pool signal (bumpPool) and
// the settled-jobs poll, not from here.

// notifyFreed tells this replica's claim waiters of the node's pool that a
// slot of the node came free (a result, a release). The node's pool is
// cached from its claims; an unknown node wakes no one (its waiters retry
// on their own timer).
func (s *Engine) notifyFreed(ctx context.Context, nodeID int64) {
	if s.db.Notifier == nil {
		return
	}
	if p, err := s.nodePlace(ctx, nodeID); err == nil {
		s.db.Notify(p.pool)
	}
}

// notifyResult wakes after an accepted result: the node's pool (a slot came
// free) unless the result's own claim took the slot again (claimedAgain),
// and the job's status waiters when it settled.
func (s *Engine) notifyResult(ctx context.Context, sess jobdb.NodeSession, jobID int64, r CompleteResponse, claimedAgain bool) {
	if !claimedAgain {
		s.notifyFreed(ctx, sess.NodeID)
	}
	if r.JobState == jobdb.StateCompleted || r.JobState == jobdb.StateFailed {
		s.db.NotifySettled(jobID)
	}
}
