package artifact

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newStore(t *testing.T, cfg StoreConfig) *Store {
	t.Helper()
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := OpenStore(context.Background(), cfg)
	require.NoError(t, err)
	return s
}

func TestStorePutOpenStat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, StoreConfig{})
	body := randomBytes(1, 300<<10) // several copy chunks
	d := digestOf(body)

	created, err := s.Put(ctx, d, int64(len(body)), bytes.NewReader(body))
	require.NoError(t, err)
	require.True(t, created)
	requireFileContent(t, layoutPath(s.Root(), d), body)

	size, err := s.Stat(d)
	require.NoError(t, err)
	require.Equal(t, int64(len(body)), size)

	f, size, err := s.Open(d)
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, int64(len(body)), size)
	got, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, body, got)

	// Idempotent: the same upload again creates nothing and succeeds.
	created, err = s.Put(ctx, d, int64(len(body)), bytes.NewReader(body))
	require.NoError(t, err)
	require.False(t, created)
	// So does an upload that did not declare its size.
	created, err = s.Put(ctx, d, SizeUnknown, bytes.NewReader(body))
	require.NoError(t, err)
	require.False(t, created)
	require.Empty(t, dirNames(t, filepath.Join(s.Root(), tmpDirName)))
}

func TestStoreEmptyArtifact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, StoreConfig{})
	require.Equal(t, EmptyDigest, digestOf(nil))

	created, err := s.Put(ctx, EmptyDigest, 0, strings.NewReader(""))
	require.NoError(t, err)
	require.True(t, created)
	size, err := s.Stat(EmptyDigest)
	require.NoError(t, err)
	require.Zero(t, size)
	f, size, err := s.Open(EmptyDigest)
	require.NoError(t, err)
	require.Zero(t, size)
	got, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Empty(t, got)
	require.NoError(t, f.Close())
	require.NoError(t, s.Verify(ctx, EmptyDigest))

	// A one-byte body is not the empty artifact.
	_, err = s.Put(ctx, EmptyDigest, 0, strings.NewReader("x"))
	require.ErrorIs(t, err, ErrSizeMismatch)
}

func TestStorePutRefusesMismatches(t *testing.T) {
	t.Parallel()
	body := randomBytes(2, 4096)
	d := digestOf(body)
	other := randomBytes(3, 4096)

	cases := []struct {
		name   string
		size   int64
		body   []byte
		max    int64
		target error
	}{
		{"digest", int64(len(body)), other, 0, ErrDigestMismatch},
		{"short body", int64(len(body)), body[:100], 0, ErrSizeMismatch},
		{"long body", int64(len(body)), append(append([]byte{}, body...), 'x'), 0, ErrSizeMismatch},
		{"declared too large", int64(len(body)), body, 1000, ErrTooLarge},
		{"unknown size too large", SizeUnknown, body, 1000, ErrTooLarge},
		{"unknown size wrong digest", SizeUnknown, other, 0, ErrDigestMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t, StoreConfig{MaxArtifactBytes: tc.max})
			created, err := s.Put(context.Background(), d, tc.size, bytes.NewReader(tc.body))
			require.ErrorIs(t, err, tc.target)
			var me *MismatchError
			require.ErrorAs(t, err, &me)
			require.Equal(t, d, me.Digest)
			require.False(t, created)

			_, err = s.Stat(d)
			require.ErrorIs(t, err, ErrNotFound)
			requireNoFile(t, layoutPath(s.Root(), d))
			require.Empty(t, dirNames(t, filepath.Join(s.Root(), tmpDirName)), "no temporary file may be left")
		})
	}
}

func TestStoreInvalidArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, StoreConfig{})
	good := digestOf([]byte("x"))
	bad := []string{
		"",
		good[:63],
		good + "0",
		strings.ToUpper(good),
		"../../../../../../../../../../../../../../../../../../etc/passwd" + good[:1],
		strings.Repeat("g", 64),
		"sha256:" + good[:57],
	}
	for _, d := range bad {
		_, err := s.Put(ctx, d, 1, strings.NewReader("x"))
		require.ErrorIs(t, err, ErrInvalidDigest, "%q", d)
		require.ErrorIs(t, err, ErrInvalid, "%q", d)
		_, _, err = s.Open(d)
		require.ErrorIs(t, err, ErrInvalidDigest, "%q", d)
		_, err = s.Stat(d)
		require.ErrorIs(t, err, ErrInvalidDigest, "%q", d)
	}
	_, err := s.Put(ctx, good, -2, strings.NewReader("x"))
	require.ErrorIs(t, err, ErrInvalidSize)
	require.ErrorIs(t, err, ErrInvalid)

	_, _, err = s.Open(good)
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorIs(t, s.Verify(ctx, good), ErrNotFound)
}

func TestStorePutExistingStillVerifiesBody(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, StoreConfig{})
	body := randomBytes(4, 1000)
	d := digestOf(body)
	_, err := s.Put(ctx, d, int64(len(body)), bytes.NewReader(body))
	require.NoError(t, err)

	wrong := randomBytes(5, 1000)
	created, err := s.Put(ctx, d, int64(len(body)), bytes.NewReader(wrong))
	require.ErrorIs(t, err, ErrDigestMismatch)
	require.False(t, created)
	requireFileContent(t, layoutPath(s.Root(), d), body)
}

func TestStorePutRepairsDamagedCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, StoreConfig{})
	body := randomBytes(6, 5000)
	d := digestOf(body)
	_, err := s.Put(ctx, d, int64(len(body)), bytes.NewReader(body))
	require.NoError(t, err)
	path := layoutPath(s.Root(), d)
	require.NoError(t, os.Truncate(path, 10))

	err = s.Verify(ctx, d)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorIs(t, err, ErrDigestMismatch)

	created, err := s.Put(ctx, d, int64(len(body)), bytes.NewReader(body))
	require.NoError(t, err)
	require.True(t, created, "a damaged copy is replaced")
	requireFileContent(t, path, body)
	require.NoError(t, s.Verify(ctx, d))
}

func TestStoreVerifyDetectsSameSizeCorruption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, StoreConfig{})
	body := randomBytes(7, 5000)
	d := digestOf(body)
	_, err := s.Put(ctx, d, int64(len(body)), bytes.NewReader(body))
	require.NoError(t, err)
	require.NoError(t, s.Verify(ctx, d))

	flipByte(t, layoutPath(s.Root(), d), 2500)
	err = s.Verify(ctx, d)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorIs(t, err, ErrDigestMismatch)
}

func TestStoreConcurrentPutsCreateOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, StoreConfig{})
	body := randomBytes(8, 200<<10)
	d := digestOf(body)

	const n = 8
	var wg sync.WaitGroup
	results := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = s.Put(ctx, d, int64(len(body)), bytes.NewReader(body))
		}()
	}
	wg.Wait()
	createdCount := 0
	for i := range n {
		require.NoError(t, errs[i])
		if results[i] {
			createdCount++
		}
	}
	require.Equal(t, 1, createdCount, "exactly one upload creates the file")
	requireFileContent(t, layoutPath(s.Root(), d), body)
	require.Empty(t, dirNames(t, filepath.Join(s.Root(), tmpDirName)))
}

// cancellingReader cancels its context after the first chunk, like a client
// that disconnects mid-upload.
type cancellingReader struct {
	r      io.Reader
	cancel context.CancelFunc
	once   sync.Once
}

func (c *cancellingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.once.Do(c.cancel)
	return n, err
}

func TestStorePutCancelledLeavesNothing(t *testing.T) {
	t.Parallel()
	s := newStore(t, StoreConfig{})
	body := randomBytes(9, 1<<20)
	d := digestOf(body)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := s.Put(ctx, d, int64(len(body)), &cancellingReader{r: bytes.NewReader(body), cancel: cancel})
	require.ErrorIs(t, err, context.Canceled)
	requireNoFile(t, layoutPath(s.Root(), d))
	require.Empty(t, dirNames(t, filepath.Join(s.Root(), tmpDirName)))
}

func TestStorePutReadErrorLeavesNothing(t *testing.T) {
	t.Parallel()
	s := newStore(t, StoreConfig{})
	body := randomBytes(10, 1<<20)
	d := digestOf(body)
	boom := errors.New("connection reset")
	r := io.MultiReader(bytes.NewReader(body[:1000]), iotestErrReader{boom})
	_, err := s.Put(context.Background(), d, int64(len(body)), r)
	require.ErrorIs(t, err, boom)
	requireNoFile(t, layoutPath(s.Root(), d))
	require.Empty(t, dirNames(t, filepath.Join(s.Root(), tmpDirName)))
}

type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }

func TestOpenStoreRemovesOnlyStaleTemporaryFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	tmp := filepath.Join(root, tmpDirName)
	require.NoError(t, os.MkdirAll(tmp, 0o750))
	stale := filepath.Join(tmp, "put-stale")
	fresh := filepath.Join(tmp, "put-fresh")
	require.NoError(t, os.WriteFile(stale, []byte("half an upload"), 0o600))
	require.NoError(t, os.WriteFile(fresh, []byte("another replica's upload"), 0o600))
	old := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(stale, old, old))

	newStore(t, StoreConfig{Root: root, StaleTempAfter: time.Hour})
	requireNoFile(t, stale)
	_, err := os.Stat(fresh)
	require.NoError(t, err, "an upload in progress elsewhere must survive")
}

func TestStoreConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, StoreConfig{Root: "/x"}.Validate())
	require.Error(t, StoreConfig{}.Validate())
	require.Error(t, StoreConfig{Root: "/x", MaxArtifactBytes: -1}.Validate())
	require.Error(t, StoreConfig{Root: "/x", StaleTempAfter: -time.Second}.Validate())
	err := StoreConfig{MaxArtifactBytes: -1, StaleTempAfter: -time.Second}.Validate()
	for _, want := range []string{"root directory is empty", "max artifact bytes -1", "stale temp age -1s"} {
		require.ErrorContains(t, err, want, "every problem at once")
	}
	_, err = OpenStore(context.Background(), StoreConfig{})
	require.Error(t, err)

	s := newStore(t, StoreConfig{})
	require.Equal(t, StoreMaxArtifactBytesDefault, s.MaxArtifactBytes())
}

// flipByte inverts one byte of a file in place, keeping its size.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

// A repeated upload takes the path of a new one (a temporary file, then
// publish), so its answer time does not tell whether the content was stored
// already: with no temporary directory to write to, it fails as a new
// upload does, where a shortcut for stored content would succeed.
func TestStorePutOfStoredContentWritesLikeNew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, StoreConfig{})
	body := []byte("42\n")
	d := digestOf(body)
	_, err := s.Put(ctx, d, int64(len(body)), bytes.NewReader(body))
	require.NoError(t, err)

	tmp := filepath.Join(s.Root(), tmpDirName)
	require.NoError(t, os.RemoveAll(tmp))
	require.NoError(t, os.WriteFile(tmp, nil, 0o600)) // a file where the directory was
	fresh := []byte("43\n")
	for _, b := range [][]byte{fresh, body} {
		_, err := s.Put(ctx, digestOf(b), int64(len(b)), bytes.NewReader(b))
		require.ErrorContains(t, err, "create temporary file", "%q", b)
	}
}

// An upload of content already stored changes its shard directory as new
// content does (a spare link), so the shard's fsync has the same work to
// do and the answer's time does not tell the content existed; the spare
// link is gone a moment later and the stored copy is intact.
func TestStorePutOfStoredContentChangesTheShardLikeNew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, StoreConfig{})
	body := []byte("stored already\n")
	d := digestOf(body)
	_, err := s.Put(ctx, d, int64(len(body)), bytes.NewReader(body))
	require.NoError(t, err)
	shard := filepath.Join(s.Root(), d[:2])
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(shard, old, old))

	created, err := s.Put(ctx, d, int64(len(body)), bytes.NewReader(body))
	require.NoError(t, err)
	require.False(t, created)
	st, err := os.Stat(shard)
	require.NoError(t, err)
	require.True(t, st.ModTime().After(old.Add(time.Minute)), "the shard directory changed: %v", st.ModTime())
	requireFileContent(t, layoutPath(s.Root(), d), body)
	require.Eventually(t, func() bool { return slices.Equal(dirNames(t, shard), []string{d}) },
		10*time.Second, 10*time.Millisecond, "the spare link is removed")
	requireFileContent(t, layoutPath(s.Root(), d), body)
}

// OpenStore makes every shard, so no upload makes one (which stored content
// never needs), and removes the spare links a crash left, stale ones only.
func TestOpenStoreMakesShardsAndRemovesStaleSpares(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "ab"), 0o750))
	stale := filepath.Join(root, "ab", spareDot+"put-1")
	fresh := filepath.Join(root, "ab", spareDot+"put-2")
	for _, p := range []string{stale, fresh} {
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o600))
	}
	old := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(stale, old, old))

	newStore(t, StoreConfig{Root: root, StaleTempAfter: time.Hour})
	requireNoFile(t, stale)
	_, err := os.Stat(fresh)
	require.NoError(t, err, "another replica's upload in progress")
	names := dirNames(t, root)
	require.Len(t, names, 257, "256 shards and the temporary directory")
	require.Contains(t, names, "00")
	require.Contains(t, names, "ff")
}
