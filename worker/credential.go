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

// readCredential loads the credential file, refusing one that others can
// read. Its type is checked before it is opened (a FIFO would block the
// open until a writer came), and again on what was opened.
func readCredential(path string) (Credential, error) {
	f, st, err := OpenSettingFile("KECE_CREDENTIAL_FILE", path)
	if errors.Is(err, fs.ErrNotExist) {
		return Credential{}, errNoCredential
	}
	if err != nil {
		return Credential{}, err
	}
	defer f.Close()
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

// CheckPathType checks, without opening it, that the path a setting names
// is of the type the setting needs: a regular file, or with dir a
// directory. A named pipe, a device, a socket or the other type is refused
// naming the setting and the type: opening a FIFO blocks until a writer
// comes, and reading a device never ends. A path that does not exist
// passes (whether it must exist is the setting's own check); a symbolic
// link is judged by what it points to.
func CheckPathType(setting, path string, dir bool) error {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", setting, path, err)
	}
	return wantType(setting, path, st.Mode(), dir)
}

// wantType refuses mode unless it is a regular file (or with dir a
// directory), naming what it is.
func wantType(setting, path string, mode fs.FileMode, dir bool) error {
	switch {
	case dir && mode.IsDir(), !dir && mode.IsRegular():
		return nil
	case dir:
		return fmt.Errorf("%s %s is not a directory: it is %s", setting, path, typeName(mode))
	}
	return fmt.Errorf("%s %s is not a regular file: it is %s", setting, path, typeName(mode))
}

// typeName says what kind of file mode describes, for an operator.
func typeName(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a block device"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode.IsDir():
		return "a directory"
	case mode.IsRegular():
		return "a regular file"
	}
	return "a special file"
}

// OpenSettingFile opens for reading the regular file a setting names,
// checking its type first (CheckPathType) so that a FIFO or a device is
// refused rather than opened, and opening it non-blocking all the same, so
// that one swapped in meanwhile cannot block the open either; what was
// opened must then be that same regular file. An error names the setting;
// a missing file's wraps fs.ErrNotExist. The FileInfo is the opened
// file's.
func OpenSettingFile(setting, path string) (*os.File, fs.FileInfo, error) {
	before, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", setting, path, err)
	}
	if err := wantType(setting, path, before.Mode(), false); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", setting, path, err)
	}
	st, err := f.Stat()
	if err == nil {
		err = wantType(setting, path, st.Mode(), false)
	}
	if err == nil && !os.SameFile(before, st) {
		err = fmt.Errorf("%s %s was replaced while it was opened", setting, path)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
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
