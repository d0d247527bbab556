package main

import (
	"bufio"
	"errors"
	"fmt"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kece-oj/kece/worker"
)

// JoinOwnerDefault is the account the systemd units run nodes as
// (User=kece-node in kece-node@.service and kece-node-sql@.service).
const JoinOwnerDefault = "kece-node"

// JoinOptions is what `kece-node join` is given, before the defaults that
// depend on the host (the env file, $STATE_DIRECTORY, the owner account)
// are resolved. The command line binds to it, whatever parses the flags.
type JoinOptions struct {
	ControlURL, Pool string
	// Code is the one-time join code (--join-code-file / --join-code).
	Code string
	// CredentialFile is --credential-file or KECE_CREDENTIAL_FILE.
	CredentialFile string
	// EnvFile is the node's env file (systemd EnvironmentFile format):
	// KECE_CREDENTIAL_FILE, KECE_CONTROL_URL and KECE_POOL are read from
	// it when not given otherwise.
	EnvFile string
	// Owner (root only) is USER, USER:GROUP or UID:GID; empty means
	// JoinOwnerDefault when that account exists.
	Owner   string
	Timeout time.Duration
	// Getenv reads the process environment ($STATE_DIRECTORY).
	Getenv func(string) string
}

// resolve fills the defaults: values from the env file, the credential in
// $STATE_DIRECTORY, and (when euid is 0) the owner. notes are said to the
// operator; an error is a configuration mistake (exit 2) found before any
// code is spent.
func (o JoinOptions) resolve(euid int) (cfg worker.JoinConfig, notes []string, err error) {
	cfg = worker.JoinConfig{ControlURL: o.ControlURL, Pool: o.Pool, Code: o.Code, CredentialFile: o.CredentialFile,
		RequestTimeout: o.Timeout}
	if o.EnvFile != "" {
		vars, err := readEnvFile(o.EnvFile)
		if err != nil {
			return cfg, nil, err
		}
		for _, v := range []struct {
			dst *string
			key string
		}{{&cfg.CredentialFile, "KECE_CREDENTIAL_FILE"}, {&cfg.ControlURL, "KECE_CONTROL_URL"}, {&cfg.Pool, "KECE_POOL"}} {
			if *v.dst == "" {
				*v.dst = vars[v.key]
			}
		}
	}
	if cfg.CredentialFile == "" && o.Getenv != nil {
		if dirs := o.Getenv("STATE_DIRECTORY"); dirs != "" {
			cfg.CredentialFile = filepath.Join(strings.Split(dirs, ":")[0], "credential")
		}
	}
	if cfg.CredentialFile == "" {
		return cfg, nil, errors.New("where should the credential go? Give --credential-file PATH (the path 'kecectl node create' printed), " +
			"or --env-file /etc/kece/node-NAME.env holding KECE_CREDENTIAL_FILE")
	}
	if euid != 0 {
		if o.Owner != "" {
			notes = append(notes, "--owner is ignored: only root can give files away; the credential is yours")
		}
		return cfg, notes, nil
	}
	name := o.Owner
	if name == "" {
		if _, err := user.Lookup(JoinOwnerDefault); err != nil {
			return cfg, append(notes, fmt.Sprintf("no %s account here: the credential stays root's (give --owner USER for the account the node runs as)",
				JoinOwnerDefault)), nil
		}
		name = JoinOwnerDefault
	}
	owner, err := lookupOwner(name)
	if err != nil {
		return cfg, nil, fmt.Errorf("--owner %q: %w", name, err)
	}
	cfg.Owner = owner
	return cfg, notes, nil
}

// lookupOwner parses USER, USER:GROUP or UID:GID (a user alone brings its
// primary group).
func lookupOwner(s string) (*worker.FileOwner, error) {
	u, g, hasGroup := strings.Cut(s, ":")
	var o worker.FileOwner
	if id, err := strconv.Atoi(u); err == nil {
		o.UID, o.GID = id, id
	} else {
		acct, err := user.Lookup(u)
		if err != nil {
			return nil, fmt.Errorf("no such user (create it first: useradd --system %s)", u)
		}
		o.UID, _ = strconv.Atoi(acct.Uid)
		o.GID, _ = strconv.Atoi(acct.Gid)
	}
	if hasGroup {
		if id, err := strconv.Atoi(g); err == nil {
			o.GID = id
		} else {
			grp, err := user.LookupGroup(g)
			if err != nil {
				return nil, fmt.Errorf("no such group %q", g)
			}
			o.GID, _ = strconv.Atoi(grp.Gid)
		}
	}
	if o.UID < 0 || o.GID < 0 {
		return nil, errors.New("ids must not be negative")
	}
	return &o, nil
}

// readEnvFile reads KEY=VALUE lines as systemd's EnvironmentFile= does for
// the files KECE ships: blank lines and lines starting with # or ; are
// skipped, a value may be in single or double quotes. Anything but a
// regular file is refused before it is opened.
func readEnvFile(path string) (map[string]string, error) {
	f, _, err := worker.OpenSettingFile("--env-file", path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("--env-file %s:%d: want KEY=VALUE, got %q", path, n, line)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		vars[strings.TrimSpace(k)] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--env-file %s: %w", path, err)
	}
	return vars, nil
}
