package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// credentialFileMode: only the node's user may read the credential.
const credentialFileMode fs.FileMode = 0o600

// Credential is what the node keeps after joining. The secret is never logged.
type Credential struct {
	NodeID      string `json:"nodeId"`
	Pool        string `json:"pool"`
	HostGroupID string `json:"hostGroupId"`
	Secret      string `json:"credential"`
}

// String describes the credential without its secret, so logging one is safe.
func (c Credential) String() string {
	return fmt.Sprintf("node %s (pool %s, host group %s)", c.NodeID, c.Pool, c.HostGroupID)
}

// errNoCredential: the file does not exist (first start).
var errNoCredential = errors.New("no credential file")

// readCredential loads the credential file, refusing one that others can read.
func readCredential(path string) (Credential, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Credential{}, errNoCredential
	}
	if err != nil {
		return Credential{}, fmt.Errorf("KECE_CREDENTIAL_FILE %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Credential{}, fmt.Errorf("KECE_CREDENTIAL_FILE %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return Credential{}, fmt.Errorf("KECE_CREDENTIAL_FILE %s is not a regular file", path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return Credential{}, fmt.Errorf("KECE_CREDENTIAL_FILE %s has mode %04o; it holds a secret and must be 0600 (chmod 600 %s)",
			path, st.Mode().Perm(), path)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() && os.Geteuid() != 0 {
		return Credential{}, fmt.Errorf("KECE_CREDENTIAL_FILE %s belongs to uid %d, not to the node's user (uid %d): chown it to the node's user",
			path, sys.Uid, os.Geteuid())
	}
	var c Credential
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.Secret == "" || c.NodeID == "" || c.Pool == "" {
		return Credential{}, fmt.Errorf("KECE_CREDENTIAL_FILE %s is not a node credential written by kece-node", path)
	}
	return c, nil
}

// CheckCredentialFile is the start-up check of KECE_CREDENTIAL_FILE for a
// node of pool: no file is fine (the node joins with its code at first
// start); a file that is there must be a regular 0600 file of the node's
// user holding a credential of that pool. kece-node runs it with its other
// settings, so a bad file stops the process with exit 2 instead of failing
// inside Run (exit 1), which a supervisor would restart in a loop.
func CheckCredentialFile(path, pool string) error {
	c, err := readCredential(path)
	switch {
	case errors.Is(err, errNoCredential):
		return nil
	case err != nil:
		return err
	case c.Pool != pool:
		return fmt.Errorf("KECE_CREDENTIAL_FILE %s holds the credential of a %s node, but KECE_POOL is %s", path, c.Pool, pool)
	}
	return nil
}

// writeCredential stores the credential atomically: a 0600 temporary file in
// the same directory, fsynced, renamed over the final name, directory fsynced.
// An existing file is never overwritten (a second process that joined with a
// copied code must not replace the first one's credential).
func writeCredential(path string, c Credential) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("credential directory %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".kece-credential-*")
	if err != nil {
		return fmt.Errorf("credential: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(credentialFileMode); err != nil {
		return fmt.Errorf("credential: %w", err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("credential: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("credential: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("credential: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("credential: %w", err)
	}
	// link fails if path exists, unlike rename.
	if err := os.Link(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("credential: store %s: %w", path, err)
	}
	_ = os.Remove(tmp.Name())
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
