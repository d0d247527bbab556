package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// EmptyDigest is the SHA-256 of zero bytes. A zero-length artifact (an empty
// expected output, say) is a valid artifact with this digest.
const EmptyDigest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// DigestLen is the length of a digest in lowercase hex.
const DigestLen = sha256.Size * 2

// ErrInvalid is matched by every argument validation error of this package
// (ErrInvalidDigest, ErrInvalidSize): the request is malformed and retrying
// it unchanged cannot succeed.
var ErrInvalid = errors.New("artifact: invalid argument")

// Validation errors. Both match ErrInvalid through errors.Is.
var (
	ErrInvalidDigest = fmt.Errorf("%w: digest must be 64 lowercase hex characters", ErrInvalid)
	ErrInvalidSize   = fmt.Errorf("%w: size must not be negative", ErrInvalid)
)

// Content errors: the bytes do not match what was declared. They are returned
// inside a *MismatchError that carries the details.
var (
	ErrDigestMismatch = errors.New("artifact: digest mismatch")
	ErrSizeMismatch   = errors.New("artifact: size mismatch")
	ErrTooLarge       = errors.New("artifact: too large")
)

// ErrNotFound reports that no artifact with the digest is stored.
var ErrNotFound = errors.New("artifact: not found")

// ErrCorrupt reports bytes that do not match their digest or size: a Cache
// download, or a stored file checked by Store.Verify. It comes with a
// *MismatchError holding the details. Callers treat it as an infrastructure
// fault, never as an empty file.
var ErrCorrupt = errors.New("artifact: corrupt")

// ErrClosed is returned by a Cache after Close.
var ErrClosed = errors.New("artifact: cache closed")

// MismatchError describes content that differs from what was declared. Kind is
// ErrDigestMismatch, ErrSizeMismatch or ErrTooLarge and is what errors.Is
// matches.
type MismatchError struct {
	Kind   error
	Digest string // the declared digest
	Want   string // declared digest or size
	Got    string // observed digest or size ("more than N" when reading stopped early)
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%v for %s: want %s, got %s", e.Kind, short(e.Digest), e.Want, e.Got)
}

// Unwrap returns Kind.
func (e *MismatchError) Unwrap() error { return e.Kind }

// ValidateDigest returns nil for 64 lowercase hex characters and an error
// matching ErrInvalidDigest otherwise.
func ValidateDigest(digest string) error {
	if len(digest) != DigestLen {
		return fmt.Errorf("%w (got %d characters)", ErrInvalidDigest, len(digest))
	}
	for i := 0; i < len(digest); i++ {
		c := digest[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("%w (byte %d is %q)", ErrInvalidDigest, i, c)
		}
	}
	return nil
}

// relPath is the layout shared by Store and Cache: ab/abcdef…. The digest must
// have been validated, which also rules out path separators and "..".
func relPath(digest string) string {
	return filepath.Join(digest[:2], digest)
}

// short abbreviates a digest for messages and logs.
func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

// copyResult is what copyHashed observed.
type copyResult struct {
	n        int64  // bytes written to dst (at most limit)
	overflow bool   // the source had more than limit bytes
	digest   string // lowercase hex SHA-256 of the n bytes
}

// copyBufSize is the chunk size of copyHashed; large enough that syscalls do
// not dominate, small enough to keep many concurrent copies cheap.
const copyBufSize = 256 << 10

// copyHashed copies src to dst while hashing, writing at most limit bytes. It
// reads one byte past limit to tell an exact fit from an overflow, and checks
// ctx between chunks.
func copyHashed(ctx context.Context, dst io.Writer, src io.Reader, limit int64) (copyResult, error) {
	h := sha256.New()
	buf := make([]byte, copyBufSize)
	var res copyResult
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		nr, rerr := src.Read(buf)
		if nr > 0 {
			chunk := buf[:nr]
			if room := limit - res.n; int64(nr) > room {
				chunk = buf[:room]
				res.overflow = true
			}
			if len(chunk) > 0 {
				if _, err := dst.Write(chunk); err != nil {
					return res, fmt.Errorf("write: %w", err)
				}
				h.Write(chunk)
				res.n += int64(len(chunk))
			}
			if res.overflow {
				break
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return res, fmt.Errorf("read: %w", rerr)
		}
	}
	res.digest = hex.EncodeToString(h.Sum(nil))
	return res, nil
}

// check compares a copy with the declared digest and size (size < 0: unknown).
func (r copyResult) check(digest string, size int64) error {
	if size >= 0 && (r.overflow || r.n != size) {
		got := strconv.FormatInt(r.n, 10)
		if r.overflow {
			got = "more than " + got
		}
		return &MismatchError{Kind: ErrSizeMismatch, Digest: digest, Want: strconv.FormatInt(size, 10), Got: got}
	}
	if r.digest != digest {
		return &MismatchError{Kind: ErrDigestMismatch, Digest: digest, Want: digest, Got: r.digest}
	}
	return nil
}

// hashFile re-reads a stored file and checks it against digest and size.
func hashFile(ctx context.Context, path, digest string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	res, err := copyHashed(ctx, io.Discard, f, size)
	if err != nil {
		return fmt.Errorf("hash %s: %w", path, err)
	}
	return res.check(digest, size)
}

// syncDir fsyncs a directory so that a rename or create in it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return fmt.Errorf("fsync %s: %w", dir, serr)
	}
	return cerr
}

// ensureShard creates the shard directory of a digest under root and fsyncs
// root when it had to create it.
func ensureShard(root, digest string, mode os.FileMode) (string, error) {
	dir := filepath.Join(root, digest[:2])
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if err := os.Mkdir(dir, mode); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("create shard %s: %w", dir, err)
	}
	if err := syncDir(root); err != nil {
		return "", err
	}
	return dir, nil
}
