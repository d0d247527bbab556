package longpoll

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// SettledSource tells which of the given jobs have settled (reached a
// terminal state): store.SettledJobs, one primary-key lookup per id.
type SettledSource interface {
	SettledJobs(ctx context.Context, ids []int64) ([]int64, error)
}

// Settlements wakes waiting status reads (GET …/submissions/… ?waitMs=) when
// the job they wait on settles. Waiters hold no database connection. A
// settlement committed by this replica wakes them at once (Settled, called by
// the store or the lease engine's decorator after the commit, control/internal/jobdb/wakeups.go); one committed by another replica — or by
// a reaper that failed the job — is seen by Run, which asks the database about
// exactly the waited-on jobs once per interval, and only while anyone waits.
// Nothing is added to the claim or result paths.
type Settlements struct {
	mu    sync.Mutex
	chans map[int64]chan struct{}
	refs  map[int64]int
}

// NewSettlements returns an empty registry.
func NewSettlements() *Settlements {
	return &Settlements{chans: make(map[int64]chan struct{}), refs: make(map[int64]int)}
}

// Watch returns a channel closed when job settles (or is seen settled) and a
// function to call when no longer waiting. Take it before reading the status
// so a settlement between the read and the wait is not missed.
func (s *Settlements) Watch(job int64) (<-chan struct{}, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.chans[job]
	if !ok {
		ch = make(chan struct{})
		s.chans[job] = ch
	}
	s.refs[job]++
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.refs[job]--; s.refs[job] <= 0 {
				delete(s.refs, job)
				if s.chans[job] == ch {
					delete(s.chans, job)
				}
			}
		})
	}
}

// Settled wakes every waiter of job. It never blocks.
func (s *Settlements) Settled(job int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.chans[job]; ok {
		close(ch)
		delete(s.chans, job)
	}
}

// Waiting returns how many jobs have waiters (for tests and metrics).
func (s *Settlements) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.chans)
}

// waited returns the jobs someone waits on.
func (s *Settlements) waited() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.chans))
}

// Run asks src every interval which waited-on jobs have settled and wakes
// their waiters, until ctx ends. It reads nothing while nobody waits.
func (s *Settlements) Run(ctx context.Context, src SettledSource, interval time.Duration, failed func(error)) {
	if interval <= 0 {
		interval = SettlePollIntervalDefault
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids := s.waited()
		if len(ids) == 0 {
			continue
		}
		done, err := src.SettledJobs(ctx, ids)
		if err != nil {
			if ctx.Err() == nil {
				failed(err)
			}
			continue
		}
		for _, id := range done {
			s.Settled(id)
		}
	}
}
