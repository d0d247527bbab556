package main

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// A path setting that names a named pipe, a device, a socket or a
// directory where a file belongs (or a file where a directory belongs)
// stops the built binary at start with exit 2 and a message naming the
// setting and what the path is. A FIFO at KECE_CREDENTIAL_FILE used to
// block the start with no message (issue 47, item 7: the file was opened
// before its type was checked), as did one at --env-file; the seccomp
// profile and the supervisor were only read once the node had joined.
func TestPathSettingsOfTheWrongTypeExit2(t *testing.T) {
	t.Parallel()
	bin := buildNode(t)
	dir := t.TempDir()
	fifo := func(name string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, syscall.Mkfifo(p, 0o600))
		return p
	}
	sock := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	const device = "/dev/null"
	st, err := os.Stat(device)
	require.NoError(t, err)
	require.NotZero(t, st.Mode()&os.ModeCharDevice, "%s is a character device here", device)
	base := map[string]string{
		"KECE_POOL": "cpp", "KECE_CONTROL_URL": "http://127.0.0.1:1", "KECE_LOCAL_SLOTS": "1",
		"KECE_CACHE_DIR": filepath.Join(dir, "cache"), "KECE_WORKSPACE": filepath.Join(dir, "ws"),
		"KECE_CREDENTIAL_FILE": filepath.Join(dir, "absent"),
	}
	with := func(over map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range over {
			m[k] = v
		}
		return m
	}
	credFIFO, codeFIFO, dsnFIFO, seccompFIFO, supFIFO, cacheFIFO := fifo("cred"), fifo("code"), fifo("dsn"), fifo("seccomp"), fifo("sup"), fifo("cache")
	envFIFO, joinCredFIFO := fifo("env"), fifo("join-cred")
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"credential is a FIFO", with(map[string]string{"KECE_CREDENTIAL_FILE": credFIFO}), nil,
			"KECE_CREDENTIAL_FILE " + credFIFO + " is not a regular file: it is a named pipe (FIFO)"},
		{"credential is a device", with(map[string]string{"KECE_CREDENTIAL_FILE": device}), nil,
			"KECE_CREDENTIAL_FILE " + device + " is not a regular file: it is a character device"},
		{"credential is a directory", with(map[string]string{"KECE_CREDENTIAL_FILE": t.TempDir()}), nil,
			"is not a regular file: it is a directory"},
		{"credential is a socket", with(map[string]string{"KECE_CREDENTIAL_FILE": sock}), nil,
			"KECE_CREDENTIAL_FILE " + sock + " is not a regular file: it is a socket"},
		{"join code file is a FIFO", with(map[string]string{"KECE_JOIN_CODE_FILE": codeFIFO}), nil,
			"KECE_JOIN_CODE_FILE: " + codeFIFO + " is not a regular file"},
		{"dsn file is a FIFO", with(map[string]string{"KECE_POOL": "mysql", "KECE_JUDGE_MYSQL_DSN_FILE": dsnFIFO}), nil,
			"KECE_JUDGE_MYSQL_DSN_FILE: " + dsnFIFO + " is not a regular file"},
		{"seccomp profile is a FIFO", with(map[string]string{"KECE_SECCOMP_PROFILE": seccompFIFO}), nil,
			"KECE_SECCOMP_PROFILE " + seccompFIFO + " is not a regular file: it is a named pipe (FIFO)"},
		{"supervisor is a device", with(map[string]string{"KECE_SUPERVISOR": device}), nil,
			"KECE_SUPERVISOR " + device + " is not a regular file: it is a character device"},
		{"supervisor is a FIFO, by flag", base, []string{"--supervisor", supFIFO},
			"--supervisor " + supFIFO + " is not a regular file: it is a named pipe (FIFO)"},
		{"cache dir is a FIFO", with(map[string]string{"KECE_CACHE_DIR": cacheFIFO}), nil,
			"KECE_CACHE_DIR " + cacheFIFO + " is not a directory: it is a named pipe (FIFO)"},
		{"workspace is a device", with(map[string]string{"KECE_WORKSPACE": device}), nil,
			"KECE_WORKSPACE " + device + " is not a directory: it is a character device"},
		{"join: env file is a FIFO", map[string]string{}, []string{"join", "--env-file", envFIFO},
			"--env-file " + envFIFO + " is not a regular file: it is a named pipe (FIFO)"},
		{"join: credential path is a FIFO", map[string]string{}, []string{"join", "--control-url", "http://127.0.0.1:1", "--pool", "cpp",
			"--join-code", "kjc_x", "--credential-file", joinCredFIFO}, joinCredFIFO + " is a named pipe (FIFO), not a credential"},
	}
	for _, c := range cases {
		code, stderr := startBinary(t, bin, c.env, nil, c.args...)
		require.Equal(t, exitConfig, code, "%s: %s", c.name, stderr)
		require.Contains(t, stderr, c.want, c.name)
	}
}
