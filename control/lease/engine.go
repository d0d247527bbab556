package lease

import (
	"github.com/kece-oj/kece/control/internal/jobdb"
)

// Engine is the lease engine: claims (and the slot cycle), renewals,
// results, releases, expiry and drain deadlines, over the job database
// handle it shares with the store's aggregates. One file per operation
// (claim.go, renew.go, complete.go, cycle.go, release.go, expire.go), each
// public entry point beside its logic; lease_end.go is how every lease
// ends. Its tools are jobdb's batchers (concurrent calls sharing one
// commit) and scripts (a transaction's statements in one round trip).
type Engine struct {
	db *jobdb.Core
	// groups caches each node's pool and host group, which never change.
	groups *jobdb.Cache[int64, nodePlace]
	// facts caches the immutable fields of recently claimed jobs.
	facts *jobdb.Cache[int64, jobFacts]
	// writer batches concurrent renewals and fast completions: one
	// transaction (or one autocommit UPDATE for renewals alone).
	writer *jobdb.Batcher[leaseWrite, bool]
	// claimers batch concurrent claims of a pool into one transaction.
	claimers *claimBatchers
}

// New returns a lease engine over c. A batch runs with the engine that
// owns its batcher — c's observer, notifier and hooks — so a handle with
// another observer needs an engine of its own.
func New(c *jobdb.Core) *Engine {
	e := &Engine{db: c, groups: jobdb.NewCache[int64, nodePlace](4096), facts: jobdb.NewCache[int64, jobFacts](16384)}
	e.writer = jobdb.NewBatcher(c.Cfg.CompleteBatchMax, c.Cfg.BatchParallel, max(c.Cfg.BatchLinger, 0), e.writeBatch)
	e.claimers = &claimBatchers{run: e.claimBatch, calls: c.Cfg.ClaimBatchCalls, linger: max(c.Cfg.BatchLinger, 0), m: make(map[string]*jobdb.Batcher[claimCall, []ClaimedJob])}
	return e
}
