package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConfigureRefusesWithClearErrors(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	base := map[string]string{
		"KECE_CONTROL_URL": "http://127.0.0.1:1", "KECE_CREDENTIAL_FILE": filepath.Join(dir, "cred"),
		"KECE_LOCAL_SLOTS": "2", "KECE_CACHE_DIR": filepath.Join(dir, "cache"), "KECE_WORKSPACE": filepath.Join(dir, "ws"),
	}
	getenv := func(over map[string]string) func(string) string {
		return func(k string) string {
			if v, ok := over[k]; ok {
				return v
			}
			return base[k]
		}
	}
	for name, c := range map[string]struct {
		env  map[string]string
		want string
	}{
		"unknown pool":      {map[string]string{"KECE_POOL": "rust"}, "KECE_POOL"},
		"no slots":          {map[string]string{"KECE_POOL": "mysql", "KECE_LOCAL_SLOTS": ""}, "KECE_LOCAL_SLOTS is required"},
		"zero slots":        {map[string]string{"KECE_POOL": "mysql", "KECE_LOCAL_SLOTS": "0"}, "KECE_LOCAL_SLOTS"},
		"mysql without dsn": {map[string]string{"KECE_POOL": "mysql"}, "KECE_JUDGE_MYSQL_DSN_FILE is required"},
		"code without ws":   {map[string]string{"KECE_POOL": "cpp", "KECE_WORKSPACE": ""}, "KECE_WORKSPACE"},
		"bad cache size":    {map[string]string{"KECE_POOL": "mysql", "KECE_CACHE_MAX_BYTES": "lots"}, "KECE_CACHE_MAX_BYTES"},
	} {
		_, err := configure(nil, getenv(c.env), log)
		require.Error(t, err, name)
		require.Contains(t, err.Error(), c.want, name)
	}

	// A readable DSN file is refused; a 0600 one builds the SQL executor
	// (without contacting anything) and never the Docker one.
	dsn := filepath.Join(dir, "dsn")
	require.NoError(t, os.WriteFile(dsn, []byte("root@tcp(127.0.0.1:1)/\n"), 0o644))
	_, err := configure(nil, getenv(map[string]string{"KECE_POOL": "mysql", "KECE_JUDGE_MYSQL_DSN_FILE": dsn}), log)
	require.ErrorContains(t, err, "must be 0600")
	require.NoError(t, os.Chmod(dsn, 0o600))
	cfg, err := configure(nil, getenv(map[string]string{"KECE_POOL": "mysql", "KECE_JUDGE_MYSQL_DSN_FILE": dsn}), log)
	require.NoError(t, err)
	require.Equal(t, 2, cfg.LocalSlots)
	require.NotNil(t, cfg.NewBackend)

	// A code pool never reads the DSN file, even a missing one.
	cfg, err = configure(nil, getenv(map[string]string{"KECE_POOL": "cpp", "KECE_JUDGE_MYSQL_DSN_FILE": filepath.Join(dir, "absent")}), log)
	require.NoError(t, err)
	require.Equal(t, "cpp", cfg.Pool)

	cfg, err = configure([]string{"-local-slots", "3", "-cache-max", "2GiB"}, getenv(map[string]string{"KECE_POOL": "mysql", "KECE_JUDGE_MYSQL_DSN_FILE": dsn}), log)
	require.NoError(t, err)
	require.Equal(t, 3, cfg.LocalSlots, "flags override the environment")
	require.Equal(t, int64(2<<30), cfg.CacheMaxBytes)
}
