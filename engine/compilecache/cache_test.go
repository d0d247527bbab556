package compilecache

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func digest(s string) [32]byte { return sha256.Sum256([]byte(s)) }

func testKey(src string) Key {
	return Key{
		Image: "sha256:aaaa", Language: "cpp17",
		Command: []string{"g++", "-O2", "-o", "main", "main.cpp"},
		Limits:  []string{"cpu=10s"},
		Inputs:  []Input{{Name: "main.cpp", Digest: digest(src)}},
	}
}

func open(t *testing.T, cfg Config) *Cache {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	c, err := Open(cfg)
	require.NoError(t, err)
	return c
}

// compileDir lays out what a compile left behind: its input and outputs.
func compileDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o755))
	}
	return dir
}

func TestKeyNamesEveryField(t *testing.T) {
	t.Parallel()
	base := testKey("int main(){}")
	variants := map[string]func(k *Key){
		"image":    func(k *Key) { k.Image = "sha256:bbbb" },
		"language": func(k *Key) { k.Language = "cpp20" },
		"command":  func(k *Key) { k.Command = []string{"g++", "-O2 -o", "main", "main.cpp"} },
		"split":    func(k *Key) { k.Command = []string{"g++", "-O2", "-o", "main", "main.cpp", ""} },
		"env":      func(k *Key) { k.Env = []string{"LANG=C"} },
		"limits":   func(k *Key) { k.Limits = []string{"cpu=20s"} },
		"source":   func(k *Key) { k.Inputs = []Input{{Name: "main.cpp", Digest: digest("int main(){return 1;}")}} },
		"name":     func(k *Key) { k.Inputs = []Input{{Name: "main.c", Digest: digest("int main(){}")}} },
		"header": func(k *Key) {
			k.Inputs = append(k.Inputs, Input{Name: "add.h", Digest: digest("")})
		},
	}
	seen := map[string]string{base.ID(): "base"}
	for name, change := range variants {
		k := testKey("int main(){}")
		k.Inputs = append([]Input(nil), k.Inputs...)
		change(&k)
		id := k.ID()
		require.NotContains(t, seen, id, "%s collides with %s", name, seen[id])
		seen[id] = name
	}
	// A value that looks like the next field's tag stays in its own field.
	k1 := Key{Command: []string{"a", "env"}}
	k2 := Key{Command: []string{"a"}, Env: []string{"env"}}
	require.NotEqual(t, k1.ID(), k2.ID())
	// The order the inputs are listed in is no part of the key.
	a := Key{Inputs: []Input{{"a", digest("1")}, {"b", digest("2")}}}
	b := Key{Inputs: []Input{{"b", digest("2")}, {"a", digest("1")}}}
	require.Equal(t, a.ID(), b.ID())
}

func TestPutGetRestoresOutputs(t *testing.T) {
	t.Parallel()
	c := open(t, Config{})
	src := "int main(){}"
	k := testKey(src)
	dir := compileDir(t, map[string]string{"main.cpp": src, "main": "\x7fELF binary", "pkg/Helper.class": "cafe"})
	outs, ok, err := Outputs(dir)
	require.NoError(t, err)
	require.True(t, ok)
	require.ElementsMatch(t, []string{"main.cpp", "main", "pkg/Helper.class"}, outs)
	stored, err := c.Put(k, Outcome{OK: true, Log: "warning: x"}, dir, outs)
	require.NoError(t, err)
	require.True(t, stored)

	dst := t.TempDir()
	o, hit, err := c.Get(k, dst, 4321)
	require.NoError(t, err)
	require.True(t, hit)
	require.Equal(t, Outcome{OK: true, Log: "warning: x"}, o)
	b, err := os.ReadFile(filepath.Join(dst, "main"))
	require.NoError(t, err)
	require.Equal(t, "\x7fELF binary", string(b))
	st, err := os.Stat(filepath.Join(dst, "main"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), st.Mode().Perm(), "the executable bit survives")
	if os.Geteuid() == 0 {
		require.EqualValues(t, 4321, st.Sys().(*syscall.Stat_t).Uid, "restored files belong to the compile uid")
		dst, err := os.Stat(filepath.Join(dst, "pkg"))
		require.NoError(t, err)
		require.EqualValues(t, 4321, dst.Sys().(*syscall.Stat_t).Uid)
	}
	b, err = os.ReadFile(filepath.Join(dst, "pkg", "Helper.class"))
	require.NoError(t, err)
	require.Equal(t, "cafe", string(b))
	s := c.Stats()
	require.EqualValues(t, 1, s.Hits)
	require.EqualValues(t, 1, s.Puts)

	// Another source is another key: a miss, nothing written.
	dst2 := t.TempDir()
	_, hit, err = c.Get(testKey("int main(){return 1;}"), dst2, 4321)
	require.NoError(t, err)
	require.False(t, hit)
	ents, _ := os.ReadDir(dst2)
	require.Empty(t, ents)
}

func TestCompileErrorIsCached(t *testing.T) {
	t.Parallel()
	c := open(t, Config{})
	k := testKey("int main(){")
	dir := compileDir(t, map[string]string{"main.cpp": "int main(){"})
	stored, err := c.Put(k, Outcome{Log: "main.cpp:1: error: expected '}'", Message: "compilation failed"}, dir, nil)
	require.NoError(t, err)
	require.True(t, stored)
	o, hit, err := c.Get(k, t.TempDir(), 1000)
	require.NoError(t, err)
	require.True(t, hit)
	require.False(t, o.OK)
	require.Equal(t, "compilation failed", o.Message)
}

func TestCorruptEntryIsDroppedNotTrusted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, entry string)
	}{
		{"file bytes", func(t *testing.T, entry string) {
			require.NoError(t, os.WriteFile(filepath.Join(entry, filesDir, "0"), []byte("\x7fELF evil!!"), 0o644))
		}},
		{"file truncated", func(t *testing.T, entry string) {
			require.NoError(t, os.Truncate(filepath.Join(entry, filesDir, "0"), 3))
		}},
		{"file replaced by symlink", func(t *testing.T, entry string) {
			p := filepath.Join(entry, filesDir, "0")
			require.NoError(t, os.Remove(p))
			require.NoError(t, os.Symlink("/etc/passwd", p))
		}},
		{"record", func(t *testing.T, entry string) {
			p := filepath.Join(entry, recordName)
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			b[len(b)/2] ^= 1
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}},
		{"log edited with its sum", func(t *testing.T, entry string) {
			p := filepath.Join(entry, recordName)
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			b = []byte(string(b[:len(b)-2]) + " ")
			require.NoError(t, os.WriteFile(p, b, 0o644))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := open(t, Config{})
			src := "int main(){}"
			k := testKey(src)
			dir := compileDir(t, map[string]string{"main.cpp": src, "main": "\x7fELF binary", "z/second": "2"})
			_, err := c.Put(k, Outcome{OK: true}, dir, []string{"main", "z/second"})
			require.NoError(t, err)
			tc.corrupt(t, filepath.Join(c.cfg.Dir, k.ID()))

			dst := t.TempDir()
			_, hit, err := c.Get(k, dst, 1000)
			require.NoError(t, err)
			require.False(t, hit, "a corrupt entry is a miss")
			ents, _ := os.ReadDir(dst)
			require.Empty(t, ents, "nothing of a corrupt entry is left in the box")
			require.EqualValues(t, 1, c.Stats().Dropped)
			require.NoDirExists(t, filepath.Join(c.cfg.Dir, k.ID()))
			// The compile runs again and its outcome is stored anew.
			stored, err := c.Put(k, Outcome{OK: true}, dir, []string{"main", "z/second"})
			require.NoError(t, err)
			require.True(t, stored)
		})
	}
}

func TestEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Each entry is 10 KiB of output plus its record's share (512 bytes).
	c := open(t, Config{Dir: dir, MaxBytes: 32 << 10})
	body := string(make([]byte, 10<<10))
	keys := make([]Key, 4)
	for i := range keys {
		keys[i] = testKey(string(rune('a' + i)))
		d := compileDir(t, map[string]string{"main": body})
		_, err := c.Put(keys[i], Outcome{OK: true}, d, []string{"main"})
		require.NoError(t, err)
		if i == 2 {
			// Using the first entry makes the second the least recently used.
			_, hit, err := c.Get(keys[0], t.TempDir(), 1000)
			require.NoError(t, err)
			require.True(t, hit)
		}
	}
	require.LessOrEqual(t, c.Stats().Bytes, int64(32<<10))
	require.EqualValues(t, 1, c.Stats().Evicted)
	for i, want := range []bool{true, false, true, true} {
		_, hit, err := c.Get(keys[i], t.TempDir(), 1000)
		require.NoError(t, err)
		require.Equal(t, want, hit, "entry %d", i)
	}

	// A reopened cache keeps its entries and removes unfinished ones.
	require.NoError(t, os.Mkdir(filepath.Join(dir, tmpPrefix+"half"), 0o755))
	c2 := open(t, Config{Dir: dir, MaxBytes: 32 << 10})
	require.Equal(t, 3, c2.Stats().Entries)
	require.NoDirExists(t, filepath.Join(dir, tmpPrefix+"half"))
	_, hit, err := c2.Get(keys[3], t.TempDir(), 1000)
	require.NoError(t, err)
	require.True(t, hit)
}

func TestWhatIsNotCached(t *testing.T) {
	t.Parallel()
	c := open(t, Config{MaxEntryBytes: 1 << 10, MaxBytes: 1 << 20})
	src := "x"
	k := testKey(src)
	// A symlink among the outputs: never cached.
	dir := compileDir(t, map[string]string{"main.cpp": src})
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "main")))
	_, ok, err := Outputs(dir)
	require.NoError(t, err)
	require.False(t, ok)
	stored, err := c.Put(k, Outcome{OK: true}, dir, []string{"main"})
	require.NoError(t, err)
	require.False(t, stored)
	// Outputs over the entry bound: judged, not cached.
	big := compileDir(t, map[string]string{"main": string(make([]byte, 2<<10))})
	stored, err = c.Put(k, Outcome{OK: true}, big, []string{"main"})
	require.NoError(t, err)
	require.False(t, stored)
	// A name that climbs out of the box.
	stored, err = c.Put(k, Outcome{OK: true}, big, []string{"../main"})
	require.NoError(t, err)
	require.False(t, stored)
	require.Zero(t, c.Stats().Entries)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	err := Config{Dir: "relative", MaxBytes: 10, MaxEntryBytes: 20}.Validate()
	require.ErrorContains(t, err, "absolute")
	require.ErrorContains(t, err, "exceeds")
	require.NoError(t, Config{Dir: "/x"}.Validate())
}
