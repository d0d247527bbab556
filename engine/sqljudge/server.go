package sqljudge

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kece-oj/kece/engine"
)

// ControlMarkerTable is the table the control plane's migrations create in its
// schema. A judge server on which any schema holds it is the control plane's
// server, and the executor refuses it.
const ControlMarkerTable = "kece_control_marker"

// Flavour is the judge server's product.
type Flavour string

// Server flavours. They differ in how statement time is limited: MariaDB's
// max_statement_time (seconds, every statement) and MySQL's
// max_execution_time (milliseconds, read-only SELECT only).
const (
	FlavourMariaDB Flavour = "mariadb"
	FlavourMySQL   Flavour = "mysql"
)

// serverInfo is what the executor learned about the judge server at preflight.
type serverInfo struct {
	Flavour     Flavour
	Version     string
	Identities  []string // @@server_uuid (MySQL), "hostname:port"
	StudentHost string
}

// SelfCheckReport describes the judge server the executor will use.
type SelfCheckReport struct {
	Flavour Flavour
	Version string
	// Identity is what Config.ControlServerIdentity is compared with (the
	// first of @@server_uuid and "hostname:port" the server has).
	Identity string
}

// preflight learns the server once per Executor: reachable, flavour, not the
// control plane's server, registry present, student host. A failure is not
// cached; the next call tries again.
func (e *Executor) preflight(ctx context.Context) (*serverInfo, error) {
	e.preMu.Lock()
	defer e.preMu.Unlock()
	if e.server != nil {
		return e.server, nil
	}
	srv, err := e.inspect(ctx)
	if err != nil {
		return nil, err
	}
	if err := e.ensureRegistry(ctx); err != nil {
		return nil, err
	}
	e.server = srv
	e.log.Info("sql judge server ready", "node_id", e.cfg.NodeID, "flavour", srv.Flavour,
		"version", srv.Version, "identity", srv.Identities[0])
	return srv, nil
}

// inspect reads the server's flavour and identity and refuses the control
// plane's server.
func (e *Executor) inspect(ctx context.Context) (*serverInfo, error) {
	if err := e.db.PingContext(ctx); err != nil {
		return nil, classifyAdmin(ctx, err, "reach judge server")
	}
	var (
		srv      serverInfo
		hostname string
		port     int64
		user     string
	)
	err := e.db.QueryRowContext(ctx, "SELECT VERSION(), @@hostname, @@port, USER()").
		Scan(&srv.Version, &hostname, &port, &user)
	if err != nil {
		return nil, classifyAdmin(ctx, err, "read server identity")
	}
	srv.Flavour = FlavourMySQL
	if strings.Contains(strings.ToLower(srv.Version), "mariadb") {
		srv.Flavour = FlavourMariaDB
	}
	if srv.Flavour == FlavourMySQL {
		var uuid string
		if err := e.db.QueryRowContext(ctx, "SELECT @@server_uuid").Scan(&uuid); err != nil {
			return nil, classifyAdmin(ctx, err, "read server uuid")
		}
		srv.Identities = append(srv.Identities, uuid)
	}
	srv.Identities = append(srv.Identities, hostname+":"+strconv.FormatInt(port, 10))

	if want := strings.TrimSpace(e.cfg.ControlServerIdentity); want != "" {
		for _, id := range srv.Identities {
			if strings.EqualFold(id, want) {
				return nil, engine.Infra(engine.InfraConfig,
					fmt.Errorf("%w: server identity %q equals the configured control server identity", ErrControlDatabase, id))
			}
		}
	}
	var schema string
	err = e.db.QueryRowContext(ctx, "SELECT TABLE_SCHEMA FROM information_schema.TABLES WHERE TABLE_NAME = ? LIMIT 1",
		ControlMarkerTable).Scan(&schema)
	switch {
	case err == nil:
		return nil, engine.Infra(engine.InfraConfig,
			fmt.Errorf("%w: schema %q holds table %s", ErrControlDatabase, schema, ControlMarkerTable))
	case !errors.Is(err, sql.ErrNoRows):
		return nil, classifyAdmin(ctx, err, "look for the control plane marker")
	}

	srv.StudentHost = e.cfg.StudentHost
	if srv.StudentHost == "" {
		_, host, ok := strings.Cut(user, "@")
		if !ok || host == "" || len(host) > 255 || containsAny(host, "'\\`\x00\n") {
			return nil, engine.Infraf(engine.InfraConfig, "cannot derive the student host from the admin session; set StudentHost")
		}
		srv.StudentHost = host
	}
	return &srv, nil
}

// SelfCheck verifies that the judge server is reachable, is not the control
// plane's server, and that the admin account can do everything a job needs:
// create a database and an account, grant on that database only, see and kill
// the account's sessions, and drop both. It runs this as a real probe lease
// (job id "selfcheck", recorded in the registry like any other). Temporary
// accounts must not see any schema but their own; a server that grants every
// account access to e.g. `test` fails the check.
func (e *Executor) SelfCheck(ctx context.Context) (SelfCheckReport, error) {
	e.preMu.Lock()
	e.server = nil // always look again
	e.preMu.Unlock()
	srv, err := e.preflight(ctx)
	if err != nil {
		return SelfCheckReport{}, err
	}
	rep := SelfCheckReport{Flavour: srv.Flavour, Version: srv.Version, Identity: srv.Identities[0]}
	if err := e.probeRights(ctx, srv); err != nil {
		return rep, err
	}
	return rep, nil
}

// selfCheckJobID is the job id of the self-check's probe lease.
const selfCheckJobID = "selfcheck"

func (e *Executor) probeRights(ctx context.Context, srv *serverInfo) (err error) {
	epoch := int64(0)
	names := namesFor(e.cfg.NodeID, selfCheckJobID, epoch)
	if !e.claim(names.DB) {
		return engine.Infraf(engine.InfraInternal, "a self-check is already running")
	}
	defer e.release(names.DB)
	l := &lease{e: e, srv: srv, names: names, jobID: selfCheckJobID, epoch: epoch, kind: engine.SQLKindDML}
	defer func() {
		// A refused check still reports a failed cleanup: its probe database
		// or account is then left on the server, recorded for the janitor.
		if cerr := l.cleanup(ctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("self-check cleanup: %w", cerr))
		}
	}()
	if err := l.create(ctx); err != nil {
		return err
	}
	sess, err := l.openStudent(ctx, 0)
	if err != nil {
		return err
	}
	seen, err := e.sessionVisible(ctx, sess.threadID)
	if err != nil {
		return classifyAdmin(ctx, err, "self-check: list sessions")
	}
	if !seen {
		return engine.Infra(engine.InfraJudgeDBRights,
			fmt.Errorf("%w: cannot see other accounts' sessions (PROCESS)", ErrAdminRights))
	}
	rows, err := sess.conn.QueryContext(ctx, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME NOT IN ('information_schema', ?)", names.DB)
	if err != nil {
		return classifyAdmin(ctx, err, "self-check: list schemas as the temporary account")
	}
	var visible []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return classifyAdmin(ctx, err, "self-check: list schemas")
		}
		visible = append(visible, s)
	}
	if err := rows.Close(); err != nil {
		return classifyAdmin(ctx, err, "self-check: list schemas")
	}
	if len(visible) > 0 {
		return engine.Infraf(engine.InfraConfig, "temporary accounts can see other schemas %v; remove grants to anonymous or wildcard accounts", visible)
	}
	// KILL QUERY on the idle probe session checks the right to kill other
	// accounts' statements without waiting for one to run. It comes last: the
	// session is not used after it.
	return e.kill(ctx, "QUERY", sess.threadID)
}

// newPassword returns a random password for a temporary account.
func newPassword() (string, error) {
	var b [18]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random password: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
