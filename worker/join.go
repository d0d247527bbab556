package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kece-oj/kece/contracts"
)

// ErrPoolMismatch: the join code belongs to a node of another pool. The
// control plane did not spend it; run the join of the right pool.
var ErrPoolMismatch = errors.New("the join code belongs to a node of another pool (the code was not used)")

// ErrAlreadyJoined: the credential file exists; joining again would spend a
// code for nothing (use `kecectl node rotate` to replace a credential).
var ErrAlreadyJoined = errors.New("credential file already exists")

// JoinConfig configures Join: the one-time exchange of a join code for the
// node credential, done by `kece-node join` before the node first runs, so
// the code never has to sit in the node's configuration.
type JoinConfig struct {
	// ControlURL is the control plane's base URL, or several replicas'
	// separated by commas (ControlURLs).
	ControlURL string
	// Pool is the pool the node process will serve; a code of another
	// pool's node is refused without being spent.
	Pool string
	// Code is the one-time join code from `kecectl node create`.
	Code string
	// CredentialFile is where the credential is stored (0600, atomically);
	// it must not exist yet.
	CredentialFile string
	// RequestTimeout bounds the join call; 0 takes RequestTimeoutDefault.
	RequestTimeout time.Duration
	// Owner, when set, receives the credential's directory (0700) and file
	// (0600): a join run as root hands them to the account the node runs
	// as. Nil leaves them owned by whoever runs the join.
	Owner *FileOwner
}

// FileOwner is a numeric owner for chown.
type FileOwner struct{ UID, GID int }

// Validate refuses a join that cannot work, naming the flag to fix.
func (c JoinConfig) Validate() error {
	var errs []error
	if !contracts.ValidPool(c.Pool) {
		errs = append(errs, fmt.Errorf("--pool %q is not a pool: want one of %s", c.Pool, strings.Join(contracts.Pools(), ", ")))
	}
	if err := validControlURLs("--control-url", c.ControlURL); err != nil {
		errs = append(errs, err)
	}
	if strings.TrimSpace(c.Code) == "" {
		errs = append(errs, errors.New("--join-code-file (or --join-code) is required: the one-time join code from 'kecectl node create'"))
	}
	if c.CredentialFile == "" || !filepath.IsAbs(c.CredentialFile) {
		errs = append(errs, fmt.Errorf("--credential-file %q must be an absolute file path", c.CredentialFile))
	}
	if c.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("request timeout %s must not be negative", c.RequestTimeout))
	}
	return errors.Join(errs...)
}

// Join exchanges the code for the node credential and stores it. Everything
// that can be checked locally is checked before the code is sent, because a
// spent code cannot be used again: the pool, that no credential exists yet,
// and that the credential's directory is writable.
func Join(ctx context.Context, cfg JoinConfig) (Credential, error) {
	if err := cfg.Validate(); err != nil {
		return Credential{}, err
	}
	if st, err := os.Lstat(cfg.CredentialFile); err == nil && !st.Mode().IsRegular() && st.Mode()&fs.ModeSymlink == 0 {
		return Credential{}, fmt.Errorf("%w: %s is %s, not a credential: give --credential-file a path where one can be stored",
			ErrAlreadyJoined, cfg.CredentialFile, typeName(st.Mode()))
	} else if err == nil {
		return Credential{}, fmt.Errorf("%w: %s (the node has joined; to join again, remove it after 'kecectl node rotate')",
			ErrAlreadyJoined, cfg.CredentialFile)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Credential{}, fmt.Errorf("credential file %s: %w", cfg.CredentialFile, err)
	}
	dir := filepath.Dir(cfg.CredentialFile)
	if err := probeWritable(dir); err != nil {
		return Credential{}, err
	}
	// Before the code is spent: a chown that cannot work fails here.
	if o := cfg.Owner; o != nil {
		if err := os.Chown(dir, o.UID, o.GID); err != nil {
			return Credential{}, fmt.Errorf("credential directory %s: give it to %d:%d: %w", dir, o.UID, o.GID, err)
		}
	}
	cl, err := newClient(ControlURLs(cfg.ControlURL), cmp.Or(cfg.RequestTimeout, RequestTimeoutDefault))
	if err != nil {
		return Credential{}, err
	}
	defer cl.close()
	j, err := cl.join(ctx, strings.TrimSpace(cfg.Code), cfg.Pool)
	if err != nil {
		return Credential{}, err
	}
	cred := Credential{NodeID: j.NodeId, Pool: string(j.Pool), HostGroupID: j.HostGroupId, Secret: j.Credential}
	if err := writeCredential(cfg.CredentialFile, cred); err != nil {
		// The code is spent and the credential is lost: say what to do.
		return Credential{}, fmt.Errorf("%w (the join code is spent; ask an admin for 'kecectl node rotate %s')", err, cred.NodeID)
	}
	if o := cfg.Owner; o != nil {
		if err := os.Chown(cfg.CredentialFile, o.UID, o.GID); err != nil {
			return Credential{}, fmt.Errorf("credential stored in %s but not given to %d:%d (chown it by hand): %w",
				cfg.CredentialFile, o.UID, o.GID, err)
		}
	}
	return cred, nil
}

// probeWritable creates and removes a file in dir. A missing dir is
// created 0700, and missing parents 0755 as systemd's StateDirectory=
// makes them: a 0700 /var/lib/kece made by a root join would lock the
// node's own user out of its state directory.
func probeWritable(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("credential directory %s: %w%s", dir, err, asRootHint(err))
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("credential directory %s: %w%s", dir, err, asRootHint(err))
	}
	f, err := os.CreateTemp(dir, ".kece-credential-probe-*")
	if err != nil {
		return fmt.Errorf("credential directory %s is not writable: %w%s", dir, err, asRootHint(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// asRootHint says how to get past a permission error on a fresh host.
func asRootHint(err error) string {
	if errors.Is(err, fs.ErrPermission) {
		return " (run 'kece-node join' as root: it gives the credential to the node's user, --owner, default kece-node)"
	}
	return ""
}
