package artifact

// Downloads of the node cache: one flight per digest shared by every caller
// that wants it, streamed to a temporary file, hashed and counted while it
// arrives, then renamed into place (DESIGN §8).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// flight is one download shared by every caller that wants the digest.
type flight struct {
	digest string
	size   int64
	done   chan struct{}
	cancel context.CancelFunc

	// Guarded by Cache.mu.
	waiters     int  // callers still waiting
	starterGone bool // the caller whose fetch is used stopped waiting
	abandoned   bool // every waiter left; the download is being cancelled

	// Set before done is closed.
	err   error
	entry *entry // on success, pinned once per waiter left at completion
}

// startLocked registers a new download and starts it. c.mu is held.
func (c *Cache) startLocked(digest string, size int64, fetch FetchFunc) *flight {
	ctx, cancel := context.WithCancel(c.ctx)
	f := &flight{digest: digest, size: size, done: make(chan struct{}), cancel: cancel, waiters: 1}
	c.flights[digest] = f
	c.reserved += size
	c.evictLocked() // make room before writing
	c.wg.Add(1)
	go c.download(ctx, f, fetch)
	return f
}

// wait waits for a flight. retry is true when the flight failed after its
// starter left and this caller should try with its own fetch.
func (c *Cache) wait(ctx context.Context, f *flight, starter bool, size int64) (h *Handle, retry bool, err error) {
	select {
	case <-f.done:
	case <-ctx.Done():
		c.mu.Lock()
		select {
		case <-f.done:
			if f.err == nil {
				c.releaseLocked(f.entry) // the pin reserved for us
			}
		default:
			f.waiters--
			if starter {
				f.starterGone = true
			}
			if f.waiters == 0 && !f.abandoned {
				f.abandoned = true
				f.cancel()
				// Later callers start afresh instead of joining a dying download.
				if c.flights[f.digest] == f {
					delete(c.flights, f.digest)
				}
			}
		}
		c.mu.Unlock()
		return nil, false, ctx.Err()
	}
	if f.err != nil {
		c.mu.Lock()
		retry = !starter && f.starterGone && !c.closed && ctx.Err() == nil
		c.mu.Unlock()
		return nil, retry, f.err
	}
	c.mu.Lock()
	got := f.entry.size
	c.mu.Unlock()
	if got != size {
		// Two manifests disagree about this digest's size; the file matches
		// the digest, so the declared size is wrong.
		c.release(f.entry)
		return nil, false, &MismatchError{Kind: ErrSizeMismatch, Digest: f.digest,
			Want: strconv.FormatInt(size, 10), Got: strconv.FormatInt(got, 10)}
	}
	return c.newHandle(f.entry, size), false, nil
}

// download runs one flight: fetch, verify, publish, pin for the waiters.
func (c *Cache) download(ctx context.Context, f *flight, fetch FetchFunc) {
	defer c.wg.Done()
	defer f.cancel()
	tmpName, err := c.fetchToTemp(ctx, f.digest, f.size, fetch)
	if err != nil && ctx.Err() != nil && c.ctx.Err() != nil {
		err = fmt.Errorf("artifact %s: %w", short(f.digest), ErrClosed)
	}

	c.mu.Lock()
	c.reserved -= f.size
	var e *entry
	published := false
	if err == nil {
		switch existing := c.entries[f.digest]; {
		case existing != nil:
			// An abandoned download of the same digest finished first.
			e = existing
		case c.closed:
			err = ErrClosed
		default:
			// Renaming under the lock keeps the index and the final names
			// consistent with eviction, which removes files under the lock.
			if rerr := os.Rename(tmpName, c.path(f.digest)); rerr != nil {
				err = fmt.Errorf("artifact %s: publish: %w", short(f.digest), rerr)
			} else {
				published = true
				e = c.insertLocked(f.digest, f.size, c.now())
			}
		}
	}
	if err == nil {
		e.pins += f.waiters
		f.entry = e
		c.evictLocked()
	}
	f.err = err
	abandoned := f.abandoned
	close(f.done)
	if c.flights[f.digest] == f {
		delete(c.flights, f.digest)
	}
	c.mu.Unlock()

	if !published && tmpName != "" {
		_ = os.Remove(tmpName)
	}
	if published {
		if serr := syncDir(filepath.Dir(c.path(f.digest))); serr != nil {
			c.log.Warn("artifact cache could not fsync a shard directory", "digest", f.digest, "error", serr)
		}
	}
	if err != nil && !errors.Is(err, ErrClosed) && !abandoned {
		c.log.Warn("artifact download failed", "digest", f.digest, "size", f.size, "error", err)
	}
}

// fetchToTemp downloads into a verified, fsynced temporary file and returns
// its name. On error nothing is left behind and the name is empty.
func (c *Cache) fetchToTemp(ctx context.Context, digest string, size int64, fetch FetchFunc) (name string, err error) {
	if _, err := ensureShard(c.dir, digest, cacheDirMode); err != nil {
		return "", fmt.Errorf("artifact %s: %w", short(digest), err)
	}
	body, err := fetch(ctx)
	if err != nil {
		return "", fmt.Errorf("artifact %s: fetch: %w", short(digest), err)
	}
	if body == nil {
		return "", fmt.Errorf("artifact %s: fetch returned no body", short(digest))
	}
	defer body.Close()
	// Closing the body unblocks a Read that does not watch ctx itself.
	stop := context.AfterFunc(ctx, func() { _ = body.Close() })
	defer stop()

	tmp, err := os.CreateTemp(c.tmp, "get-*")
	if err != nil {
		return "", fmt.Errorf("artifact %s: create temporary file: %w", short(digest), err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	res, err := copyHashed(ctx, tmp, body, size)
	if cerr := ctx.Err(); cerr != nil {
		return "", fmt.Errorf("artifact %s: download: %w", short(digest), cerr)
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			// The transport saw the body end before its declared length.
			mm := &MismatchError{Kind: ErrSizeMismatch, Digest: digest, Want: strconv.FormatInt(size, 10), Got: strconv.FormatInt(res.n, 10)}
			return "", fmt.Errorf("%w: %w (%w)", ErrCorrupt, mm, err)
		}
		return "", fmt.Errorf("artifact %s: download: %w", short(digest), err)
	}
	if err := res.check(digest, size); err != nil {
		return "", fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if err := tmp.Chmod(cacheFileMode); err != nil {
		return "", fmt.Errorf("artifact %s: chmod: %w", short(digest), err)
	}
	if err := tmp.Sync(); err != nil {
		return "", fmt.Errorf("artifact %s: fsync: %w", short(digest), err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("artifact %s: close: %w", short(digest), err)
	}
	return tmp.Name(), nil
}
