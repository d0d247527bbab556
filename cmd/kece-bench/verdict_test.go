package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/cmd/internal/problems"
	"github.com/kece-oj/kece/engine/code"
)

// The short mode of `kece-bench verdict` on a real control plane, real
// nodes in real Docker and the host's compilers: every line it prints is
// key=value fields, and it prints a row and a phases line per language,
// kind and mode, a rejudge line per language and one for all, with figures
// that parse, both sides judged AC. No timing is asserted: speed is the
// benchmark's to show, not a test's.
func TestVerdictShortModePrintsParsableRows(t *testing.T) {
	t.Parallel()
	requireVerdictServices(t)
	bin := buildFleetBinaries(t)
	cfg, err := parseVerdict([]string{"-n", "2", "-languages", "c17,python3", "-bin", bin})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	var out strings.Builder
	require.NoError(t, verdictRun(ctx, cfg, &out), "%s", out.String())

	lines := parseKeyValueLines(t, out.String())
	byKey := func(key, value string) map[string]string {
		t.Helper()
		for _, l := range lines {
			if l[key] == value {
				return l
			}
		}
		t.Fatalf("no line with %s=%s in:\n%s", key, value, out.String())
		return nil
	}
	number := func(l map[string]string, k string) float64 {
		t.Helper()
		v, err := strconv.ParseFloat(l[k], 64)
		require.NoError(t, err, "%s=%q in %v", k, l[k], l)
		return v
	}
	for _, lang := range []string{"c17", "python3"} {
		for _, kind := range verdictKinds {
			for _, mode := range []string{"latency", "throughput"} {
				name := lang + "/" + kind + "/" + mode
				row := byKey("row", name)
				require.Equal(t, "2", row["n"], name)
				for _, k := range []string{"kece_p50_ms", "kece_p95_ms", "native_p50_ms", "native_p95_ms", "ratio_p50", "ratio_p95"} {
					require.Positive(t, number(row, k), "%s %s", name, k)
				}
				require.Equal(t, "0", row["kece_wrong"], name)
				require.Equal(t, "0", row["native_wrong"], name)
				number(row, "load1")
				if mode == "throughput" {
					require.Positive(t, number(row, "ratio_wall"), name)
				}
				ph := byKey("phases", name)
				require.Positive(t, number(ph, "node_compile_ms_mean"), name)
				require.Positive(t, number(ph, "node_judge_ms_mean"), name)
				number(ph, "share_queue")
				require.Contains(t, []string{"absent", "present"}, ph["node_phase_histograms"], name)
			}
		}
		rj := byKey("rejudge", lang)
		require.Equal(t, "6", rj["n"], "the three kinds' throughput submissions")
		require.Positive(t, number(rj, "speedup"))
		require.Equal(t, "0", rj["wrong"])
	}
	require.Equal(t, "12", byKey("rejudge", "all")["n"])
	require.Equal(t, "c17,python3", byKey("mode", "real_kece_control_and_nodes")["languages"])
	tools := ""
	for _, l := range lines {
		tools += l["native_tools"]
	}
	require.Contains(t, tools, "gcc:", "the tools the native side ran")
	number(lines[len(lines)-1], "elapsed_s")
	require.Equal(t, "0", lines[len(lines)-1]["wrong"])
	loads := 0
	for _, l := range lines {
		if v, ok := l["loadavg"]; ok {
			require.Len(t, strings.Split(v, ","), 3, "loadavg=%s", v)
			loads++
		}
	}
	require.Equal(t, 2, loads, "the load average before and after")
}

// parseKeyValueLines splits output into lines of key=value fields, failing
// on any field that is not one.
func parseKeyValueLines(t *testing.T, out string) []map[string]string {
	t.Helper()
	var lines []map[string]string
	for line := range strings.Lines(out) {
		fields := map[string]string{}
		for f := range strings.FieldsSeq(line) {
			k, v, ok := strings.Cut(f, "=")
			require.True(t, ok && k != "" && v != "", "field %q is not key=value in line %q", f, line)
			fields[k] = v
		}
		if len(fields) > 0 {
			lines = append(lines, fields)
		}
	}
	require.NotEmpty(t, lines)
	return lines
}

// A host without the native tools is refused before anything starts, and
// the message names each missing tool and the Debian package to install.
func TestVerdictNamesMissingToolsAndTheirPackages(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := newNativeHost(t.Context(), []string{"java17", "arkts"}, []string{kindTestlib}, problems.SumCases(1), problems.TestlibHeader)
	require.Error(t, err)
	for _, want := range []string{"javac (Debian package default-jdk-headless)", "java (Debian package default-jdk-headless)",
		"tsc (Debian package node-typescript)", "node (Debian package nodejs)", "g++ (Debian package g++)",
		"apt-get install -y default-jdk-headless g++ node-typescript nodejs", "scripts/bench-verdict.sh"} {
		require.Contains(t, err.Error(), want)
	}
}

func TestVerdictConfigNamesWhatToFix(t *testing.T) {
	t.Parallel()
	cfg, err := parseVerdict(nil)
	require.NoError(t, err)
	require.Equal(t, 20, cfg.n)
	require.Equal(t, verdictLanguagesDefault, cfg.languages)
	require.Equal(t, verdictKinds, cfg.kinds)
	_, err = parseVerdict([]string{"-n", "0", "-languages", "c17,cobol", "-kinds", "tolerant,oracle", "-slots", "0"})
	require.Error(t, err)
	for _, want := range []string{"-n: must be at least 1", `-languages: no a+b program for "cobol"`, `-kinds: unknown kind "oracle"`, "-slots: must be 1..64"} {
		require.Contains(t, err.Error(), want)
	}
}

// requireVerdictServices skips the short run where MariaDB, Docker (with
// the cpp and python images) or the host's gcc, g++ and python3 are
// missing, and fails it under KECE_REQUIRE_MYSQL=1 / KECE_REQUIRE_DOCKER=1.
func requireVerdictServices(t *testing.T) {
	t.Helper()
	miss := func(env, format string, args ...any) {
		t.Helper()
		if os.Getenv(env) == "1" {
			t.Fatalf(env+"=1: "+format, args...)
		}
		t.Skipf(format+" (set "+env+"=1 to fail instead)", args...)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, _, drop, err := freshDatabase(ctx, "", 2)
	if err != nil {
		miss("KECE_REQUIRE_MYSQL", "MariaDB: %v", err)
	}
	drop()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		miss("KECE_REQUIRE_DOCKER", "docker client: %v", err)
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		miss("KECE_REQUIRE_DOCKER", "docker daemon: %v", err)
	}
	for _, pool := range []string{"cpp", "python"} {
		tag, err := code.ImageTag(pool)
		require.NoError(t, err)
		if _, err := cli.ImageInspect(ctx, tag); err != nil {
			miss("KECE_REQUIRE_DOCKER", "image %s missing (deploy/images/build-local.sh): %v", tag, err)
		}
	}
	for _, tool := range []string{"gcc", "g++", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			miss("KECE_REQUIRE_DOCKER", "%s not on PATH (the native baseline): %v", tool, err)
		}
	}
}

// buildFleetBinaries builds kece-control, kece-node and the static
// kece-sandbox-init from this tree into a temporary directory.
func buildFleetBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	for _, pkg := range []string{"kece-control", "kece-node", "kece-sandbox-init"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, pkg), "./cmd/"+pkg)
		cmd.Dir = root
		if pkg == "kece-sandbox-init" {
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // static: it runs inside every image
		}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "build %s: %s", pkg, out)
	}
	return dir
}
