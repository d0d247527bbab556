package sqljudge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"
)

// All SQL of the resource registry lives in this file. The registry is a
// table on the judge server itself, so a crash between "recorded" and
// "created" leaves a row the janitor can act on, and a created resource
// always has a row.

// Resource kinds recorded in the registry.
const (
	kindDatabase = "DATABASE"
	kindUser     = "USER"
)

// resource is one registry row.
type resource struct {
	Kind       string
	Name       string
	Host       string // user accounts only
	NodeID     string
	JobID      string
	LeaseEpoch int64

	// Set by a lease for its own resources only (never by the janitor):
	// fresh means this lease inserted the registry row (none existed before),
	// made means the CREATE statement succeeded.
	fresh, made bool
}

// leaseNames are the temporary database and account of one lease. They are
// derived from (node, job, lease epoch) by hashing, so they fit MySQL's
// 32-character user names, need no quoting beyond backquotes, and contain no
// GRANT wildcards (_ or %). The registry keeps the readable mapping.
type leaseNames struct {
	DB   string
	User string
}

func namesFor(nodeID, jobID string, leaseEpoch int64) leaseNames {
	h := sha256.Sum256([]byte(nodeID + "\x00" + jobID + "\x00" + strconv.FormatInt(leaseEpoch, 10)))
	x := hex.EncodeToString(h[:12])
	return leaseNames{DB: "kjd" + x, User: "kju" + x}
}

func (e *Executor) registryTable() string {
	return "`" + e.cfg.RegistrySchema + "`.`resource`"
}

// ensureRegistry creates the registry schema and table when absent.
func (e *Executor) ensureRegistry(ctx context.Context) error {
	stmts := []string{
		"CREATE DATABASE IF NOT EXISTS `" + e.cfg.RegistrySchema + "`",
		"CREATE TABLE IF NOT EXISTS " + e.registryTable() + ` (
			kind        VARCHAR(16)  NOT NULL,
			name        VARCHAR(64)  NOT NULL,
			host        VARCHAR(255) NOT NULL DEFAULT '',
			node_id     VARCHAR(128) NOT NULL,
			job_id      VARCHAR(128) NOT NULL,
			lease_epoch BIGINT       NOT NULL,
			created_at  DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
			PRIMARY KEY (kind, name),
			KEY resource_node (node_id, job_id, lease_epoch)
		) ENGINE=InnoDB`,
	}
	for _, s := range stmts {
		if _, err := e.db.ExecContext(ctx, s); err != nil {
			return classifyAdmin(ctx, err, "create resource registry")
		}
	}
	return nil
}

// register records a resource before it is created and reports whether the
// row is new. Recording the same resource again (a rerun of the same lease) is
// not an error.
func (e *Executor) register(ctx context.Context, r resource) (fresh bool, err error) {
	res, err := e.db.ExecContext(ctx, "INSERT INTO "+e.registryTable()+
		" (kind, name, host, node_id, job_id, lease_epoch) VALUES (?, ?, ?, ?, ?, ?)"+
		" ON DUPLICATE KEY UPDATE host = VALUES(host)",
		r.Kind, r.Name, r.Host, r.NodeID, r.JobID, r.LeaseEpoch)
	if err != nil {
		return false, classifyAdmin(ctx, err, "record "+r.Kind+" in registry")
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, classifyAdmin(ctx, err, "record "+r.Kind+" in registry")
	}
	return n == 1, nil
}

// unregister deletes a resource's row after the resource is gone.
func (e *Executor) unregister(ctx context.Context, r resource) error {
	_, err := e.db.ExecContext(ctx, "DELETE FROM "+e.registryTable()+
		" WHERE kind = ? AND name = ? AND node_id = ?", r.Kind, r.Name, r.NodeID)
	return classifyAdmin(ctx, err, "delete "+r.Kind+" from registry")
}

// nodeResources lists the registry rows of one node.
func (e *Executor) nodeResources(ctx context.Context, nodeID string) ([]resource, error) {
	rows, err := e.db.QueryContext(ctx, "SELECT kind, name, host, node_id, job_id, lease_epoch FROM "+
		e.registryTable()+" WHERE node_id = ? ORDER BY job_id, lease_epoch, kind", nodeID)
	if err != nil {
		return nil, classifyAdmin(ctx, err, "list registry")
	}
	defer rows.Close()
	var out []resource
	for rows.Next() {
		var r resource
		if err := rows.Scan(&r.Kind, &r.Name, &r.Host, &r.NodeID, &r.JobID, &r.LeaseEpoch); err != nil {
			return nil, classifyAdmin(ctx, err, "read registry")
		}
		out = append(out, r)
	}
	return out, classifyAdmin(ctx, rows.Err(), "read registry")
}

// dropResource removes one resource if it exists: a user after its sessions
// are killed (so no statement holds locks on its database), a database after.
func (e *Executor) dropResource(ctx context.Context, r resource) error {
	switch r.Kind {
	case kindUser:
		if _, err := e.db.ExecContext(ctx, fmt.Sprintf("DROP USER IF EXISTS %s", account(r.Name, r.Host))); err != nil {
			return classifyAdmin(ctx, err, "drop user")
		}
		if err := e.killSessionsOf(ctx, r.Name); err != nil {
			return err
		}
	case kindDatabase:
		if _, err := e.db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+r.Name+"`"); err != nil {
			return classifyAdmin(ctx, err, "drop database")
		}
	default:
		return fmt.Errorf("registry: unknown resource kind %q", r.Kind)
	}
	return nil
}

// killSessionsOf kills every connection of a (temporary) user. A crashed
// node's statement may still run on the server after its client died.
func (e *Executor) killSessionsOf(ctx context.Context, user string) error {
	rows, err := e.db.QueryContext(ctx, "SELECT id FROM information_schema.PROCESSLIST WHERE user = ?", user)
	if err != nil {
		return classifyAdmin(ctx, err, "list sessions")
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return classifyAdmin(ctx, err, "list sessions")
		}
		ids = append(ids, id)
	}
	if err := rows.Close(); err != nil {
		return classifyAdmin(ctx, err, "list sessions")
	}
	for _, id := range ids {
		err := e.kill(ctx, "CONNECTION", id)
		if no, ok := mysqlErrNo(err); ok && no == erKillDenied && e.sessionEnds(ctx, id) {
			// An admin without the right to kill (a refused self-check)
			// still sees the lease's own session, closed by the client a
			// moment ago, until the server has torn it down.
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// sessionEndWait bounds how long sessionEnds waits for a closed client's
// session to leave the process list.
const sessionEndWait = 2 * time.Second

// sessionVisible reports whether the session with the thread id is in the
// process list (for another account's session, that needs PROCESS).
func (e *Executor) sessionVisible(ctx context.Context, threadID int64) (bool, error) {
	var n int
	err := e.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE id = ?", threadID).Scan(&n)
	return n > 0, err
}

// sessionEnds reports whether the session with the thread id leaves the
// process list within sessionEndWait (or ctx).
func (e *Executor) sessionEnds(ctx context.Context, threadID int64) bool {
	ctx, cancel := context.WithTimeout(ctx, sessionEndWait)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		seen, err := e.sessionVisible(ctx, threadID)
		if err != nil {
			return false
		}
		if !seen {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// kill sends KILL QUERY or KILL CONNECTION; a thread already gone is fine.
func (e *Executor) kill(ctx context.Context, what string, threadID int64) error {
	_, err := e.killDB.ExecContext(ctx, "KILL "+what+" "+strconv.FormatInt(threadID, 10))
	if no, ok := mysqlErrNo(err); ok && no == erNoSuchThread {
		return nil
	}
	return classifyAdmin(ctx, err, "kill "+what)
}

// account quotes user@host. Names are generated ([a-z0-9]) and the host is
// validated by Config.Validate, so quoting cannot be escaped.
func account(user, host string) string {
	return "'" + user + "'@'" + host + "'"
}
