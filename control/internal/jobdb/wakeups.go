package jobdb

// Notify tells this replica's waiters at once (no database round trip).
func (s *Core) Notify(pool string) {
	if s.Notifier != nil && pool != "" {
		s.Notifier.Notify(pool)
	}
}

// NotifyJobs tells this replica's waiters that n pool jobs (not bound to a
// node) became ready: n waiters are woken when the notifier can count. A job
// that needs a problem type beyond classic batch (caps) wakes every waiter
// instead: the longest waiting may be nodes that cannot run it.
func (s *Core) NotifyJobs(pool string, n int, caps uint64) {
	if s.Notifier == nil || pool == "" || n <= 0 {
		return
	}
	if jn, ok := s.Notifier.(JobNotifier); ok && !NeedsFeature(caps) {
		jn.NotifyN(pool, n)
		return
	}
	s.Notifier.Notify(pool)
}

// NotifySettled tells this replica's waiting status reads that job reached
// a terminal state (when the notifier waits on settlements).
func (s *Core) NotifySettled(job int64) {
	if sn, ok := s.Notifier.(SettleNotifier); ok && job > 0 {
		sn.Settled(job)
	}
}
