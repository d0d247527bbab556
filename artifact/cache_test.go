package artifact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// origin is a loopback HTTP server standing in for the control plane's
// artifact endpoint. It serves /a/{digest}, counts GETs per digest, can hold
// responses until a gate opens, and can be told to misbehave per digest.
type origin struct {
	srv *httptest.Server

	mu      sync.Mutex
	files   map[string][]byte
	gets    map[string]int
	gate    chan struct{}               // nil: respond at once
	arrived chan string                 // receives the digest of each request, if set
	serve   map[string]http.HandlerFunc // per-digest override
}

func newOrigin(t testing.TB) *origin {
	t.Helper()
	o := &origin{files: map[string][]byte{}, gets: map[string]int{}, serve: map[string]http.HandlerFunc{}}
	o.srv = httptest.NewServer(http.HandlerFunc(o.handle))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *origin) add(b []byte) string {
	d := digestOf(b)
	o.mu.Lock()
	o.files[d] = b
	o.mu.Unlock()
	return d
}

func (o *origin) handle(w http.ResponseWriter, r *http.Request) {
	d := strings.TrimPrefix(r.URL.Path, "/a/")
	o.mu.Lock()
	o.gets[d]++
	body, ok := o.files[d]
	gate, arrived, override := o.gate, o.arrived, o.serve[d]
	o.mu.Unlock()
	if arrived != nil {
		arrived <- d
	}
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	if override != nil {
		override(w, r)
		return
	}
	if !ok {
		http.Error(w, "no such artifact", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

func (o *origin) getCount(d string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gets[d]
}

// fetch returns a FetchFunc that GETs the digest from the origin.
func (o *origin) fetch(d string) FetchFunc {
	return func(ctx context.Context) (io.ReadCloser, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.srv.URL+"/a/"+d, nil)
		if err != nil {
			return nil, err
		}
		resp, err := o.srv.Client().Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			_ = resp.Body.Close()
			return nil, fmt.Errorf("GET %s: %s", d, resp.Status)
		}
		return resp.Body, nil
	}
}

// failFetch is a FetchFunc for tests that must be served from disk.
func failFetch(t *testing.T) FetchFunc {
	return func(context.Context) (io.ReadCloser, error) {
		t.Error("fetch called for an artifact that should be cached")
		return nil, errors.New("unexpected fetch")
	}
}

// fakeClock is a settable clock for verification ages.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func openCache(t *testing.T, cfg CacheConfig) *Cache {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := OpenCache(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

func acquireContent(t *testing.T, c *Cache, d string, want []byte, fetch FetchFunc) *Handle {
	t.Helper()
	h, err := c.Acquire(context.Background(), d, int64(len(want)), fetch)
	require.NoError(t, err)
	require.Equal(t, layoutPath(c.Dir(), d), h.Path())
	require.Equal(t, d, h.Digest())
	require.Equal(t, int64(len(want)), h.Size())
	requireFileContent(t, h.Path(), want)
	return h
}

// requireClean asserts that no temporary download is left in the cache.
func requireClean(t *testing.T, c *Cache) {
	t.Helper()
	require.Empty(t, dirNames(t, filepath.Join(c.Dir(), tmpDirName)), "temporary files left behind")
}

func TestCacheDownloadsOnceThenHits(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := openCache(t, CacheConfig{})
	body := randomBytes(20, 700<<10)
	d := o.add(body)

	h := acquireContent(t, c, d, body, o.fetch(d))
	h.Release()
	h.Release() // idempotent
	h = acquireContent(t, c, d, body, failFetch(t))
	h.Release()
	require.Equal(t, 1, o.getCount(d))
	requireClean(t, c)
	st := c.Stats()
	require.Equal(t, 1, st.Files)
	require.Equal(t, int64(len(body)), st.Bytes)
	require.Zero(t, st.PinnedFiles)
}

func TestCacheRefusesCorruptDownloads(t *testing.T) {
	t.Parallel()
	body := randomBytes(21, 64<<10)
	d := digestOf(body)

	cases := []struct {
		name  string
		serve http.HandlerFunc
		kind  error
	}{
		{"digest mismatch", func(w http.ResponseWriter, _ *http.Request) {
			bad := append([]byte{}, body...)
			bad[100] ^= 1
			_, _ = w.Write(bad)
		}, ErrDigestMismatch},
		{"short body", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write(body[:len(body)/2])
		}, ErrSizeMismatch},
		{"cut off before its content length", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = w.Write(body[:len(body)/2])
			// Returning early makes the server close the connection.
		}, ErrSizeMismatch},
		{"long body", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write(append(append([]byte{}, body...), body[:10]...))
		}, ErrSizeMismatch},
		{"empty instead of content", func(w http.ResponseWriter, _ *http.Request) {}, ErrSizeMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := newOrigin(t)
			o.add(body)
			o.serve[d] = tc.serve
			c := openCache(t, CacheConfig{})

			h, err := c.Acquire(context.Background(), d, int64(len(body)), o.fetch(d))
			require.Nil(t, h)
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorIs(t, err, tc.kind)
			var me *MismatchError
			require.ErrorAs(t, err, &me)
			requireNoFile(t, layoutPath(c.Dir(), d))
			requireClean(t, c)
			require.Zero(t, c.Stats().Files)

			// Nothing is poisoned: once the origin behaves, the same digest works.
			o.mu.Lock()
			delete(o.serve, d)
			o.mu.Unlock()
			acquireContent(t, c, d, body, o.fetch(d)).Release()
		})
	}
}

func TestCacheFetchErrorIsNotCorruption(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := openCache(t, CacheConfig{})
	d := digestOf([]byte("never published"))
	_, err := c.Acquire(context.Background(), d, 15, o.fetch(d))
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrCorrupt)
	require.Contains(t, err.Error(), "404")
	requireNoFile(t, layoutPath(c.Dir(), d))
	requireClean(t, c)
}

func TestCacheConcurrentCallersShareOneDownload(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	body := randomBytes(22, 1<<20)
	d := o.add(body)
	o.gate = make(chan struct{})
	c := openCache(t, CacheConfig{})

	const n = 8
	var joined atomic.Int32
	c.onJoin = func(string) {
		if joined.Add(1) == n-1 {
			close(o.gate) // everyone is waiting on the one download: let it finish
		}
	}
	handles := make([]*Handle, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			handles[i], errs[i] = c.Acquire(context.Background(), d, int64(len(body)), o.fetch(d))
		}()
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		requireFileContent(t, handles[i].Path(), body)
	}
	require.Equal(t, 1, o.getCount(d), "one download for all callers")
	require.Equal(t, 1, c.Stats().PinnedFiles)
	for _, h := range handles {
		h.Release()
	}
	require.Zero(t, c.Stats().PinnedFiles)
}

// blockingFetch returns a FetchFunc whose call is reported on started and
// which then waits for release: a nil error serves body, an error fails.
func blockingFetch(body []byte, started chan<- struct{}, release <-chan error) FetchFunc {
	return func(ctx context.Context) (io.ReadCloser, error) {
		started <- struct{}{}
		select {
		case err := <-release:
			if err != nil {
				return nil, err
			}
			return io.NopCloser(bytes.NewReader(body)), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func TestCacheCancelledStarterDoesNotFailOthers(t *testing.T) {
	t.Parallel()

	t.Run("download continues for the remaining caller", func(t *testing.T) {
		t.Parallel()
		body := randomBytes(23, 10<<10)
		d := digestOf(body)
		c := openCache(t, CacheConfig{})
		joined := make(chan struct{}, 1)
		c.onJoin = func(string) { joined <- struct{}{} }

		started, release := make(chan struct{}, 1), make(chan error, 1)
		ctxA, cancelA := context.WithCancel(context.Background())
		errA := make(chan error, 1)
		go func() {
			_, err := c.Acquire(ctxA, d, int64(len(body)), blockingFetch(body, started, release))
			errA <- err
		}()
		<-started
		resB := make(chan error, 1)
		var hB *Handle
		go func() {
			var err error
			hB, err = c.Acquire(context.Background(), d, int64(len(body)), failFetch(t))
			resB <- err
		}()
		<-joined
		cancelA()
		require.ErrorIs(t, <-errA, context.Canceled)
		release <- nil // the download, started for A, still completes
		require.NoError(t, <-resB)
		requireFileContent(t, hB.Path(), body)
		hB.Release()
	})

	t.Run("remaining caller retries when the first fetch then fails", func(t *testing.T) {
		t.Parallel()
		o := newOrigin(t)
		body := randomBytes(24, 10<<10)
		d := o.add(body)
		c := openCache(t, CacheConfig{})
		joined := make(chan struct{}, 1)
		c.onJoin = func(string) { joined <- struct{}{} }

		started, release := make(chan struct{}, 1), make(chan error, 1)
		ctxA, cancelA := context.WithCancel(context.Background())
		errA := make(chan error, 1)
		go func() {
			_, err := c.Acquire(ctxA, d, int64(len(body)), blockingFetch(body, started, release))
			errA <- err
		}()
		<-started
		resB := make(chan error, 1)
		var hB *Handle
		go func() {
			var err error
			hB, err = c.Acquire(context.Background(), d, int64(len(body)), o.fetch(d))
			resB <- err
		}()
		<-joined
		cancelA()
		require.ErrorIs(t, <-errA, context.Canceled)
		// A's lease is gone, so its artifact URL now answers 409.
		release <- errors.New("409 lease lost")
		require.NoError(t, <-resB, "B must not inherit A's failure")
		requireFileContent(t, hB.Path(), body)
		require.Equal(t, 1, o.getCount(d), "B fetched with its own function")
		hB.Release()
	})

	t.Run("a failure while the first caller still waits is shared", func(t *testing.T) {
		t.Parallel()
		body := randomBytes(25, 1000)
		d := digestOf(body)
		c := openCache(t, CacheConfig{})
		joined := make(chan struct{}, 1)
		c.onJoin = func(string) { joined <- struct{}{} }
		started, release := make(chan struct{}, 1), make(chan error, 1)
		errA := make(chan error, 1)
		go func() {
			_, err := c.Acquire(context.Background(), d, int64(len(body)), blockingFetch(body, started, release))
			errA <- err
		}()
		<-started
		errB := make(chan error, 1)
		go func() {
			_, err := c.Acquire(context.Background(), d, int64(len(body)), failFetch(t))
			errB <- err
		}()
		<-joined
		boom := errors.New("control plane down")
		release <- boom
		require.ErrorIs(t, <-errA, boom)
		require.ErrorIs(t, <-errB, boom)
	})

	t.Run("a joiner that gives up does not disturb the download", func(t *testing.T) {
		t.Parallel()
		body := randomBytes(26, 1000)
		d := digestOf(body)
		c := openCache(t, CacheConfig{})
		joined := make(chan struct{}, 1)
		c.onJoin = func(string) { joined <- struct{}{} }
		started, release := make(chan struct{}, 1), make(chan error, 1)
		resA := make(chan error, 1)
		var hA *Handle
		go func() {
			var err error
			hA, err = c.Acquire(context.Background(), d, int64(len(body)), blockingFetch(body, started, release))
			resA <- err
		}()
		<-started
		ctxB, cancelB := context.WithCancel(context.Background())
		errB := make(chan error, 1)
		go func() {
			_, err := c.Acquire(ctxB, d, int64(len(body)), failFetch(t))
			errB <- err
		}()
		<-joined
		cancelB()
		require.ErrorIs(t, <-errB, context.Canceled)
		release <- nil
		require.NoError(t, <-resA)
		requireFileContent(t, hA.Path(), body)
		require.Equal(t, 1, c.Stats().PinnedFiles)
		hA.Release()
		require.Zero(t, c.Stats().PinnedFiles, "B's cancelled wait holds no pin")
	})

	t.Run("when every caller gives up the download is cancelled", func(t *testing.T) {
		t.Parallel()
		body := randomBytes(27, 1<<20)
		d := digestOf(body)
		c := openCache(t, CacheConfig{})
		// The body streams half, then blocks until the download is cancelled.
		pr, pw := io.Pipe()
		bodyClosed := make(chan struct{})
		fetched := make(chan struct{})
		fetch := func(ctx context.Context) (io.ReadCloser, error) {
			close(fetched)
			go func() {
				_, _ = pw.Write(body[:len(body)/2])
				<-ctx.Done()
				close(bodyClosed)
			}()
			return pr, nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		errA := make(chan error, 1)
		go func() {
			_, err := c.Acquire(ctx, d, int64(len(body)), fetch)
			errA <- err
		}()
		<-fetched
		cancel()
		require.ErrorIs(t, <-errA, context.Canceled)
		c.wg.Wait() // the download goroutine has finished
		<-bodyClosed
		requireNoFile(t, layoutPath(c.Dir(), d))
		requireClean(t, c)
		require.Zero(t, c.Stats().InFlight)
		require.Zero(t, c.Stats().InFlightBytes)

		// A later caller starts afresh.
		h := acquireContent(t, c, d, body, func(context.Context) (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(body)), nil
		})
		h.Release()
	})
}

func TestCacheLRUEvictionSparesPinnedFiles(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := openCache(t, CacheConfig{MaxBytes: 12})
	files := map[string][]byte{}
	digests := map[string]string{}
	for i, name := range []string{"A", "B", "C", "D", "E"} {
		files[name] = randomBytes(uint64(30+i), 4)
		digests[name] = o.add(files[name])
	}
	get := func(name string) *Handle {
		return acquireContent(t, c, digests[name], files[name], o.fetch(digests[name]))
	}
	present := func(names ...string) {
		t.Helper()
		for _, name := range []string{"A", "B", "C", "D", "E"} {
			_, err := os.Stat(layoutPath(c.Dir(), digests[name]))
			want := false
			for _, p := range names {
				want = want || p == name
			}
			require.Equal(t, want, err == nil, "file %s present", name)
		}
		require.Equal(t, len(names), c.Stats().Files)
	}

	hA := get("A") // A stays pinned throughout
	get("B").Release()
	get("C").Release()
	present("A", "B", "C")

	// A is least recently used but pinned: B goes instead.
	get("D").Release()
	present("A", "C", "D")

	// Touch C, so D is now the least recently used unpinned file.
	get("C").Release()
	get("E").Release()
	present("A", "C", "E")

	// A job used A until it released it just now, so A counts as the most
	// recently used file: C, untouched since, goes first.
	hA.Release()
	get("B").Release()
	present("A", "B", "E")
	require.LessOrEqual(t, c.Stats().Bytes, int64(12))
}

func TestCacheOvershootsWhenEverythingIsPinned(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := openCache(t, CacheConfig{MaxBytes: 10})
	a, b := randomBytes(40, 6), randomBytes(41, 6)
	da, db := o.add(a), o.add(b)

	hA := acquireContent(t, c, da, a, o.fetch(da))
	hB := acquireContent(t, c, db, b, o.fetch(db))
	st := c.Stats()
	require.Equal(t, int64(12), st.Bytes)
	require.Equal(t, int64(2), st.OverBudgetBytes)
	require.Equal(t, 2, st.PinnedFiles)
	requireFileContent(t, hA.Path(), a)
	requireFileContent(t, hB.Path(), b)

	// Releasing A makes it evictable and the cache returns under budget.
	hA.Release()
	requireNoFile(t, layoutPath(c.Dir(), da))
	requireFileContent(t, hB.Path(), b)
	require.Zero(t, c.Stats().OverBudgetBytes)
	hB.Release()
}

func TestCacheRestartReindexes(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	dir := t.TempDir()
	a, b := randomBytes(50, 5000), randomBytes(51, 3000)
	da, db := o.add(a), o.add(b)

	c, err := OpenCache(context.Background(), CacheConfig{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	_, err = OpenCache(context.Background(), CacheConfig{Dir: dir})
	require.Error(t, err, "a second process must not share the directory")
	acquireContent(t, c, da, a, o.fetch(da)).Release()
	acquireContent(t, c, db, b, o.fetch(db)).Release()
	require.NoError(t, c.Close())
	_, err = c.Acquire(context.Background(), da, int64(len(a)), o.fetch(da))
	require.ErrorIs(t, err, ErrClosed)

	// A crash mid-download leaves a temporary file; a stray file is not ours.
	leftover := filepath.Join(dir, tmpDirName, "get-123")
	require.NoError(t, os.WriteFile(leftover, a[:100], 0o644))
	stray := filepath.Join(dir, da[:2], "notes.txt")
	require.NoError(t, os.WriteFile(stray, []byte("operator's"), 0o644))
	// Make B the more recently used file.
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(layoutPath(dir, da), old, time.Time{}))

	c2 := openCache(t, CacheConfig{Dir: dir})
	requireNoFile(t, leftover)
	_, err = os.Stat(stray)
	require.NoError(t, err, "files that are not ours are left alone")
	st := c2.Stats()
	require.Equal(t, 2, st.Files)
	require.Equal(t, int64(len(a)+len(b)), st.Bytes)
	acquireContent(t, c2, da, a, failFetch(t)).Release()
	require.Equal(t, 1, o.getCount(da))
	require.NoError(t, c2.Close())

	// Restarting with a smaller budget evicts in the recorded LRU order:
	// A was just used, so B goes.
	c3 := openCache(t, CacheConfig{Dir: dir, MaxBytes: 6000})
	require.Equal(t, 1, c3.Stats().Files)
	requireNoFile(t, layoutPath(dir, db))
	acquireContent(t, c3, da, a, failFetch(t)).Release()
}

func TestCacheRestartDiscardsDamagedFile(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	dir := t.TempDir()
	body := randomBytes(52, 5000)
	d := o.add(body)
	c, err := OpenCache(context.Background(), CacheConfig{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	acquireContent(t, c, d, body, o.fetch(d)).Release()
	require.NoError(t, c.Close())

	// Same size, different bytes, written while the node was down: files
	// found at start-up count as unverified, so the first use re-hashes.
	flipByte(t, layoutPath(dir, d), 10)
	c2 := openCache(t, CacheConfig{Dir: dir})
	acquireContent(t, c2, d, body, o.fetch(d)).Release()
	require.Equal(t, 2, o.getCount(d))
}

func TestCacheLazyReverify(t *testing.T) {
	t.Parallel()

	t.Run("size change is caught on the next hit", func(t *testing.T) {
		t.Parallel()
		o := newOrigin(t)
		c := openCache(t, CacheConfig{})
		body := randomBytes(60, 9000)
		d := o.add(body)
		acquireContent(t, c, d, body, o.fetch(d)).Release()
		require.NoError(t, os.Truncate(layoutPath(c.Dir(), d), 4000))

		acquireContent(t, c, d, body, o.fetch(d)).Release()
		require.Equal(t, 2, o.getCount(d), "the damaged file was downloaded again")
		requireClean(t, c)
	})

	t.Run("same-size corruption is caught once the interval passes", func(t *testing.T) {
		t.Parallel()
		o := newOrigin(t)
		clock := newFakeClock()
		c := openCache(t, CacheConfig{VerifyInterval: time.Hour})
		c.now = clock.Now
		body := randomBytes(61, 9000)
		d := o.add(body)
		acquireContent(t, c, d, body, o.fetch(d)).Release()
		flipByte(t, layoutPath(c.Dir(), d), 123)

		// Within the interval a hit costs one stat, not a re-hash.
		clock.Advance(30 * time.Minute)
		h, err := c.Acquire(context.Background(), d, int64(len(body)), failFetch(t))
		require.NoError(t, err)
		h.Release()

		clock.Advance(31 * time.Minute)
		acquireContent(t, c, d, body, o.fetch(d)).Release()
		require.Equal(t, 2, o.getCount(d))

		// The fresh copy counts as just verified.
		clock.Advance(30 * time.Minute)
		acquireContent(t, c, d, body, failFetch(t)).Release()
	})

	t.Run("a file removed behind the cache's back is fetched again", func(t *testing.T) {
		t.Parallel()
		o := newOrigin(t)
		c := openCache(t, CacheConfig{})
		body := randomBytes(62, 100)
		d := o.add(body)
		acquireContent(t, c, d, body, o.fetch(d)).Release()
		require.NoError(t, os.Remove(layoutPath(c.Dir(), d)))
		acquireContent(t, c, d, body, o.fetch(d)).Release()
		require.Equal(t, 2, o.getCount(d))
	})

	t.Run("corrupt on disk and at the origin is ErrCorrupt", func(t *testing.T) {
		t.Parallel()
		o := newOrigin(t)
		c := openCache(t, CacheConfig{})
		body := randomBytes(63, 100)
		d := o.add(body)
		acquireContent(t, c, d, body, o.fetch(d)).Release()
		require.NoError(t, os.Truncate(layoutPath(c.Dir(), d), 50))
		o.serve[d] = func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body[:50]) }
		_, err := c.Acquire(context.Background(), d, int64(len(body)), o.fetch(d))
		require.ErrorIs(t, err, ErrCorrupt)
		requireNoFile(t, layoutPath(c.Dir(), d))
		require.Zero(t, c.Stats().Files)
	})
}

func TestCacheDeclaredSizeDisagreesWithCachedFile(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := openCache(t, CacheConfig{})
	body := randomBytes(64, 1000)
	d := o.add(body)
	acquireContent(t, c, d, body, o.fetch(d)).Release()

	// A manifest that claims another size for this digest is wrong; the
	// verified file stays.
	_, err := c.Acquire(context.Background(), d, 999, failFetch(t))
	require.ErrorIs(t, err, ErrSizeMismatch)
	require.NotErrorIs(t, err, ErrCorrupt)
	requireFileContent(t, layoutPath(c.Dir(), d), body)
	require.Zero(t, c.Stats().PinnedFiles)
}

func TestCacheEmptyArtifact(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	c := openCache(t, CacheConfig{})
	d := o.add(nil)
	require.Equal(t, EmptyDigest, d)

	h := acquireContent(t, c, d, nil, o.fetch(d))
	st, err := os.Stat(h.Path())
	require.NoError(t, err)
	require.Zero(t, st.Size())
	h.Release()
	acquireContent(t, c, d, nil, failFetch(t)).Release()

	// A non-empty body for the empty digest is corrupt, not "a longer empty file".
	dir2 := openCache(t, CacheConfig{})
	o.serve[d] = func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("x")) }
	_, err = dir2.Acquire(context.Background(), d, 0, o.fetch(d))
	require.ErrorIs(t, err, ErrCorrupt)
	requireNoFile(t, layoutPath(dir2.Dir(), d))
}

func TestCacheRefusesBadArguments(t *testing.T) {
	t.Parallel()
	c := openCache(t, CacheConfig{MaxBytes: 100})
	ctx := context.Background()
	_, err := c.Acquire(ctx, "ABC", 1, failFetch(t))
	require.ErrorIs(t, err, ErrInvalidDigest)
	_, err = c.Acquire(ctx, "../"+EmptyDigest[3:], 1, failFetch(t))
	require.ErrorIs(t, err, ErrInvalidDigest)
	_, err = c.Acquire(ctx, EmptyDigest, -1, failFetch(t))
	require.ErrorIs(t, err, ErrInvalidSize)
	_, err = c.Acquire(ctx, digestOf([]byte("big")), 101, failFetch(t))
	require.ErrorIs(t, err, ErrTooLarge)
	_, err = c.Acquire(ctx, EmptyDigest, 0, nil)
	require.Error(t, err)

	require.Error(t, CacheConfig{}.Validate())
	require.Error(t, CacheConfig{Dir: "/x", MaxBytes: -1}.Validate())
	require.Error(t, CacheConfig{Dir: "/x", VerifyInterval: -time.Second}.Validate())
	require.NoError(t, CacheConfig{Dir: "/x"}.Validate())
	err = CacheConfig{MaxBytes: -1, VerifyInterval: -time.Second}.Validate()
	for _, want := range []string{"directory is empty", "max bytes -1", "verify interval -1s"} {
		require.ErrorContains(t, err, want, "every problem at once")
	}
}

func TestCacheCloseCancelsDownloads(t *testing.T) {
	t.Parallel()
	c, err := OpenCache(context.Background(), CacheConfig{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	body := randomBytes(70, 1000)
	d := digestOf(body)
	started := make(chan struct{}, 1)
	errA := make(chan error, 1)
	go func() {
		_, err := c.Acquire(context.Background(), d, int64(len(body)), blockingFetch(body, started, make(chan error)))
		errA <- err
	}()
	<-started
	require.NoError(t, c.Close())
	require.ErrorIs(t, <-errA, ErrClosed)
	requireNoFile(t, layoutPath(c.Dir(), d))
	requireClean(t, c)
}

// TestCacheConcurrentStress runs many jobs over a small budget: every handle
// must keep the right content until released, whatever eviction, shared
// downloads and cancellations do around it.
func TestCacheConcurrentStress(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	const nFiles, workers, rounds = 12, 16, 40
	bodies := make([][]byte, nFiles)
	digests := make([]string, nFiles)
	for i := range nFiles {
		bodies[i] = randomBytes(uint64(100+i), 1000+i*300)
		digests[i] = o.add(bodies[i])
	}
	const budget = 8000 // about three files: eviction and overshoot both happen
	c := openCache(t, CacheConfig{MaxBytes: budget})

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				i := (w*7 + r*5) % nFiles
				ctx, cancel := context.WithCancel(context.Background())
				if (w+r)%9 == 0 {
					cancel() // some jobs lose their lease before or while acquiring
				}
				h, err := c.Acquire(ctx, digests[i], int64(len(bodies[i])), o.fetch(digests[i]))
				cancel()
				if err != nil {
					if errors.Is(err, context.Canceled) {
						continue
					}
					errs <- fmt.Errorf("acquire %d: %w", i, err)
					return
				}
				got, err := os.ReadFile(h.Path())
				if err != nil || !bytes.Equal(got, bodies[i]) {
					errs <- fmt.Errorf("pinned file %d changed under its job (err %v)", i, err)
					return
				}
				h.Release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	c.wg.Wait()
	st := c.Stats()
	require.Zero(t, st.PinnedFiles)
	require.Zero(t, st.InFlight)
	require.LessOrEqual(t, st.Bytes, int64(budget))
	requireClean(t, c)
	// The index matches the directory.
	onDisk := 0
	for _, d := range digests {
		if _, err := os.Stat(layoutPath(c.Dir(), d)); err == nil {
			onDisk++
		}
	}
	require.Equal(t, st.Files, onDisk)
}
