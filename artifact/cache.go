package artifact

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Cache defaults; a zero field in CacheConfig takes its default.
const (
	// CacheMaxBytesDefault is the disk budget of a node's cache.
	CacheMaxBytesDefault int64 = 10 << 30
	// CacheVerifyIntervalDefault is how long a verified file is trusted before
	// its next use re-hashes it.
	CacheVerifyIntervalDefault = 24 * time.Hour
)

const (
	// Cached files are mounted read-only into the sandbox, which runs as a
	// non-root user, so they are world-readable. Test data is not a secret on
	// the judge host.
	cacheDirMode  os.FileMode = 0o755
	cacheFileMode os.FileMode = 0o644
)

// CacheConfig configures a Cache.
type CacheConfig struct {
	// Dir holds the cached files; created if missing. One process per Dir:
	// OpenCache locks it.
	Dir string
	// MaxBytes is the disk budget (0: default). See Cache for when it may be
	// exceeded.
	MaxBytes int64
	// VerifyInterval: a cache hit re-hashes the file when it was last verified
	// longer ago than this (0: default). Files found on disk at start-up count
	// as never verified.
	VerifyInterval time.Duration
	// Logger receives operator-relevant events (nil: slog.Default()).
	Logger *slog.Logger
}

func (c CacheConfig) withDefaults() CacheConfig {
	c.MaxBytes = cmp.Or(c.MaxBytes, CacheMaxBytesDefault)
	c.VerifyInterval = cmp.Or(c.VerifyInterval, CacheVerifyIntervalDefault)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate refuses an empty directory and negative values, naming every
// problem. Zero values are valid and mean the defaults.
func (c CacheConfig) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("artifact cache: directory is empty"))
	}
	if c.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("artifact cache: max bytes %d is negative", c.MaxBytes))
	}
	if c.VerifyInterval < 0 {
		errs = append(errs, fmt.Errorf("artifact cache: verify interval %v is negative", c.VerifyInterval))
	}
	return errors.Join(errs...)
}

// FetchFunc opens the body of one artifact, typically an HTTP GET of the
// job's artifact URL. It must honour ctx. The cache closes the body.
type FetchFunc func(ctx context.Context) (io.ReadCloser, error)

// Cache is a node's local copy of artifacts, bounded by a byte budget.
//
// Acquire returns a pinned, verified file; the caller Releases the Handle when
// its job ends. Concurrent Acquire calls for one digest share one download.
// Unpinned files are evicted least-recently-used first whenever the budget
// (indexed files plus downloads in flight) is exceeded. Pinned files are never
// evicted: if everything is pinned, the cache overshoots its budget until
// enough handles are released, because failing a running job to honour a disk
// budget would be worse than using a little more disk for a while.
//
// A download is written to Dir/.tmp, hashed and counted while streaming,
// checked against the declared size and digest, fsynced and only then renamed
// to Dir/ab/abcdef…, so a partial file never carries a final name. On restart
// OpenCache removes temporary leftovers and indexes the files on disk.
type Cache struct {
	dir         string
	tmp         string
	max         int64
	verifyEvery time.Duration
	log         *slog.Logger
	lock        *os.File

	// now and onJoin are test seams: the clock used for verification ages,
	// and a signal that a caller joined a download already in flight.
	now    func() time.Time
	onJoin func(digest string)

	ctx    context.Context // parent of every download; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // download goroutines

	mu        sync.Mutex
	closed    bool
	entries   map[string]*entry
	lru       *list.List // of *entry; front is most recently used
	total     int64      // bytes of indexed files
	reserved  int64      // declared bytes of downloads in flight
	flights   map[string]*flight
	overshoot bool // over budget with nothing evictable (logged once per episode)

	// Counters since open, for metrics (under mu).
	hits, misses, evictions int64
}

// entry is one indexed file.
type entry struct {
	digest     string
	size       int64
	pins       int
	verifiedAt time.Time // zero: not verified by this process
	elem       *list.Element
	gone       bool // removed from the index (evicted or discarded)
}

// OpenCache opens (creating if needed) and locks a cache directory, removes
// leftovers of interrupted downloads and indexes the files already there in
// their last-used order (file access times). Their sizes come from stat; each
// is re-hashed on its first use.
func OpenCache(ctx context.Context, cfg CacheConfig) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("artifact cache: directory: %w", err)
	}
	c := &Cache{
		dir:         dir,
		tmp:         filepath.Join(dir, tmpDirName),
		max:         cfg.MaxBytes,
		verifyEvery: cfg.VerifyInterval,
		log:         cfg.Logger,
		now:         time.Now,
		entries:     make(map[string]*entry),
		lru:         list.New(),
		flights:     make(map[string]*flight),
	}
	if err := os.MkdirAll(dir, cacheDirMode); err != nil {
		return nil, fmt.Errorf("artifact cache: create %s: %w", dir, err)
	}
	if c.lock, err = lockDir(dir); err != nil {
		return nil, fmt.Errorf("artifact cache: %w", err)
	}
	if err := c.scan(ctx); err != nil {
		_ = c.lock.Close()
		return nil, fmt.Errorf("artifact cache: %w", err)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// scan removes temporary leftovers and indexes the cached files. Only names
// that look like our own files are touched, so a misconfigured Dir pointing at
// something else loses nothing.
func (c *Cache) scan(ctx context.Context) error {
	if err := os.RemoveAll(c.tmp); err != nil {
		return fmt.Errorf("remove temporary files: %w", err)
	}
	if err := os.Mkdir(c.tmp, cacheDirMode); err != nil {
		return fmt.Errorf("create %s: %w", c.tmp, err)
	}
	shards, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("scan %s: %w", c.dir, err)
	}
	type found struct {
		digest string
		size   int64
		used   time.Time
	}
	var files []found
	for _, sd := range shards {
		if !sd.IsDir() || !isShardName(sd.Name()) {
			continue
		}
		names, err := os.ReadDir(filepath.Join(c.dir, sd.Name()))
		if err != nil {
			return fmt.Errorf("scan shard %s: %w", sd.Name(), err)
		}
		for _, fe := range names {
			if err := ctx.Err(); err != nil {
				return err
			}
			name := fe.Name()
			if ValidateDigest(name) != nil || name[:2] != sd.Name() || !fe.Type().IsRegular() {
				c.log.WarnContext(ctx, "artifact cache ignores a foreign file", "path", filepath.Join(c.dir, sd.Name(), name))
				continue
			}
			info, err := fe.Info()
			if err != nil {
				continue // removed meanwhile
			}
			files = append(files, found{digest: name, size: info.Size(), used: accessTime(info)})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].used.Before(files[j].used) })
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range files {
		c.insertLocked(f.digest, f.size, time.Time{})
	}
	c.evictLocked()
	c.log.InfoContext(ctx, "artifact cache opened", "dir", c.dir, "files", len(c.entries), "bytes", c.total, "max_bytes", c.max)
	return nil
}

// isShardName reports whether name is two lowercase hex characters.
func isShardName(name string) bool {
	return len(name) == 2 && ValidateDigest(name+EmptyDigest[2:]) == nil
}

// Dir returns the absolute cache directory.
func (c *Cache) Dir() string { return c.dir }

func (c *Cache) path(digest string) string { return filepath.Join(c.dir, relPath(digest)) }

// Acquire returns a pinned local file holding the artifact. size is the size
// the manifest declares. On a hit the file's size is checked on every call,
// and it is re-hashed when the size differs or its last verification is older
// than VerifyInterval; a damaged file is discarded and downloaded again. On a
// miss, fetch is called once for all concurrent callers of this digest.
//
// A download that is short, long or hashes differently is discarded and
// returned as ErrCorrupt wrapping a *MismatchError (ErrSizeMismatch or
// ErrDigestMismatch). A fetch error is returned wrapped. Both are
// infrastructure faults for the caller; neither leaves a file behind.
//
// If the caller whose fetch is in use gives up (its ctx ends), the download
// continues for the others; should it then fail, each remaining caller
// retries with its own fetch, so one job's lost lease does not fail another
// job. When every caller has given up, the download is cancelled.
func (c *Cache) Acquire(ctx context.Context, digest string, size int64, fetch FetchFunc) (*Handle, error) {
	if err := ValidateDigest(digest); err != nil {
		return nil, err
	}
	if size < 0 {
		return nil, fmt.Errorf("%w (got %d)", ErrInvalidSize, size)
	}
	if size > c.max {
		// It could never fit; refusing says so plainly instead of evicting
		// the whole cache and then overshooting anyway.
		return nil, &MismatchError{Kind: ErrTooLarge, Digest: digest,
			Want: "at most " + strconv.FormatInt(c.max, 10) + " (cache budget)", Got: strconv.FormatInt(size, 10)}
	}
	if fetch == nil {
		return nil, errors.New("artifact cache: fetch function is nil")
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		if e := c.entries[digest]; e != nil {
			c.hits++
			e.pins++
			c.lru.MoveToFront(e.elem)
			stale := c.now().Sub(e.verifiedAt) >= c.verifyEvery
			c.mu.Unlock()
			h, err := c.checkHit(ctx, e, size, stale)
			if h != nil || err != nil {
				return h, err
			}
			continue // discarded as damaged: download again
		}
		c.misses++
		f, starter := c.flights[digest], false
		if f != nil {
			f.waiters++
		} else {
			f, starter = c.startLocked(digest, size, fetch), true
		}
		onJoin := c.onJoin
		c.mu.Unlock()
		if !starter && onJoin != nil {
			onJoin(digest)
		}
		h, retry, err := c.wait(ctx, f, starter, size)
		if !retry {
			return h, err
		}
		c.log.InfoContext(ctx, "artifact download failed after its first caller left; retrying with this caller's fetch",
			"digest", digest, "error", f.err)
	}
}

// checkHit verifies a pinned entry as Acquire promises. It returns a handle,
// an error (with the pin dropped), or neither when the file was damaged and
// has been discarded.
func (c *Cache) checkHit(ctx context.Context, e *entry, size int64, stale bool) (*Handle, error) {
	path := c.path(e.digest)
	st, err := os.Stat(path)
	if err != nil {
		c.log.WarnContext(ctx, "artifact cache file vanished; downloading again", "digest", e.digest, "error", err)
		c.discard(e)
		return nil, nil
	}
	if stale || st.Size() != size || st.Size() != e.size {
		// Hash the whole file as it is; then decide whose size is wrong.
		err := hashFile(ctx, path, e.digest, st.Size())
		var me *MismatchError
		switch {
		case errors.Is(err, os.ErrNotExist):
			// Discarded by a concurrent caller that found it damaged.
			c.discard(e)
			return nil, nil
		case errors.As(err, &me):
			c.log.WarnContext(ctx, "artifact cache file is corrupt; downloading again", "digest", e.digest, "error", err)
			c.discard(e)
			return nil, nil
		case err != nil:
			c.release(e)
			return nil, fmt.Errorf("artifact %s: verify cached file: %w", short(e.digest), err)
		}
		c.mu.Lock()
		e.verifiedAt = c.now()
		if !e.gone && e.size != st.Size() {
			c.total += st.Size() - e.size
		}
		e.size = st.Size()
		c.mu.Unlock()
		if st.Size() != size {
			// The file is exactly its digest; the declared size is wrong.
			c.release(e)
			return nil, &MismatchError{Kind: ErrSizeMismatch, Digest: e.digest,
				Want: strconv.FormatInt(size, 10), Got: strconv.FormatInt(st.Size(), 10)}
		}
	}
	// Record the use on disk so the LRU order survives a restart.
	_ = os.Chtimes(path, c.now(), time.Time{})
	return c.newHandle(e, size), nil
}

// insertLocked indexes a file as most recently used. c.mu is held.
func (c *Cache) insertLocked(digest string, size int64, verifiedAt time.Time) *entry {
	e := &entry{digest: digest, size: size, verifiedAt: verifiedAt}
	e.elem = c.lru.PushFront(e)
	c.entries[digest] = e
	c.total += size
	return e
}

// removeLocked drops an entry from the index and deletes its file. c.mu is
// held, which orders the removal with publications of the same name.
func (c *Cache) removeLocked(e *entry) {
	if e.gone {
		return
	}
	e.gone = true
	delete(c.entries, e.digest)
	c.lru.Remove(e.elem)
	c.total -= e.size
	if err := os.Remove(c.path(e.digest)); err != nil && !errors.Is(err, os.ErrNotExist) {
		c.log.Warn("artifact cache could not remove a file", "digest", e.digest, "error", err)
	}
}

// evictLocked removes unpinned entries, least recently used first, until the
// indexed files plus downloads in flight fit the budget, or nothing unpinned
// is left (then the cache overshoots; see Cache). c.mu is held.
func (c *Cache) evictLocked() {
	for c.total+c.reserved > c.max {
		var victim *entry
		for el := c.lru.Back(); el != nil; el = el.Prev() {
			if e := el.Value.(*entry); e.pins == 0 {
				victim = e
				break
			}
		}
		if victim == nil {
			if !c.overshoot {
				c.overshoot = true
				c.log.Warn("artifact cache over budget with every file pinned",
					"bytes", c.total, "in_flight_bytes", c.reserved, "max_bytes", c.max)
			}
			return
		}
		c.log.Debug("artifact cache evicts", "digest", victim.digest, "size", victim.size)
		c.removeLocked(victim)
		c.evictions++
	}
	c.overshoot = false
}

// discard drops a damaged entry (and the caller's pin). Holders of other pins
// keep their handles; their path now names a missing or re-downloaded file,
// which is still better than judging against damaged data.
func (c *Cache) discard(e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.pins--
	if c.entries[e.digest] == e {
		c.removeLocked(e)
	}
}

func (c *Cache) release(e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(e)
}

// releaseLocked drops one pin, records the use and evicts if the budget was
// exceeded while everything was pinned. c.mu is held.
func (c *Cache) releaseLocked(e *entry) {
	e.pins--
	if e.gone {
		return
	}
	c.lru.MoveToFront(e.elem)
	if e.pins == 0 && c.total+c.reserved > c.max {
		c.evictLocked()
	}
}

// newHandle wraps a pinned entry whose verified size is size.
func (c *Cache) newHandle(e *entry, size int64) *Handle {
	return &Handle{c: c, e: e, path: c.path(e.digest), size: size}
}

// Handle is a pinned cached file. Its file is not evicted until Release.
type Handle struct {
	c        *Cache
	e        *entry
	path     string
	size     int64
	released atomic.Bool
}

// Path is the absolute path of the verified file. Treat it as read-only.
func (h *Handle) Path() string { return h.path }

// Size is the verified size in bytes.
func (h *Handle) Size() int64 { return h.size }

// Digest is the artifact's digest.
func (h *Handle) Digest() string { return h.e.digest }

// Release unpins the file. Call it once the job no longer reads the file;
// further calls do nothing.
func (h *Handle) Release() {
	if h.released.CompareAndSwap(false, true) {
		h.c.release(h.e)
	}
}

// CacheStats is a snapshot for health reports.
type CacheStats struct {
	Files           int
	Bytes           int64
	PinnedFiles     int
	PinnedBytes     int64
	InFlight        int
	InFlightBytes   int64
	MaxBytes        int64
	OverBudgetBytes int64 // > 0 only while pinned files force an overshoot
	// Hits are Acquire calls served from an indexed file; Misses joined or
	// started a download; Evictions are files removed to stay in budget.
	Hits, Misses, Evictions int64
}

// Stats returns a snapshot of the cache's occupancy.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := CacheStats{Files: len(c.entries), Bytes: c.total, InFlight: len(c.flights), InFlightBytes: c.reserved, MaxBytes: c.max,
		Hits: c.hits, Misses: c.misses, Evictions: c.evictions}
	for _, e := range c.entries {
		if e.pins > 0 {
			s.PinnedFiles++
			s.PinnedBytes += e.size
		}
	}
	if over := c.total + c.reserved - c.max; over > 0 {
		s.OverBudgetBytes = over
	}
	return s
}

// Close cancels downloads in flight, waits for them and unlocks the
// directory. Handles already returned keep their files; Acquire fails with
// ErrClosed.
func (c *Cache) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	if err := c.lock.Close(); err != nil {
		return fmt.Errorf("artifact cache: unlock: %w", err)
	}
	return nil
}
