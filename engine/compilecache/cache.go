// Package compilecache keeps the outcome of finished compiles on a node so
// that a compile whose inputs are byte for byte the same as an earlier one is
// not run again: a rejudge, a resubmission of the same source, and the second
// submission to a special-judge problem (its checker) pay no compile.
//
// A key names everything a compile read (Key): the runtime image's digest,
// the language id, the compile command and limits, and the name and SHA-256
// of every input file. Two compiles share an entry only when their keys are
// equal. An entry holds what the compile step produced — its output files,
// its log and whether it succeeded (an ordinary compile error is cached too)
// — and is written only from a finished compile (Put is given the result).
// Every use verifies the entry against the digests recorded with it; an entry
// that does not verify is dropped and reported as a miss, so the compile
// runs. Entries are bounded in total bytes; the least recently used go first.
//
// It owns its directory and nothing else; it knows nothing of Docker, the
// control plane or the worker.
package compilecache

import (
	"cmp"
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults; a zero Config field takes its default.
const (
	// MaxBytesDefault is the disk budget of all entries together.
	MaxBytesDefault int64 = 2 << 30
	// MaxEntryBytesDefault is the largest entry kept: a compile whose outputs
	// are larger is not cached (it still judges as usual).
	MaxEntryBytesDefault int64 = 256 << 20
	// MaxEntryFilesDefault is the most output files one entry keeps.
	MaxEntryFilesDefault = 4096
)

// Config configures a Cache.
type Config struct {
	// Dir holds the entries; created if missing. One process per Dir.
	Dir string
	// MaxBytes bounds the entries' bytes together (0: default).
	MaxBytes int64
	// MaxEntryBytes and MaxEntryFiles bound one entry (0: default).
	MaxEntryBytes int64
	MaxEntryFiles int
	// Logger receives dropped entries (nil: slog.Default()).
	Logger *slog.Logger
}

// Validate refuses a configuration the cache cannot run with, naming every
// problem.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" || !filepath.IsAbs(c.Dir) {
		errs = append(errs, fmt.Errorf("compile cache: dir %q must be an absolute path", c.Dir))
	}
	if c.MaxBytes < 0 || c.MaxEntryBytes < 0 || c.MaxEntryFiles < 0 {
		errs = append(errs, errors.New("compile cache: sizes must not be negative"))
	}
	if c.MaxBytes > 0 && c.MaxEntryBytes > c.MaxBytes {
		errs = append(errs, fmt.Errorf("compile cache: entry bound %d exceeds the cache bound %d", c.MaxEntryBytes, c.MaxBytes))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	c.MaxBytes = cmp.Or(c.MaxBytes, MaxBytesDefault)
	c.MaxEntryBytes = cmp.Or(c.MaxEntryBytes, min(MaxEntryBytesDefault, c.MaxBytes))
	c.MaxEntryFiles = cmp.Or(c.MaxEntryFiles, MaxEntryFilesDefault)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Input is one file a compile reads.
type Input struct {
	Name   string // path relative to the compile's directory
	Digest [32]byte
}

// Key describes everything a compile's outcome depends on. Its ID is a
// SHA-256 over an unambiguous encoding of every field, so two keys share an
// entry only when every field is equal.
type Key struct {
	// Image is the runtime image's content digest (the local image ID), never
	// a tag that can be moved to other bytes.
	Image    string
	Language string
	// Command is the compile command as run (placeholders expanded) and Env
	// its environment.
	Command []string
	Env     []string
	// Limits are the compile's CPU, wall and memory limits and anything else
	// that can change its outcome, as text.
	Limits []string
	// Inputs are the files the compile reads, in any order.
	Inputs []Input
}

// ID is the key's digest, the entry's name on disk.
func (k Key) ID() string {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	list := func(tag string, xs []string) {
		field(tag)
		field(fmt.Sprint(len(xs)))
		for _, x := range xs {
			field(x)
		}
	}
	field("kece-compile-key-v1")
	field(k.Image)
	field(k.Language)
	list("cmd", k.Command)
	list("env", k.Env)
	list("limits", k.Limits)
	in := slices.Clone(k.Inputs)
	slices.SortFunc(in, func(a, b Input) int { return strings.Compare(a.Name, b.Name) })
	field("inputs")
	field(fmt.Sprint(len(in)))
	for _, f := range in {
		field(f.Name)
		field(hex.EncodeToString(f.Digest[:]))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Outcome is what a finished compile step produced.
type Outcome struct {
	OK      bool   // false: an ordinary compile error (the compiler said so)
	Log     string // the compile log as the verdict shows it
	Message string // why it failed, when it failed
}

// File is one output file of an entry.
type File struct {
	Name   string      `json:"name"`
	Mode   fs.FileMode `json:"mode"`
	Size   int64       `json:"size"`
	Digest string      `json:"sha256"`
}

// record is an entry's description on disk; Sum covers every other field.
type record struct {
	Key     string `json:"key"`
	OK      bool   `json:"ok"`
	Log     string `json:"log"`
	Message string `json:"message"`
	Files   []File `json:"files"`
	Sum     string `json:"sum"`
}

func (r record) sum() string {
	r.Sum = ""
	b, _ := json.Marshal(r)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (r record) bytes() int64 {
	n := int64(len(r.Log) + len(r.Message) + 512)
	for _, f := range r.Files {
		n += f.Size
	}
	return n
}

// Stats counts what the cache did since it was opened.
type Stats struct {
	Hits, Misses, Puts, Dropped, Evicted int64
	Bytes                                int64
	Entries                              int
}

// Cache is the node's compile cache. It is safe for concurrent use.
type Cache struct {
	cfg   Config
	mu    sync.Mutex
	lru   *list.List // of string ids, most recently used at the front
	items map[string]*list.Element
	size  map[string]int64
	stats Stats
}

const (
	recordName = "entry.json"
	filesDir   = "files"
	tmpPrefix  = ".tmp-"
)

// Open opens (creating if needed) the cache in cfg.Dir. Entries left by an
// earlier process are kept, least recently used by their modification time;
// unfinished ones are removed.
func Open(cfg Config) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("compile cache: %w", err)
	}
	c := &Cache{cfg: cfg, lru: list.New(), items: map[string]*list.Element{}, size: map[string]int64{}}
	ents, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("compile cache: %w", err)
	}
	type found struct {
		id    string
		mtime time.Time
		size  int64
	}
	var keep []found
	for _, e := range ents {
		p := filepath.Join(cfg.Dir, e.Name())
		if !e.IsDir() || strings.HasPrefix(e.Name(), tmpPrefix) || !isID(e.Name()) {
			_ = os.RemoveAll(p)
			continue
		}
		r, st, err := readRecord(p)
		if err != nil || r.Key != e.Name() {
			_ = os.RemoveAll(p)
			continue
		}
		keep = append(keep, found{e.Name(), st.ModTime(), r.bytes()})
	}
	slices.SortFunc(keep, func(a, b found) int { return a.mtime.Compare(b.mtime) })
	for _, f := range keep {
		c.items[f.id] = c.lru.PushFront(f.id)
		c.size[f.id] = f.size
		c.stats.Bytes += f.size
	}
	c.mu.Lock()
	c.evictLocked()
	c.mu.Unlock()
	return c, nil
}

func isID(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func readRecord(dir string) (record, os.FileInfo, error) {
	p := filepath.Join(dir, recordName)
	b, err := readRegular(p, 16<<20)
	if err != nil {
		return record{}, nil, err
	}
	st, err := os.Lstat(p)
	if err != nil {
		return record{}, nil, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return record{}, nil, err
	}
	if r.Sum == "" || r.Sum != r.sum() {
		return record{}, nil, errors.New("record checksum mismatch")
	}
	return r, st, nil
}

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries = c.lru.Len()
	return s
}

// Get looks the key up. On a hit it writes the entry's files into dst
// (which must exist; names may hold sub-directories), each owned by uid, and
// returns the outcome. An entry whose record or files do not verify, or
// whose files cannot be written, is dropped and reported as a miss, and the
// files it had written into dst are removed again; the error is non-nil only
// when that removal failed (dst then holds part of an entry).
func (c *Cache) Get(k Key, dst string, uid int) (Outcome, bool, error) {
	id := k.ID()
	c.mu.Lock()
	el, ok := c.items[id]
	if ok {
		c.lru.MoveToFront(el)
	}
	c.mu.Unlock()
	if !ok {
		c.count(func(s *Stats) { s.Misses++ })
		return Outcome{}, false, nil
	}
	dir := filepath.Join(c.cfg.Dir, id)
	r, _, err := readRecord(dir)
	if err == nil && r.Key != id {
		err = errors.New("record names another key")
	}
	if err == nil {
		err = c.restore(dir, r, dst, uid)
	}
	if err != nil {
		c.drop(id, err)
		c.count(func(s *Stats) { s.Misses++ })
		return Outcome{}, false, nil
	}
	now := time.Now()
	_ = os.Chtimes(filepath.Join(dir, recordName), now, now)
	c.count(func(s *Stats) { s.Hits++ })
	return Outcome{OK: r.OK, Log: r.Log, Message: r.Message}, true, nil
}

// ErrCorrupt marks an entry that did not verify.
var ErrCorrupt = errors.New("compile cache entry corrupt")

// restore copies the entry's files into dst, hashing each as it goes; a
// file whose bytes differ from its record is ErrCorrupt.
func (c *Cache) restore(dir string, r record, dst string, uid int) (err error) {
	var written []string
	defer func() {
		if err != nil {
			for _, p := range slices.Backward(written) {
				_ = os.Remove(p)
			}
		}
	}()
	for i, f := range r.Files {
		if !safeName(f.Name) {
			return fmt.Errorf("%w: file name %q", ErrCorrupt, f.Name)
		}
		src := filepath.Join(dir, filesDir, fmt.Sprint(i))
		target := filepath.Join(dst, filepath.FromSlash(f.Name))
		dirs, err := mkdirsOwned(dst, path.Dir(f.Name), uid)
		written = append(written, dirs...)
		if err != nil {
			return err
		}
		if err := copyVerified(src, target, f, uid); err != nil {
			if !errors.Is(err, fs.ErrExist) {
				written = append(written, target)
			}
			return err
		}
		written = append(written, target)
	}
	return nil
}

func copyVerified(src, dst string, f File, uid int) error {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	defer in.Close()
	if st, err := in.Stat(); err != nil || !st.Mode().IsRegular() || st.Size() != f.Size {
		return fmt.Errorf("%w: %s is not the recorded regular file", ErrCorrupt, f.Name)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, f.Mode.Perm()&0o755)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(in, f.Size+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.Digest {
		return fmt.Errorf("%w: %s does not match its digest", ErrCorrupt, f.Name)
	}
	if err := os.Chmod(dst, f.Mode.Perm()&0o755); err != nil {
		return err
	}
	return os.Lchown(dst, uid, uid)
}

// mkdirsOwned creates dst/rel's directories, each owned by uid, and returns
// those it created.
func mkdirsOwned(dst, rel string, uid int) ([]string, error) {
	if rel == "." || rel == "" {
		return nil, nil
	}
	var made []string
	p := dst
	for _, part := range strings.Split(rel, "/") {
		p = filepath.Join(p, part)
		if err := os.Mkdir(p, 0o755); err != nil {
			if !errors.Is(err, fs.ErrExist) {
				return made, err
			}
			if st, err := os.Lstat(p); err != nil || !st.IsDir() {
				return made, fmt.Errorf("compile cache: %s exists and is not a directory", p)
			}
			continue
		}
		made = append(made, p)
		if err := os.Lchown(p, uid, uid); err != nil {
			return made, err
		}
	}
	return made, nil
}

func safeName(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") || path.Clean(name) != name || name == "." {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." || part == "" {
			return false
		}
	}
	return true
}

// Put stores the outcome of a finished compile under k: the files named in
// outputs, read from dir (regular files only). An entry for k that exists is
// kept. Put reports whether the entry was stored; a compile whose outputs
// are over the entry bounds or not all regular files is not stored (false,
// nil): it judged correctly, it just is not cached.
func (c *Cache) Put(k Key, o Outcome, dir string, outputs []string) (bool, error) {
	id := k.ID()
	c.mu.Lock()
	_, exists := c.items[id]
	c.mu.Unlock()
	if exists {
		return false, nil
	}
	if len(outputs) > c.cfg.MaxEntryFiles {
		return false, nil
	}
	tmp, err := os.MkdirTemp(c.cfg.Dir, tmpPrefix)
	if err != nil {
		return false, fmt.Errorf("compile cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Mkdir(filepath.Join(tmp, filesDir), 0o755); err != nil {
		return false, fmt.Errorf("compile cache: %w", err)
	}
	r := record{Key: id, OK: o.OK, Log: o.Log, Message: o.Message}
	var total int64
	for i, name := range slices.Sorted(slices.Values(outputs)) {
		if !safeName(name) {
			return false, nil
		}
		f, err := copyIn(filepath.Join(dir, filepath.FromSlash(name)), filepath.Join(tmp, filesDir, fmt.Sprint(i)), c.cfg.MaxEntryBytes-total)
		if errors.Is(err, errNotCacheable) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("compile cache: %s: %w", name, err)
		}
		f.Name = name
		total += f.Size
		r.Files = append(r.Files, f)
	}
	r.Sum = r.sum()
	b, err := json.Marshal(r)
	if err != nil {
		return false, err
	}
	if err := os.WriteFile(filepath.Join(tmp, recordName), b, 0o644); err != nil {
		return false, fmt.Errorf("compile cache: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, exists := c.items[id]; exists {
		return false, nil
	}
	if err := os.Rename(tmp, filepath.Join(c.cfg.Dir, id)); err != nil {
		return false, fmt.Errorf("compile cache: %w", err)
	}
	c.items[id] = c.lru.PushFront(id)
	c.size[id] = r.bytes()
	c.stats.Bytes += c.size[id]
	c.stats.Puts++
	c.evictLocked()
	return true, nil
}

var errNotCacheable = errors.New("not cacheable")

// copyIn copies a regular file (no symlink, FIFO or device) of at most
// budget bytes, hashing it.
func copyIn(src, dst string, budget int64) (File, error) {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return File{}, errNotCacheable
		}
		return File{}, err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return File{}, err
	}
	if !st.Mode().IsRegular() || st.Size() > budget {
		return File{}, errNotCacheable
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return File{}, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(in, budget+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return File{}, err
	}
	if n > budget || n != st.Size() {
		return File{}, errNotCacheable // it grew while read: not a finished output
	}
	return File{Mode: st.Mode().Perm(), Size: n, Digest: hex.EncodeToString(h.Sum(nil))}, nil
}

// evictLocked removes least recently used entries until the bytes fit.
func (c *Cache) evictLocked() {
	for c.stats.Bytes > c.cfg.MaxBytes && c.lru.Len() > 0 {
		id := c.lru.Remove(c.lru.Back()).(string)
		c.stats.Bytes -= c.size[id]
		delete(c.size, id)
		delete(c.items, id)
		c.stats.Evicted++
		_ = os.RemoveAll(filepath.Join(c.cfg.Dir, id))
	}
}

// drop removes an entry that did not verify.
func (c *Cache) drop(id string, why error) {
	c.mu.Lock()
	if el, ok := c.items[id]; ok {
		c.lru.Remove(el)
		c.stats.Bytes -= c.size[id]
		delete(c.size, id)
		delete(c.items, id)
		c.stats.Dropped++
		_ = os.RemoveAll(filepath.Join(c.cfg.Dir, id))
	}
	c.mu.Unlock()
	c.cfg.Logger.Warn("compile cache entry dropped", "entry", id, "error", why)
}

func (c *Cache) count(f func(*Stats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

// readRegular reads a regular file of at most limit bytes.
func readRegular(p string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || st.Size() > limit {
		return nil, fmt.Errorf("%s is not a regular file within %d bytes", p, limit)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// Outputs lists every regular file under dir as slash-separated relative
// names: what a finished compile step left in its build directory, which an
// entry keeps whole. ok is false when dir holds anything but directories and
// regular files (a symlink, a FIFO), which is never cached.
func Outputs(dir string) (names []string, ok bool, err error) {
	ok = true
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			ok = false
			return filepath.SkipAll
		}
		rel, _ := filepath.Rel(dir, p)
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	return names, ok, err
}
