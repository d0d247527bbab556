package buildinfo

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadWithoutStamp(t *testing.T) {
	t.Parallel()
	i := Read()
	require.NotEmpty(t, i.Version)
	require.True(t, strings.HasPrefix(i.Go, "go"), i.Go)
	require.True(t, strings.HasPrefix(String("kece-x"), "kece-x "+i.Version), String("kece-x"))
	require.Equal(t, "0123456789ab", short("0123456789abcdef"))
	require.Equal(t, "0123456789ab+dirty", short("0123456789abcdef+dirty"))
	require.Equal(t, "abc", short("abc"))
}

// The Makefile's -ldflags stamp reaches every binary's --version and
// version (kece-sandbox-init: --version only) and the version kece-node
// reports (it is the same package variable).
func TestLinkerStamp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	t.Parallel()
	dir := t.TempDir()
	bins := []string{"kecectl", "kece-node", "kece-control", "kece-bench", "kece-demo", "kece-sandbox-init"}
	args := []string{"build", "-ldflags", "-X github.com/kece-oj/kece/internal/buildinfo.version=v9.8.7-test", "-o", dir + "/"}
	for _, b := range bins {
		args = append(args, "../../cmd/"+b)
	}
	out, err := exec.Command("go", args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, bin := range bins {
		forms := []string{"--version", "version"}
		if bin == "kece-sandbox-init" {
			forms = forms[:1]
		}
		for _, arg := range forms {
			out, err := exec.Command(filepath.Join(dir, bin), arg).CombinedOutput()
			require.NoError(t, err, "%s %s: %s", bin, arg, out)
			require.True(t, strings.HasPrefix(string(out), bin+" v9.8.7-test "), "%s %s: %s", bin, arg, out)
		}
	}
}
