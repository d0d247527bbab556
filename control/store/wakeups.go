package store

import "context"

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

// notify tells this replica's waiters at once (no database round trip).
func (s *Store) notify(pool string) {
	if s.notifier != nil && pool != "" {
		s.notifier.Notify(pool)
	}
}

// notifyJobs tells this replica's waiters that n pool jobs (not bound to a
// node) became ready: n waiters are woken when the notifier can count. A job
// that needs a problem type beyond classic batch (caps) wakes every waiter
// instead: the longest waiting may be nodes that cannot run it.
func (s *Store) notifyJobs(pool string, n int, caps uint64) {
	if s.notifier == nil || pool == "" || n <= 0 {
		return
	}
	if jn, ok := s.notifier.(JobNotifier); ok && !needsFeature(caps) {
		jn.NotifyN(pool, n)
		return
	}
	s.notifier.Notify(pool)
}

// notifySettled tells this replica's waiting status reads that job reached
// a terminal state (when the notifier waits on settlements).
func (s *Store) notifySettled(job int64) {
	if sn, ok := s.notifier.(SettleNotifier); ok && job > 0 {
		sn.Settled(job)
	}
}

// notifyFreed tells this replica's claim waiters of the node's pool that a
// slot of the node came free (a result, a release). The node's pool is
// cached from its claims; an unknown node wakes no one (its waiters retry
// on their own timer).
func (s *Store) notifyFreed(ctx context.Context, nodeID int64) {
	if s.notifier == nil {
		return
	}
	if p, err := s.nodePlace(ctx, nodeID); err == nil {
		s.notify(p.pool)
	}
}

// notifyResult wakes after an accepted result: the node's pool (a slot came
// free) unless the result's own claim took the slot again (claimedAgain),
// and the job's status waiters when it settled.
func (s *Store) notifyResult(ctx context.Context, sess NodeSession, jobID int64, r CompleteResponse, claimedAgain bool) {
	if !claimedAgain {
		s.notifyFreed(ctx, sess.NodeID)
	}
	if r.JobState == StateCompleted || r.JobState == StateFailed {
		s.notifySettled(jobID)
	}
}
