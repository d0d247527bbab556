package deploy

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/worker"
)

// ---- documentation ------------------------------------------------------------

func TestDocsReferToRealFiles(t *testing.T) {
	t.Parallel()
	pathRE := regexp.MustCompile("(?:deploy|docs|cmd|scripts)/[A-Za-z0-9_.@/-]*[A-Za-z0-9_@-]")
	for _, doc := range []string{operationsGuide, deployReadme} {
		data, err := os.ReadFile(repo(doc))
		require.NoError(t, err)
		for _, p := range pathRE.FindAllString(string(data), -1) {
			if strings.Contains(p, "<") || strings.HasPrefix(p, "deploy/images/.build") {
				continue
			}
			_, err := os.Stat(repo(p))
			require.NoError(t, err, "%s mentions %s, which does not exist", doc, p)
		}
	}
	guide, err := os.ReadFile(repo(operationsGuide))
	require.NoError(t, err)
	require.Contains(t, string(guide), "never both")
	readme, err := os.ReadFile(repo(deployReadme))
	require.NoError(t, err)
	require.Contains(t, string(readme), "never both")
	// The README indexes every file this package owns.
	for _, dir := range []string{"deploy/systemd", "deploy/compose/node", "deploy/compose/control-dev", "deploy/compose/quickstart", "deploy/control", "deploy/nginx", "deploy/docker"} {
		entries, err := os.ReadDir(repo(dir))
		require.NoError(t, err)
		for _, e := range entries {
			require.Contains(t, string(readme), dir+"/"+e.Name(), "%s does not list %s/%s", deployReadme, dir, e.Name())
		}
	}
}

// TestTimingsTable checks the guide's default timings against the code: the
// first table row whose first column names a setting gives its default in
// the second column.
func TestTimingsTable(t *testing.T) {
	t.Parallel()
	want := map[string]time.Duration{
		"KECE_LEASE_TTL":          store.LeaseTTLDefault,
		"KECE_REAP_INTERVAL":      store.ReapIntervalDefault,
		"KECE_HEARTBEAT_INTERVAL": httpapi.HeartbeatIntervalDefault,
		"KECE_RENEW_INTERVAL":     httpapi.RenewIntervalDefault,
		"KECE_OFFLINE_AFTER":      store.OfflineAfterDefault,
		"claim wait":              httpapi.ClaimWaitMaxDefault,
		"join code":               store.JoinCodeTTLDefault,
		"backoff base":            store.BackoffBaseDefault,
		"backoff cap":             store.BackoffMaxDefault,
		"--drain-grace":           worker.DrainGraceDefault,
		"safety margin":           worker.SafetyMarginDefault,
	}
	data, err := os.ReadFile(repo(operationsGuide))
	require.NoError(t, err)
	rows := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		for name := range want {
			if _, seen := rows[name]; !seen && strings.Contains(cells[1], name) {
				rows[name] = strings.Trim(strings.TrimSpace(cells[2]), "`")
			}
		}
	}
	for _, name := range sortedKeys(want) {
		v, ok := rows[name]
		require.True(t, ok, "%s: the timings table has no row naming `%s`", operationsGuide, name)
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "%s row %s: %q", operationsGuide, name, v)
		require.Equal(t, want[name], d, "%s: default of %s", operationsGuide, name)
	}
	attempts := regexp.MustCompile("`KECE_MAX_ATTEMPTS`[^|]*\\|\\s*(\\d+)").FindStringSubmatch(string(data))
	require.NotNil(t, attempts, "timings table names `KECE_MAX_ATTEMPTS`")
	require.Equal(t, strconv.Itoa(store.MaxAttemptsDefault), attempts[1])
}
