package deploy

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The images: deploy/docker/local/*.Dockerfile, built by `make images`
// without a registry, must give the layout of the operator Dockerfiles.
var imageDockerfiles = map[string]struct{ operator, local string }{
	"kece-control": {controlDocker, "deploy/docker/local/control.Dockerfile"},
	"kece-node":    {nodeDocker, "deploy/docker/local/node.Dockerfile"},
}

// finalStage returns the instructions after the last FROM, continuation
// lines joined and comments dropped, with COPY reduced to its flags other
// than --from and its destination (where a file comes from may differ,
// where it goes may not).
func finalStage(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(repo(path))
	require.NoError(t, err)
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		lines = append(lines, l)
	}
	src := strings.ReplaceAll(strings.Join(lines, "\n"), "\\\n", " ")
	var stage []string
	for _, l := range strings.Split(src, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			stage = nil
			continue
		case "COPY":
			var kept []string
			for _, a := range f[1 : len(f)-2] {
				if !strings.HasPrefix(a, "--from=") {
					kept = append(kept, a)
				}
			}
			f = append(append([]string{"COPY"}, kept...), f[len(f)-1])
		}
		stage = append(stage, strings.Join(f, " "))
	}
	return stage
}

// The two Dockerfiles of each image end the same way: same paths, owner,
// user, labels, environment, healthcheck and entrypoint.
func TestImageDockerfilesAgree(t *testing.T) {
	t.Parallel()
	for name, files := range imageDockerfiles {
		op, loc := finalStage(t, files.operator), finalStage(t, files.local)
		require.Equal(t, op, loc, "%s: the final stages of %s and %s differ", name, files.operator, files.local)
		require.Contains(t, op, `ENTRYPOINT ["/usr/local/bin/`+name+`"]`)
		require.Contains(t, strings.Join(op, "\n"), `CMD ["/usr/local/bin/`+name+`", "healthcheck", "--quiet"]`)
	}
	require.Contains(t, finalStage(t, controlDocker), "USER 65532:65532", "the control image runs unprivileged")
}

// dockerfileValue is the argument of the first instruction named instr of a
// final stage (e.g. USER, ENTRYPOINT).
func dockerfileValue(stage []string, instr string) string {
	for _, l := range stage {
		if rest, ok := strings.CutPrefix(l, instr+" "); ok {
			return rest
		}
	}
	return ""
}

// imageConfig is the part of `docker image inspect` this test compares.
type imageConfig struct {
	Size   int64
	Config struct {
		User        string
		Entrypoint  []string
		Cmd         []string
		Env         []string
		Labels      map[string]string
		StopSignal  string
		Healthcheck struct{ Test []string }
	}
}

// `make images` on this machine: both images built without a registry,
// saved for hosts without one, and inspected against the operator
// Dockerfiles: user, entrypoint, command, labels, healthcheck, every path
// their COPY lines name (with its owner), a shell only where one is needed.
func TestImagesBuildHere(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	const version = "v0.0.2-imgtest"
	dist := t.TempDir()
	started := time.Now()
	cmd := exec.Command(repo("scripts/images.sh"), version)
	cmd.Env = append(os.Environ(), "DIST="+dist, "TAG_LATEST=0")
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() {
		_ = exec.Command("docker", "rmi", "kece/kece-control:"+version, "kece/kece-node:"+version).Run()
	})
	require.NoError(t, err, "%s", out)
	figure(t, "make images: %s", time.Since(started).Round(time.Second))
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	require.NoError(t, err)

	for name, files := range imageDockerfiles {
		ref := "kece/" + name + ":" + version
		raw, err := exec.Command("docker", "image", "inspect", ref).Output()
		require.NoError(t, err, ref)
		var cfgs []imageConfig
		require.NoError(t, json.Unmarshal(raw, &cfgs))
		c := cfgs[0].Config
		stage := finalStage(t, files.operator)
		require.Equal(t, dockerfileValue(stage, "USER"), c.User, "%s user", ref)
		require.Equal(t, `["/usr/local/bin/`+name+`"]`, dockerfileValue(stage, "ENTRYPOINT"))
		require.Equal(t, []string{"/usr/local/bin/" + name}, c.Entrypoint, ref)
		require.Equal(t, []string{"/usr/local/bin/" + name, "healthcheck", "--quiet"}, c.Healthcheck.Test[1:], ref)
		require.Equal(t, version, c.Labels["org.opencontainers.image.version"], ref)
		for _, m := range regexp.MustCompile(`(org\.opencontainers\.image\.\w+)="([^"$]*)"`).FindAllStringSubmatch(dockerfileValue(stage, "LABEL"), -1) {
			require.Equal(t, m[2], c.Labels[m[1]], "%s label %s", ref, m[1])
		}
		for _, kv := range strings.Fields(dockerfileValue(stage, "ENV")) {
			require.Contains(t, c.Env, kv, ref)
		}
		if name == "kece-control" {
			require.Equal(t, []string{"serve"}, c.Cmd)
		}

		entries := imageFiles(t, ref)
		for _, l := range stage {
			f := strings.Fields(l)
			if f[0] != "COPY" {
				continue
			}
			dest := strings.TrimSuffix(strings.TrimPrefix(f[len(f)-1], "/"), "/")
			h, ok := entries[dest]
			require.True(t, ok, "%s has no %s (%s)", ref, dest, l)
			if len(f) == 3 && strings.HasPrefix(f[1], "--chown=") {
				require.Equal(t, "65532:65532", strings.TrimPrefix(f[1], "--chown="))
				require.Equal(t, 65532, h.Uid, "%s: owner of %s", ref, dest)
			}
		}
		_, shell := entries["usr/bin/sh"] // Debian 12: /bin is a link to usr/bin
		if _, ok := entries["bin/sh"]; ok {
			shell = true
		}
		require.Equal(t, name == "kece-node", shell, "%s: /bin/sh only in the node image (its supervisor one-shot)", ref)

		v, err := exec.Command("docker", "run", "--rm", "--network", "none", ref, "version").CombinedOutput()
		require.NoError(t, err, "%s", v)
		require.True(t, strings.HasPrefix(string(v), name+" "+version+" "), "%s", v)

		saved := filepath.Join(dist, name+"-image-"+version+"-linux-"+goarch(t)+".tar.gz")
		fi, err := os.Stat(saved)
		require.NoError(t, err)
		require.Contains(t, string(sums), "  "+filepath.Base(saved)+"\n")
		require.Contains(t, savedTags(t, saved), ref)
		figure(t, "%s: image %.1f MB, docker save %.1f MB gzipped", ref, float64(cfgs[0].Size)/1e6, float64(fi.Size())/1e6)
	}
}

// imageFiles lists an image's files (docker create + export), without the
// leading slash, with their tar headers.
func imageFiles(t *testing.T, ref string) map[string]*tar.Header {
	t.Helper()
	id, err := exec.Command("docker", "create", "--network", "none", ref).Output()
	require.NoError(t, err)
	cid := strings.TrimSpace(string(id))
	defer func() { _ = exec.Command("docker", "rm", "-f", cid).Run() }()
	exp := exec.Command("docker", "export", cid)
	r, err := exp.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, exp.Start())
	out := map[string]*tar.Header{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		out[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = h
	}
	require.NoError(t, exp.Wait())
	return out
}

// savedTags reads the repository tags a `docker save` tarball carries.
func savedTags(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		require.NoError(t, err, "no manifest.json in %s", path)
		if h.Name == "manifest.json" {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			return string(b)
		}
	}
}

func goarch(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOARCH").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}
