package deploy

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/worker"
)

// ---- systemd ----------------------------------------------------------------

type unitFile struct {
	path     string
	sections map[string]map[string][]string
}

func (u unitFile) get(section, key string) []string { return u.sections[section][key] }

func (u unitFile) one(t *testing.T, section, key string) string {
	t.Helper()
	v := u.get(section, key)
	require.Len(t, v, 1, "%s: [%s] %s", u.path, section, key)
	return v[0]
}

func parseUnit(t *testing.T, p string) unitFile {
	t.Helper()
	data, err := os.ReadFile(repo(p))
	require.NoError(t, err)
	u := unitFile{path: p, sections: map[string]map[string][]string{}}
	var sec string
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(lines[i])
		}
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			require.True(t, strings.HasSuffix(line, "]"), "%s: bad section %q", p, line)
			sec = line[1 : len(line)-1]
			require.NotContains(t, u.sections, sec, "%s: section %s twice", p, sec)
			u.sections[sec] = map[string][]string{}
		default:
			require.NotEmpty(t, sec, "%s: key outside a section: %q", p, line)
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok, "%s: not Key=Value: %q", p, line)
			k = strings.TrimSpace(k)
			u.sections[sec][k] = append(u.sections[sec][k], strings.TrimSpace(v))
		}
	}
	return u
}

// systemdDuration parses the time spans the units use ("6min", "30s", "1h 5min").
func systemdDuration(s string) (time.Duration, error) {
	units := map[string]time.Duration{"": time.Second, "us": time.Microsecond, "ms": time.Millisecond,
		"s": time.Second, "sec": time.Second, "m": time.Minute, "min": time.Minute, "h": time.Hour, "hr": time.Hour}
	var total time.Duration
	re := regexp.MustCompile(`^(\d+)([a-z]*)$`)
	for _, f := range strings.Fields(s) {
		m := re.FindStringSubmatch(f)
		if m == nil {
			return 0, fmt.Errorf("time span %q", s)
		}
		u, ok := units[m[2]]
		if !ok {
			return 0, fmt.Errorf("time unit %q in %q", m[2], s)
		}
		n, _ := strconv.Atoi(m[1])
		total += time.Duration(n) * u
	}
	return total, nil
}

// stopBound is the least time a node needs to stop cleanly: its drain grace
// (--drain-grace where a unit or the Compose file passes it, else the
// default) plus cleanup.
func stopBound(t *testing.T) time.Duration {
	t.Helper()
	grace := worker.DrainGraceDefault
	var cmds []string
	for _, u := range []string{nodeCodeUnit, nodeSQLUnit} {
		cmds = append(cmds, parseUnit(t, u).get("Service", "ExecStart")...)
	}
	c := loadCompose(t, composeNode)
	for _, svc := range []string{"code-node", "sql-node"} {
		cmds = append(cmds, strings.Join(strList(service(t, c, svc)["command"]), " "))
	}
	re := regexp.MustCompile(`--?drain-grace[= ](\S+)`)
	for _, cmd := range cmds {
		if m := re.FindStringSubmatch(cmd); m != nil {
			d, err := time.ParseDuration(m[1])
			require.NoError(t, err, "--drain-grace in %q", cmd)
			grace = max(grace, d)
		}
	}
	return grace + worker.CleanupTimeoutDefault
}
