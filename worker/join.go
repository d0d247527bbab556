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
}

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
		errs = append(errs, errors.New("--code (or --code-file) is required: the one-time join code from 'kecectl node create'"))
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
	if _, err := os.Lstat(cfg.CredentialFile); err == nil {
		return Credential{}, fmt.Errorf("%w: %s (the node has joined; to join again, remove it after 'kecectl node rotate')",
			ErrAlreadyJoined, cfg.CredentialFile)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Credential{}, fmt.Errorf("credential file %s: %w", cfg.CredentialFile, err)
	}
	if err := probeWritable(filepath.Dir(cfg.CredentialFile)); err != nil {
		return Credential{}, err
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
	return cred, nil
}

// probeWritable creates and removes a file in dir (creating dir 0700 if it
// is missing).
func probeWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("credential directory %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".kece-credential-probe-*")
	if err != nil {
		return fmt.Errorf("credential directory %s is not writable: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}
