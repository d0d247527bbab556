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
	"strings"
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
	if err := makeShards(s.root); err != nil {
		return nil, fmt.Errorf("artifact store: %w", err)
	}
	spares, err := removeStaleSpares(ctx, s.root, time.Now().Add(-cfg.StaleTempAfter))
	if err != nil {
		return nil, fmt.Errorf("artifact store: %w", err)
	}
	removed, err := removeStaleTemp(ctx, s.tmp, time.Now().Add(-cfg.StaleTempAfter))
	if err != nil {
		return nil, fmt.Errorf("artifact store: %w", err)
	}
	if removed+spares > 0 {
		s.log.InfoContext(ctx, "artifact store removed stale temporary files", "root", root, "removed", removed+spares)
	}
	return s, nil
}

// makeShards creates every shard directory (00 … ff) that is missing and
// fsyncs root once if it made any. An upload then never creates one: the
// first upload into a shard would otherwise pay a mkdir and an fsync of
// the root that content already stored (in a shard that exists) never
// does, and its time would tell that the content was new.
func makeShards(root string) error {
	made := false
	for i := range 256 {
		dir := filepath.Join(root, fmt.Sprintf("%02x", i))
		err := os.Mkdir(dir, storeDirMode)
		switch {
		case err == nil:
			made = true
		case !errors.Is(err, os.ErrExist):
			return fmt.Errorf("create shard %s: %w", dir, err)
		}
	}
	if made {
		return syncDir(root)
	}
	return nil
}

// removeStaleSpares removes the spare links (publish) a crash left in the
// shards, those modified before cutoff: one directory read per shard.
func removeStaleSpares(ctx context.Context, root string, cutoff time.Time) (int, error) {
	removed := 0
	for i := range 256 {
		dir := filepath.Join(root, fmt.Sprintf("%02x", i))
		entries, err := os.ReadDir(dir)
		if err != nil {
			return removed, fmt.Errorf("scan %s: %w", dir, err)
		}
		for _, de := range entries {
			if !strings.HasPrefix(de.Name(), spareDot) {
				continue
			}
			n, err := removeIfStale(ctx, dir, de, cutoff)
			if err != nil {
				return removed, err
			}
			removed += n
		}
	}
	return removed, nil
}

// removeIfStale removes dir/de if it is a regular file modified before
// cutoff, and says how many it removed.
func removeIfStale(ctx context.Context, dir string, de os.DirEntry, cutoff time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	info, err := de.Info()
	if err != nil || !info.Mode().IsRegular() || !info.ModTime().Before(cutoff) {
		return 0, nil
	}
	if err := os.Remove(filepath.Join(dir, de.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("remove stale %s: %w", de.Name(), err)
	}
	return 1, nil
}

// removeStaleTemp removes regular files in dir modified before cutoff.
func removeStaleTemp(ctx context.Context, dir string, cutoff time.Time) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("scan %s: %w", dir, err)
	}
	removed := 0
	for _, de := range entries {
		n, err := removeIfStale(ctx, dir, de, cutoff)
		if err != nil {
			return removed, err
		}
		removed += n
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
// read, written to a temporary file, verified and fsynced exactly like a
// new one, and published with the same changes to its shard directory
// (publish), so the time does not tell that the content existed
// (docs/business.md, "No existence oracle on test data"); then the upload
// is dropped and created is false. A stored copy of the uploaded size is
// trusted without re-reading it (Verify does that); one of the wrong size
// is replaced by the verified upload.
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
	// file, fsync, publish, fsync of the shard): an upload that skipped the
	// write would answer a fsync sooner, telling a tenant that another one
	// holds the content (docs/business.md "Tenancy"). The cost is one write
	// of the body per repeated upload.
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
	created, spare, err := s.publish(ctx, tmpName, final, digest, res.n)
	if err != nil {
		return false, err
	}
	published = true
	serr := syncDir(shard)
	if spare != "" {
		dropLater(spare)
	}
	if serr != nil {
		return false, fmt.Errorf("artifact %s: %w", short(digest), serr)
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
// on who created it; a stored copy of the wrong size is replaced by rename
// (logged as damaged), as it is where the filesystem has no hard links.
//
// Otherwise new content and content already stored make the same changes
// to the shard directory before Put fsyncs it: the upload is linked a second
// time, under a spare name in the shard no reader asks for (spareName), and
// its temporary name is removed. Without the spare link an upload of stored
// content would change nothing in the shard, its fsync would return at once
// and its answer would come sooner than new content's: the time would tell
// that the content existed. The spare link is removed after the fsync: for
// new content that drops a link count, for stored content it frees the
// duplicate's blocks, work done later and apart from any answer (dropLater).
// On success the temporary name is gone.
func (s *Store) publish(ctx context.Context, tmpName, final, digest string, n int64) (created bool, spare string, err error) {
	lerr := os.Link(tmpName, final)
	created = lerr == nil
	if errors.Is(lerr, os.ErrExist) {
		if st, err := os.Stat(final); err != nil || !st.Mode().IsRegular() || st.Size() != n {
			s.log.WarnContext(ctx, "artifact store replaces a damaged stored copy", "digest", digest, "path", final)
			lerr = errDamaged
		} else {
			lerr = nil
		}
	}
	if lerr != nil {
		// The filesystem may not support hard links, or the stored copy is damaged.
		if err := os.Rename(tmpName, final); err != nil {
			return false, "", fmt.Errorf("artifact %s: publish: %w", short(digest), err)
		}
		return true, "", nil
	}
	spare = filepath.Join(filepath.Dir(final), spareName(tmpName))
	if err := os.Link(tmpName, spare); err != nil {
		spare = "" // only the time is less alike; what is stored is right
	}
	_ = os.Remove(tmpName)
	return created, spare, nil
}

// dropLater removes a spare link spareLinger from now, on a timer, not on
// the upload's path: for content that was stored already, the removal
// frees the duplicate's blocks, measurably slower than new content's
// removal (a link count dropped), and done before answering it would tell
// the content apart again; done by the next upload it would tell that
// upload's caller. A process that ends first leaves the link to OpenStore
// (removeStaleSpares).
func dropLater(spare string) {
	time.AfterFunc(spareLinger, func() { _ = os.Remove(spare) })
}

// spareLinger is how long a spare link outlives its upload.
const spareLinger = 2 * time.Second

// errDamaged marks a stored copy publish replaces.
var errDamaged = errors.New("stored copy damaged")

// spareName is the spare link of an upload whose temporary file is tmpName:
// a dot name, so it never collides with a digest, removed after the upload
// (dropLater), or by OpenStore when a crash left it (removeStaleSpares).
func spareName(tmpName string) string { return spareDot + filepath.Base(tmpName) }

// spareDot starts every spare link's name.
const spareDot = ".spare-"

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
