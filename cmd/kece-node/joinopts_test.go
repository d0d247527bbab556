package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/controltest"
)

// Where the credential goes when the pasted command does not say: the
// unit's env file (systemd EnvironmentFile format), else $STATE_DIRECTORY;
// with neither, exit 2 before the code is spent.
func TestJoinFindsTheCredentialPath(t *testing.T) {
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	dir := t.TempDir()

	n := env.NewNode("python", 1, 4)
	r := runCmd(nil, "join", "--control-url", env.URL, "--pool", "python", "--join-code", n.JoinCode)
	require.Equal(t, exitConfig, r.code, r.stderr)
	require.Contains(t, r.stderr, "where should the credential go? Give --credential-file PATH")

	// The env file names the path, the URL and the pool (quoted, with comments).
	cred := filepath.Join(dir, "var", "lib", "kece", "node-py-01", "credential")
	envFile := filepath.Join(dir, "node-py-01.env")
	require.NoError(t, os.WriteFile(envFile, []byte("# node py-01\nKECE_POOL=python\n; old style comment\n\n"+
		"KECE_CONTROL_URL=\""+env.URL+"\"\nKECE_CREDENTIAL_FILE='"+cred+"'\nKECE_LOCAL_SLOTS=2\n"), 0o644))
	r = runCmd(nil, "join", "--env-file", envFile, "--join-code", n.JoinCode)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "credential stored in "+cred)
	st, err := os.Stat(filepath.Dir(cred))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "the credential's directory")
	st, err = os.Stat(filepath.Dir(filepath.Dir(cred)))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), st.Mode().Perm(), "parents as systemd makes them, so the node's user can reach its directory")

	// Under systemd-run -p StateDirectory=…: $STATE_DIRECTORY/credential.
	n2 := env.NewNode("python", 1, 4)
	state := filepath.Join(dir, "state")
	r = runCmd(map[string]string{"STATE_DIRECTORY": state}, "join", "--control-url", env.URL, "--pool", "python", "--join-code", n2.JoinCode)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.FileExists(t, filepath.Join(state, "credential"))

	r = runCmd(nil, "join", "--env-file", filepath.Join(dir, "missing.env"), "--join-code", "kjc_x")
	require.Equal(t, exitConfig, r.code)
	require.Contains(t, r.stderr, "--env-file")
}

// Run as root, join gives the credential's directory and file to the
// node's user (--owner); an unknown owner is refused before the code is
// spent.
func TestJoinAsRootGivesTheCredentialAway(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: chown to another user")
	}
	t.Parallel()
	env := controltest.Start(t, controltest.Options{})
	n := env.NewNode("cpp", 1, 4)
	cred := filepath.Join(t.TempDir(), "node-cpp-09", "credential")
	args := []string{"join", "--control-url", env.URL, "--pool", "cpp", "--join-code", n.JoinCode, "--credential-file", cred}

	r := runCmd(nil, append(args, "--owner", "no-such-kece-user")...)
	require.Equal(t, exitConfig, r.code, r.stderr)
	require.Contains(t, r.stderr, `--owner "no-such-kece-user": no such user`)
	require.Equal(t, 0, countRows(t, env, `SELECT COUNT(*) FROM judge_join_code WHERE consumed_at IS NOT NULL`))

	r = runCmd(nil, append(args, "--owner", "4242:4343")...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "owner 4242:4343")
	for path, mode := range map[string]os.FileMode{cred: 0o600, filepath.Dir(cred): 0o700} {
		st, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, mode, st.Mode().Perm(), path)
		sys := st.Sys().(*syscall.Stat_t)
		require.Equal(t, [2]uint32{4242, 4343}, [2]uint32{sys.Uid, sys.Gid}, path)
	}
}
