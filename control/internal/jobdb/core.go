package jobdb

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/kece-oj/kece/contracts"
)

// Config tunes the store. Zero fields take their defaults in New.
type Config struct {
	LeaseTTL    time.Duration
	MaxAttempts int
	// MaxUnstartedAttempts caps the leases of a job that may end before
	// judging started on them (lost claim answers, releases, nodes that
	// died or restarted first); they do not count toward MaxAttempts, and
	// at this many the job fails (NeverStartedErrorCode).
	MaxUnstartedAttempts int
	// HeartbeatTTL is how long a node may send no heartbeat before the
	// reaper takes its leases back, well before they run out. Keep it at
	// least two heartbeat intervals (the HTTP layer checks) and under
	// LeaseTTL (at or above it, lease expiry always comes first).
	HeartbeatTTL     time.Duration
	BackoffBase      time.Duration
	BackoffMax       time.Duration
	ClaimBatchMax    int
	MaxSnapshotBytes int
	MaxResultBytes   int
	TxRetries        int
	JoinCodeTTL      time.Duration
	OfflineAfter     time.Duration
	ReapBatch        int
	CompleteBatchMax int
	// ClaimBatchCalls caps how many nodes' claims of a pool share one
	// transaction (1: every claim alone; the bench's switch for what
	// batching claims buys).
	ClaimBatchCalls int
	BatchParallel   int
	// EnqueueParallel is how many batches of new submissions may commit at
	// once. New submissions lock nothing another enqueue waits for, so more
	// batches in flight only shorten each caller's wait (a business backend
	// enqueuing one submission per request waits for its commit, so its
	// rate is its concurrency over that wait).
	EnqueueParallel int
	// BatchLinger is the longest a claim, renewal or result that would
	// start a batch on a busy batcher waits for the rest of its burst
	// (jobdb/batch.go: the wait ends once no call has joined for 300 µs);
	// negative: never.
	BatchLinger time.Duration
}

// Defaults for Config.
const (
	LeaseTTLDefault    = 60 * time.Second
	MaxAttemptsDefault = 3
	// MaxUnstartedAttemptsDefault: five leases ending before judging
	// started is no network blip any more.
	MaxUnstartedAttemptsDefault = 5
	// HeartbeatTTLDefault is three missed heartbeats at the default 10 s
	// interval: half the default lease.
	HeartbeatTTLDefault = 30 * time.Second
	// BackoffBaseDefault is the first retry delay; with it a dead node's job
	// runs elsewhere within lease TTL + reap interval + 1 s.
	BackoffBaseDefault      = 500 * time.Millisecond
	BackoffMaxDefault       = 60 * time.Second
	ClaimBatchMaxDefault    = 16
	MaxSnapshotBytesDefault = 512 << 10
	TxRetriesDefault        = 8
	JoinCodeTTLDefault      = time.Hour
	// JoinCodeTTLMax bounds the lifetime an admin may choose for a join code.
	JoinCodeTTLMax        = 7 * 24 * time.Hour
	OfflineAfterDefault   = 30 * time.Second
	ReapBatchDefault      = 100
	MaxResultBytesDefault = 1 << 20
	// CompleteBatchMaxDefault caps how many concurrent results (and, apart,
	// how many concurrent new submissions) share one commit.
	CompleteBatchMaxDefault = 64
	// ClaimBatchCallsDefault: see Config.ClaimBatchCalls.
	ClaimBatchCallsDefault = 64
	// BatchParallelDefault is how many batches of the lease writer
	// (results and renewals) may commit at once. One: the calls that
	// arrive while a batch commits make the next one bigger (its measured
	// gain over 2: docs/scheduling.md, the table of what moved throughput).
	// Claims of one pool commit one batch at a time per replica too: their
	// batches would queue on the same host-group locks anyway.
	BatchParallelDefault = 1
	// EnqueueParallelDefault: a new submission is one autocommit INSERT, so
	// batching it saves less than the wait for a batch costs; four batches
	// in flight beat two (docs/scheduling.md, the table of what moved throughput).
	EnqueueParallelDefault = 4
	// BatchLingerDefault: see Config.BatchLinger.
	BatchLingerDefault = 2 * time.Millisecond
)

// WithDefaults returns c with every zero field set to its default, as New
// uses it: what a caller validates before connecting anything.
func (c Config) WithDefaults() Config {
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
	c.LeaseTTL = cmp.Or(c.LeaseTTL, LeaseTTLDefault)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, MaxAttemptsDefault)
	c.MaxUnstartedAttempts = cmp.Or(c.MaxUnstartedAttempts, MaxUnstartedAttemptsDefault)
	c.HeartbeatTTL = cmp.Or(c.HeartbeatTTL, HeartbeatTTLDefault)
	c.BackoffBase = cmp.Or(c.BackoffBase, BackoffBaseDefault)
	c.BackoffMax = cmp.Or(c.BackoffMax, BackoffMaxDefault)
	c.ClaimBatchMax = cmp.Or(c.ClaimBatchMax, ClaimBatchMaxDefault)
	c.MaxSnapshotBytes = cmp.Or(c.MaxSnapshotBytes, MaxSnapshotBytesDefault)
	c.MaxResultBytes = cmp.Or(c.MaxResultBytes, MaxResultBytesDefault)
	c.TxRetries = cmp.Or(c.TxRetries, TxRetriesDefault)
	c.JoinCodeTTL = cmp.Or(c.JoinCodeTTL, JoinCodeTTLDefault)
	c.OfflineAfter = cmp.Or(c.OfflineAfter, OfflineAfterDefault)
	c.ReapBatch = cmp.Or(c.ReapBatch, ReapBatchDefault)
	c.CompleteBatchMax = cmp.Or(c.CompleteBatchMax, CompleteBatchMaxDefault)
	c.ClaimBatchCalls = cmp.Or(c.ClaimBatchCalls, ClaimBatchCallsDefault)
	c.BatchParallel = cmp.Or(c.BatchParallel, BatchParallelDefault)
	c.BatchLinger = cmp.Or(c.BatchLinger, BatchLingerDefault)
	c.EnqueueParallel = cmp.Or(c.EnqueueParallel, EnqueueParallelDefault)
}

// Validate refuses nonsensical settings, every one of them at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("store config: "+format, args...)) }
	if c.LeaseTTL < contracts.LeaseTTLMin {
		bad("lease TTL %s is below %s", c.LeaseTTL, contracts.LeaseTTLMin)
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 100 {
		bad("max attempts %d must be 1..100", c.MaxAttempts)
	}
	if c.MaxUnstartedAttempts < 1 || c.MaxUnstartedAttempts > 100 {
		bad("max unstarted attempts %d must be 1..100", c.MaxUnstartedAttempts)
	}
	if c.HeartbeatTTL < time.Second {
		bad("heartbeat TTL %s is below 1s", c.HeartbeatTTL)
	}
	if c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase {
		bad("backoff base %s / max %s must be positive and base ≤ max", c.BackoffBase, c.BackoffMax)
	}
	if c.ClaimBatchMax < 1 || c.ClaimBatchMax > contracts.BatchMax {
		bad("claim batch max %d must be 1..%d", c.ClaimBatchMax, contracts.BatchMax)
	}
	if c.MaxSnapshotBytes < 1024 {
		bad("max snapshot bytes %d is below 1 KiB", c.MaxSnapshotBytes)
	}
	if c.TxRetries < 1 {
		bad("tx retries %d must be positive", c.TxRetries)
	}
	if c.JoinCodeTTL < time.Second || c.JoinCodeTTL > JoinCodeTTLMax {
		bad("join code TTL %s must be 1s..%s", c.JoinCodeTTL, JoinCodeTTLMax)
	}
	if c.OfflineAfter < time.Second {
		bad("offline-after %s is below 1s", c.OfflineAfter)
	}
	if c.ReapBatch < 1 {
		bad("reap batch %d must be positive", c.ReapBatch)
	}
	if c.CompleteBatchMax < 1 || c.CompleteBatchMax > 256 {
		bad("complete batch max %d must be 1..256", c.CompleteBatchMax)
	}
	if c.ClaimBatchCalls < 1 || c.ClaimBatchCalls > 256 {
		bad("claim batch calls %d must be 1..256", c.ClaimBatchCalls)
	}
	if c.BatchParallel < 1 || c.BatchParallel > 64 {
		bad("batch parallel %d must be 1..64", c.BatchParallel)
	}
	if c.EnqueueParallel < 1 || c.EnqueueParallel > 64 {
		bad("enqueue parallel %d must be 1..64", c.EnqueueParallel)
	}
	if c.BatchLinger > 50*time.Millisecond {
		bad("batch linger %s is above 50ms", c.BatchLinger)
	}
	return errors.Join(errs...)
}

// Hooks are fault-injection points for tests.
type Hooks struct {
	// AfterJobInsert runs inside an enqueue transaction (the locking path,
	// EnqueueMany, EnqueueTx, rejudge, self-checks) after the job row is
	// written; an error aborts the transaction. The fast path of a new
	// submission is one statement and has no such point.
	AfterJobInsert func() error
}

// Notifier is told, after commit, that a pool has new ready work or a slot
// came free (see wakeups.go). It must not block. The replica's fan-out to
// its long-poll hub and settlement waiters implements it.
type Notifier interface {
	Notify(pool string)
}

// JobNotifier is a Notifier that can also be told how many jobs became
// ready, so it wakes that many waiters rather than all of them (the
// long-poll hub implements it). Pool work goes to any node of the pool, so n
// jobs need n claims.
type JobNotifier interface {
	Notifier
	NotifyN(pool string, n int)
}

// SettleNotifier is a Notifier that also wakes waiting status reads when a
// job settles (COMPLETED, FAILED, CANCELLED) by a commit of this store.
type SettleNotifier interface {
	Notifier
	Settled(jobID int64)
}

// Counters count, over a handle's life, what benchmarks and tests read.
type Counters struct {
	Retries atomic.Int64
	// Batches counts multi-item batches (completions, enqueues, claims) that
	// committed as one.
	Batches atomic.Int64
}

// Cache is a small bounded map for immutable facts; when full it starts over,
// which is simple and enough for a working set of problems and nodes.
type Cache[K comparable, V any] struct {
	mu  sync.Mutex
	max int
	m   map[K]V
}

// NewCache returns an empty cache of at most max entries.
func NewCache[K comparable, V any](max int) *Cache[K, V] {
	return &Cache[K, V]{max: max, m: make(map[K]V)}
}

// Get returns k's value, if cached.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

// Put caches v for k.
func (c *Cache[K, V]) Put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = v
}

// Backoff is the capped exponential delay before retry number n (1-based).
func (s *Core) Backoff(n int) time.Duration {
	d := s.Cfg.BackoffBase
	for i := 1; i < n && d < s.Cfg.BackoffMax; i++ {
		d *= 2
	}
	return min(d, s.Cfg.BackoffMax)
}

// Core is the job database handle every part of the store shares: the pool,
// its configuration and what New learned of the server, the observer and
// notifier it reports to, test hooks, counters and the manifest cache.
type Core struct {
	// Pool is the connection pool; sqlx adds struct scanning (Get/Select) on
	// top of the same *sql.DB, so hand-written scans stay possible where they
	// are faster.
	Pool *sqlx.DB
	Cfg  Config
	// Stats counts retried deadlocks/lock waits for benchmarks and metrics.
	Stats *Counters
	// Hooks are test-only fault injection points; nil in production.
	Hooks *Hooks
	// Notifier wakes this replica's claim waiters after a commit.
	Notifier Notifier
	// Obs is told what happened, for metrics (nil: nothing is counted).
	Obs Observer
	// TxTimeout bounds one try of a transaction (0: txTryTimeout; tests
	// shorten it).
	TxTimeout time.Duration
	// TxOpts is nil when the server already defaults to READ COMMITTED, which
	// saves a round trip per transaction.
	TxOpts *sql.TxOptions
	// Multi: the pool's connections take several statements per request,
	// so a script is one round trip (see Script); MultiCounts: and the
	// driver reports every statement's row count of such a request.
	Multi, MultiCounts bool
	// Manifests caches parsed manifests; they are immutable.
	Manifests *Cache[int64, OwnedManifest]
}

// TxHandle returns a handle over db for an aggregate built over a bare
// *sql.DB (webhook groups): its pool, and InTx with the store's retries on
// deadlock and lock-wait timeout and its bound per try. Default
// configuration, nothing observed, the server's own isolation level; it
// asks the server nothing (NewCore does).
func TxHandle(db *sql.DB) *Core {
	return &Core{Pool: sqlx.NewDb(db, "mysql"), Cfg: Config{}.WithDefaults(), Stats: &Counters{}}
}

// NewCore returns the handle over db with cfg's defaults set and checked,
// after asking the server its isolation level and whether a request may
// hold several statements.
func NewCore(db *sql.DB, cfg Config) (*Core, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Core{Pool: sqlx.NewDb(db, "mysql"), Cfg: cfg, Stats: &Counters{}, Manifests: NewCache[int64, OwnedManifest](1024),
		TxOpts: &sql.TxOptions{Isolation: sql.LevelReadCommitted}}
	// MariaDB before 11.1 names it tx_isolation; MySQL 8 transaction_isolation.
	var iso string
	if err := db.QueryRow(`SELECT @@global.tx_isolation`).Scan(&iso); err != nil {
		_ = db.QueryRow(`SELECT @@global.transaction_isolation`).Scan(&iso)
	}
	if iso == "READ-COMMITTED" {
		s.TxOpts = nil
	}
	s.Multi = multiStatements(context.Background(), db)
	s.MultiCounts = s.Multi && multiRowCounts(context.Background(), db)
	return s, nil
}
