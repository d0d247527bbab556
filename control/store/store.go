package store

import (
	"database/sql"

	"github.com/kece-oj/kece/control/internal/jobdb"
	"github.com/kece-oj/kece/control/lease"
)

// Store is the scheduling core over one MySQL primary: the shared database
// handle (pool, configuration, caches, batchers) that the aggregates a
// caller holds are built over (aggregates.go). It is safe for concurrent
// use, and several Stores (control replicas) may share a database.
type Store struct {
	*core
	aggregates
}

// core is what every aggregate of one Store shares: the job database
// handle (control/internal/jobdb), the lease engine over it and the batcher
// of new submissions.
type core struct {
	db *jobdb.Core
	// leases is the lease engine (control/lease) over the same handle, as
	// the replica runs it: observed (metrics, wake-ups).
	leases *lease.Observed
	// enqueuer batches concurrent new submissions into one transaction.
	enqueuer *jobdb.Batcher[newJob, EnqueueResult]
}

// New returns a store over db.
func New(db *sql.DB, cfg Config) (*Store, error) {
	c, err := jobdb.NewCore(db, cfg)
	if err != nil {
		return nil, err
	}
	return (&core{db: c}).store(), nil
}

// store gives s a lease engine and batchers of its own and returns the
// Store over it, with its aggregates. A batch runs with the handle that
// owns its batcher — its observer, notifier and hooks — so each copy made
// by a With… method gets new ones (copies are made once, when a process
// wires its store); sharing the original's would report a copy's retried
// transactions to the original's observer.
func (s *core) store() *Store {
	s.leases = lease.Observe(lease.New(s.db))
	// A new submission's caller waits for its commit: enqueues never linger.
	s.enqueuer = jobdb.NewBatcher(s.db.Cfg.CompleteBatchMax, s.db.Cfg.EnqueueParallel, 0, s.enqueueBatch)
	st := &Store{core: s}
	st.aggregates = newAggregates(st)
	return st
}

// with returns a copy of s's handle changed by change, with a lease engine,
// batchers and aggregates of its own.
func (s *Store) with(change func(c *jobdb.Core)) *Store {
	c := *s.db
	change(&c)
	return (&core{db: &c}).store()
}

// WithHooks returns a copy of s that runs the given test hooks.
func (s *Store) WithHooks(h *Hooks) *Store {
	return s.with(func(c *jobdb.Core) { c.Hooks = h })
}

// WithNotifier returns a copy of s that notifies n after commits that make
// work ready.
func (s *Store) WithNotifier(n Notifier) *Store {
	return s.with(func(c *jobdb.Core) { c.Notifier = n })
}

// DB returns the underlying pool (for health checks).
func (s *Store) DB() *sql.DB { return s.db.Pool.DB }

// Config returns the effective configuration.
func (s *Store) Config() Config { return s.db.Cfg }

// RetriedTransactions returns how many transactions were retried after a
// deadlock or lock-wait timeout since the store was created.
func (s *Store) RetriedTransactions() int64 { return s.db.Stats.Retries.Load() }
