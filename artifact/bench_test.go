package artifact

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Benchmarks print key=value figures next to a baseline measured in the same
// run, so a reader sees what the verification and durability cost on this
// machine rather than an absolute number.

const benchSize = 4 << 20

func BenchmarkCacheHit(b *testing.B) {
	body := randomBytes(200, benchSize)
	d := digestOf(body)
	c, err := OpenCache(context.Background(), CacheConfig{Dir: b.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	fetch := func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	h, err := c.Acquire(context.Background(), d, benchSize, fetch)
	if err != nil {
		b.Fatal(err)
	}
	h.Release()

	b.ResetTimer()
	start := time.Now()
	for range b.N {
		h, err := c.Acquire(context.Background(), d, benchSize, fetch)
		if err != nil {
			b.Fatal(err)
		}
		h.Release()
	}
	hit := time.Since(start) / time.Duration(b.N)
	b.StopTimer()

	// Baseline: the one stat every hit must pay anyway.
	start = time.Now()
	for range b.N {
		if _, err := os.Stat(h.Path()); err != nil {
			b.Fatal(err)
		}
	}
	stat := time.Since(start) / time.Duration(b.N)
	b.Logf("cache_hit_ns=%d baseline_stat_ns=%d", hit.Nanoseconds(), stat.Nanoseconds())
}

func BenchmarkCacheDownload(b *testing.B) {
	o := newOrigin(b)
	body := randomBytes(201, benchSize)
	d := o.add(body)
	c, err := OpenCache(context.Background(), CacheConfig{Dir: b.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	fetch := o.fetch(d)

	b.SetBytes(benchSize)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		h, err := c.Acquire(context.Background(), d, benchSize, fetch)
		if err != nil {
			b.Fatal(err)
		}
		h.Release()
		b.StopTimer()
		c.mu.Lock()
		c.removeLocked(c.entries[d]) // force the next iteration to download
		c.mu.Unlock()
		b.StartTimer()
	}
	verified := time.Since(start)
	b.StopTimer()

	// Baseline: the same GET copied to a file with no hashing and no fsync.
	dir := b.TempDir()
	start = time.Now()
	for range b.N {
		rc, err := fetch(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, "plain"))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(f, rc); err != nil {
			b.Fatal(err)
		}
		_ = rc.Close()
		_ = f.Close()
	}
	plain := time.Since(start)

	// Second baseline: SHA-256 alone, the floor any verifying download pays.
	start = time.Now()
	for range b.N {
		_ = digestOf(body)
	}
	hash := time.Since(start)
	b.Logf("cache_download_mb_s=%.0f baseline_plain_copy_mb_s=%.0f baseline_sha256_mb_s=%.0f size_bytes=%d",
		mbps(benchSize, b.N, verified), mbps(benchSize, b.N, plain), mbps(benchSize, b.N, hash), benchSize)
}

func BenchmarkStorePut(b *testing.B) {
	body := randomBytes(202, benchSize)
	d := digestOf(body)
	s, err := OpenStore(context.Background(), StoreConfig{Root: b.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	final := layoutPath(s.Root(), d)

	b.SetBytes(benchSize)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		created, err := s.Put(context.Background(), d, benchSize, bytes.NewReader(body))
		if err != nil || !created {
			b.Fatalf("put: created=%v err=%v", created, err)
		}
		b.StopTimer()
		_ = os.Remove(final)
		b.StartTimer()
	}
	put := time.Since(start)
	b.StopTimer()

	// Baseline: write and fsync the same bytes, without hashing.
	dir := b.TempDir()
	start = time.Now()
	for range b.N {
		f, err := os.Create(filepath.Join(dir, "plain"))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(body); err != nil {
			b.Fatal(err)
		}
		_ = f.Sync()
		_ = f.Close()
	}
	plain := time.Since(start)
	b.Logf("store_put_mb_s=%.0f baseline_write_fsync_mb_s=%.0f size_bytes=%d",
		mbps(benchSize, b.N, put), mbps(benchSize, b.N, plain), benchSize)
}

func mbps(size int64, n int, d time.Duration) float64 {
	return float64(size) * float64(n) / d.Seconds() / 1e6
}
