package artifact

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Store defaults; a zero field in StoreConfig takes its default.
const (
	// StoreMaxArtifactBytesDefault bounds one stored file (the business API
	// promises 256 MiB per artifact).
	StoreMaxArtifactBytesDefault int64 = 256 << 20
	// StoreStaleTempAfterDefault is the age after which OpenStore removes an
	// upload's temporary file. It is long so that replicas sharing one root
	// never delete each other's uploads in progress.
	StoreStaleTempAfterDefault = time.Hour
)

// SizeUnknown may be passed to Store.Put when the uploader did not declare a
// size; the body is then bounded by StoreConfig.MaxArtifactBytes only.
const SizeUnknown int64 = -1

const (
	storeDirMode  os.FileMode = 0o750
	storeFileMode os.FileMode = 0o640
	// tmpDirName holds uploads and downloads in progress. It starts with a
	// dot and is longer than two characters, so it never collides with a shard.
	tmpDirName = ".tmp"
)

// StoreConfig configures a Store.
type StoreConfig struct {
	// Root is the directory that holds the files; created if missing.
	Root string
	// MaxArtifactBytes refuses larger uploads with ErrTooLarge (0: default).
	MaxArtifactBytes int64
	// StaleTempAfter is how old a leftover temporary file must be before
	// OpenStore removes it (0: default).
	StaleTempAfter time.Duration
	// Logger receives operator-relevant events (nil: slog.Default()).
	Logger *slog.Logger
}

func (c StoreConfig) withDefaults() StoreConfig {
	c.MaxArtifactBytes = cmp.Or(c.MaxArtifactBytes, StoreMaxArtifactBytesDefault)
	c.StaleTempAfter = cmp.Or(c.StaleTempAfter, StoreStaleTempAfterDefault)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate refuses an empty root and negative limits, naming every problem.
// Zero limits are valid and mean the defaults.
func (c StoreConfig) Validate() error {
	var errs []error
	if c.Root == "" {
		errs = append(errs, errors.New("artifact store: root directory is empty"))
	}
	if c.MaxArtifactBytes < 0 {
		errs = append(errs, fmt.Errorf("artifact store: max artifact bytes %d is negative", c.MaxArtifactBytes))
	}
	if c.StaleTempAfter < 0 {
		errs = append(errs, fmt.Errorf("artifact store: stale temp age %v is negative", c.StaleTempAfter))
	}
	return errors.Join(errs...)
}

// Store keeps artifacts on a filesystem, one file per digest at
// root/ab/abcdef…. It is safe for concurrent use, also by several processes
// sharing one root: every publication is an atomic link or rename of a fully
// written, verified and fsynced file.
type Store struct {
	root string
	tmp  string
	max  int64
	log  *slog.Logger
}

// OpenStore creates the root if needed and removes temporary files older than
// StaleTempAfter (uploads interrupted by a crash).
func OpenStore(ctx context.Context, cfg StoreConfig) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("artifact store: root: %w", err)
	}
	s := &Store{root: root, tmp: filepath.Join(root, tmpDirName), max: cfg.MaxArtifactBytes, log: cfg.Logger}
	if err := os.MkdirAll(s.tmp, storeDirMode); err != nil {
		return nil, fmt.Errorf("artifact store: create %s: %w", s.tmp, err)
	}
	removed, err := removeStaleTemp(ctx, s.tmp, time.Now().Add(-cfg.StaleTempAfter))
	if err != nil {
		return nil, fmt.Errorf("artifact store: %w", err)
	}
	if removed > 0 {
		s.log.InfoContext(ctx, "artifact store removed stale temporary files", "root", root, "removed", removed)
	}
	return s, nil
}

// removeStaleTemp removes regular files in dir modified before cutoff.
func removeStaleTemp(ctx context.Context, dir string, cutoff time.Time) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("scan %s: %w", dir, err)
	}
	removed := 0
	for _, de := range entries {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		info, err := de.Info()
		if err != nil || !info.Mode().IsRegular() || !info.ModTime().Before(cutoff) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, de.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("remove stale %s: %w", de.Name(), err)
		}
		removed++
	}
	return removed, nil
}

// Root returns the absolute root directory.
func (s *Store) Root() string { return s.root }

// MaxArtifactBytes returns the configured size bound.
func (s *Store) MaxArtifactBytes() int64 { return s.max }

func (s *Store) path(digest string) string { return filepath.Join(s.root, relPath(digest)) }

// Put stores the body read from r under digest. size is the declared length
// (SizeUnknown if the uploader did not say). The body is streamed to a
// temporary file while being hashed and counted, and published only if it
// matches; otherwise nothing is left behind and the error matches
// ErrSizeMismatch, ErrDigestMismatch or ErrTooLarge (a *MismatchError).
// A malformed digest or size matches ErrInvalid.
//
// Put is idempotent: if the artifact is already stored, the body is still
// read, written to a temporary file and verified exactly like a new one (so
// its timing does not tell that the content existed), then dropped, and
// created is false. A stored copy of the uploaded size is trusted without
// re-reading it (Verify does that); one of the wrong size is replaced by the
// verified upload.
func (s *Store) Put(ctx context.Context, digest string, size int64, r io.Reader) (created bool, err error) {
	if err := ValidateDigest(digest); err != nil {
		return false, err
	}
	if size < SizeUnknown {
		return false, fmt.Errorf("%w (got %d)", ErrInvalidSize, size)
	}
	if size > s.max {
		return false, &MismatchError{Kind: ErrTooLarge, Digest: digest,
			Want: "at most " + strconv.FormatInt(s.max, 10), Got: strconv.FormatInt(size, 10)}
	}
	limit := size
	if size == SizeUnknown {
		limit = s.max
	}
	final := s.path(digest)

	// Content already stored takes the same path as new content (temporary
	// file, fsync, then publish finds the stored copy and drops it): an
	// upload that skipped the write would answer a fsync sooner, telling a
	// tenant that another one holds the content (docs/business.md
	// "Tenancy"). The cost is one write of the body per repeated upload.
	tmp, err := os.CreateTemp(s.tmp, "put-*")
	if err != nil {
		return false, fmt.Errorf("artifact %s: create temporary file: %w", short(digest), err)
	}
	tmpName := tmp.Name()
	published := false
	defer func() {
		if !published {
			_ = tmp.Close()
			_ = os.Remove(tmpName)
		}
	}()
	res, err := copyHashed(ctx, tmp, r, limit)
	if err != nil {
		return false, fmt.Errorf("artifact %s: %w", short(digest), err)
	}
	if err := s.checkUpload(res, digest, size); err != nil {
		return false, err
	}
	if err := tmp.Chmod(storeFileMode); err != nil {
		return false, fmt.Errorf("artifact %s: chmod: %w", short(digest), err)
	}
	if err := tmp.Sync(); err != nil {
		return false, fmt.Errorf("artifact %s: fsync: %w", short(digest), err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("artifact %s: close: %w", short(digest), err)
	}
	shard, err := ensureShard(s.root, digest, storeDirMode)
	if err != nil {
		return false, fmt.Errorf("artifact %s: %w", short(digest), err)
	}
	created, err = s.publish(ctx, tmpName, final, digest, res.n)
	if err != nil {
		return false, err
	}
	published = true
	if err := syncDir(shard); err != nil {
		return false, fmt.Errorf("artifact %s: %w", short(digest), err)
	}
	return created, nil
}

// checkUpload turns a copy into the upload's error, if any.
func (s *Store) checkUpload(res copyResult, digest string, size int64) error {
	if size == SizeUnknown && res.overflow {
		return &MismatchError{Kind: ErrTooLarge, Digest: digest,
			Want: "at most " + strconv.FormatInt(s.max, 10), Got: "more than " + strconv.FormatInt(res.n, 10)}
	}
	return res.check(digest, size)
}

// publish moves a verified temporary file to its final name. A hard link
// never replaces an existing file, so concurrent uploads of one digest agree
// on who created it; a stored copy of the wrong size is replaced by rename.
// On success the temporary name is gone.
func (s *Store) publish(ctx context.Context, tmpName, final, digest string, n int64) (created bool, err error) {
	lerr := os.Link(tmpName, final)
	if lerr == nil {
		_ = os.Remove(tmpName)
		return true, nil
	}
	if errors.Is(lerr, os.ErrExist) {
		if st, err := os.Stat(final); err == nil && st.Mode().IsRegular() && st.Size() == n {
			_ = os.Remove(tmpName)
			return false, nil
		}
		s.log.WarnContext(ctx, "artifact store replaces a damaged stored copy", "digest", digest, "path", final)
	}
	// The filesystem may not support hard links, or the stored copy is damaged.
	if err := os.Rename(tmpName, final); err != nil {
		return false, fmt.Errorf("artifact %s: publish: %w", short(digest), err)
	}
	return true, nil
}

// Open returns the stored file for reading (an *os.File, so it seeks and
// serves ranges) and its size. The caller closes it. A missing artifact is
// ErrNotFound.
func (s *Store) Open(digest string) (*os.File, int64, error) {
	if err := ValidateDigest(digest); err != nil {
		return nil, 0, err
	}
	f, err := os.Open(s.path(digest))
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, fmt.Errorf("%w: %s", ErrNotFound, digest)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("artifact %s: open: %w", short(digest), err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, 0, fmt.Errorf("artifact %s: stat: %w", short(digest), err)
	}
	return f, st.Size(), nil
}

// Stat returns the size of a stored artifact, or ErrNotFound.
func (s *Store) Stat(digest string) (int64, error) {
	if err := ValidateDigest(digest); err != nil {
		return 0, err
	}
	st, err := os.Stat(s.path(digest))
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("%w: %s", ErrNotFound, digest)
	}
	if err != nil {
		return 0, fmt.Errorf("artifact %s: stat: %w", short(digest), err)
	}
	return st.Size(), nil
}

// Verify re-hashes a stored artifact. It returns ErrNotFound, nil, or an error
// matching ErrCorrupt and the mismatch kind. Reconciliation uses it; serving
// does not (it would read every file twice).
func (s *Store) Verify(ctx context.Context, digest string) error {
	size, err := s.Stat(digest)
	if err != nil {
		return err
	}
	if err := hashFile(ctx, s.path(digest), digest, size); err != nil {
		var me *MismatchError
		if errors.As(err, &me) {
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return fmt.Errorf("artifact %s: verify: %w", short(digest), err)
	}
	return nil
}
