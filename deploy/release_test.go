package deploy

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// releaseTargets are the platforms `make release` builds, with the ELF
// machine each binary must have.
var releaseTargets = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// What every release tarball holds besides the binaries: the operator files
// docs/operations.md installs from, at their repository paths.
var releaseFiles = []string{
	"CHANGELOG.md", "README.md", "docs/operations.md", "docs/node.md", "deploy/README.md",
	controlUnit, nodeCodeUnit, nodeSQLUnit, nodeCppEnv, nodeMySQLEnv, controlEnv, "deploy/node/node.env.example",
	composeNode, composeNodeEnv, composeProjEnv, composeControl, nginxConf, controlDocker, nodeDocker,
}

// `make release VERSION=…` writes one tarball per target and SHA256SUMS;
// each tarball holds every command as a static binary of its architecture,
// stamped with the version, and the operator files byte for byte.
func TestReleaseTarballs(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles every binary twice")
	}
	t.Parallel()
	const version = "v0.0.1-reltest"
	dist := t.TempDir()
	started := time.Now()
	out, err := exec.Command("make", "-C", root, "release", "VERSION="+version, "DIST="+dist).CombinedOutput()
	require.NoError(t, err, "%s", out)
	figure(t, "make release: %s", time.Since(started).Round(time.Second))

	cmds, err := os.ReadDir(repo("cmd"))
	require.NoError(t, err)
	var bins []string
	for _, c := range cmds {
		if c.IsDir() && c.Name() != "internal" {
			bins = append(bins, c.Name())
		}
	}
	require.Contains(t, bins, "kece-node")

	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	require.NoError(t, err)
	require.Len(t, strings.Split(strings.TrimSpace(string(sums)), "\n"), len(releaseTargets), "%s", sums)
	for arch, machine := range releaseTargets {
		name := "kece-" + version + "-linux-" + arch
		tarball := filepath.Join(dist, name+".tar.gz")
		data, err := os.ReadFile(tarball)
		require.NoError(t, err)
		sum := sha256.Sum256(data)
		require.Contains(t, string(sums), hex.EncodeToString(sum[:])+"  "+name+".tar.gz\n")
		fi, err := os.Stat(tarball)
		require.NoError(t, err)
		figure(t, "%s.tar.gz: %.1f MB", name, float64(fi.Size())/1e6)

		dir := t.TempDir()
		entries := untar(t, tarball, dir)
		for _, e := range entries {
			require.True(t, strings.HasPrefix(e, name+"/"), "entry %s outside %s/", e, name)
		}
		top := filepath.Join(dir, name)
		for _, b := range bins {
			f, err := elf.Open(filepath.Join(top, "bin", b))
			require.NoError(t, err, "%s: bin/%s", name, b)
			require.Equal(t, machine, f.Machine, "%s: bin/%s", name, b)
			for _, p := range f.Progs {
				require.NotEqual(t, elf.PT_INTERP, p.Type, "%s: bin/%s is dynamically linked", name, b)
			}
			f.Close()
			// kece-sandbox-init (the in-sandbox supervisor) has no
			// commands and does not import buildinfo.
			if arch == runtime.GOARCH && b != "kece-sandbox-init" {
				v, err := exec.Command(filepath.Join(top, "bin", b), "--version").CombinedOutput()
				require.NoError(t, err, "%s", v)
				require.True(t, strings.HasPrefix(string(v), b+" "+version+" "), "%s", v)
			}
		}
		for _, f := range releaseFiles {
			want, err := os.ReadFile(repo(f))
			require.NoError(t, err)
			got, err := os.ReadFile(filepath.Join(top, filepath.FromSlash(f)))
			require.NoError(t, err, "%s lacks %s", name, f)
			require.Equal(t, string(want), string(got), "%s: %s differs from the repository", name, f)
		}
	}
}

// untar unpacks a .tar.gz into dir and returns its entry names.
func untar(t *testing.T, path, dir string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		require.NoError(t, err)
		names = append(names, h.Name)
		require.Zero(t, h.Uid, "%s: owner", h.Name)
		dst := filepath.Join(dir, filepath.FromSlash(h.Name))
		require.True(t, strings.HasPrefix(dst, dir+string(filepath.Separator)), "entry %s escapes", h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(dst, 0o755))
		case tar.TypeReg:
			require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
			out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			require.NoError(t, err)
			_, err = io.Copy(out, tr)
			require.NoError(t, err)
			require.NoError(t, out.Close())
		default:
			t.Fatalf("%s: unexpected entry type %c", h.Name, h.Typeflag)
		}
	}
}
