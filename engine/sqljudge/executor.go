package sqljudge

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/kece-oj/kece/engine"
)

// lockWaitTimeoutSeconds bounds how long an admin statement (DROP DATABASE
// above all) waits for a metadata lock; MySQL's default is a year.
const lockWaitTimeoutSeconds = "30"

// killConns is the size of the pool reserved for KILL QUERY/CONNECTION.
const killConns = 2

// Executor judges SQL tasks against a dedicated judge server. It is safe for
// concurrent use by several jobs.
type Executor struct {
	cfg      Config
	log      *slog.Logger
	db       *sql.DB
	killDB   *sql.DB       // KILL statements only: never waits behind job work in db
	adminCfg *mysql.Config // holds the admin password: never log or format it

	preMu  sync.Mutex  // serialises preflights; held across network calls
	server *serverInfo // nil until a preflight succeeds; guarded by preMu

	mu     sync.Mutex
	active map[string]struct{} // databases of leases running in this process

	hooks testHooks
}

// testHooks let tests of this package simulate a crash; zero in production.
type testHooks struct {
	// skipCleanup leaves a lease's database and account behind, as a node
	// killed mid-job would.
	skipCleanup bool
	// studentStarted runs just before the first student statement is sent.
	studentStarted func()
}

var _ engine.Executor = (*Executor)(nil)

// New validates cfg and opens the admin pool. It does not contact the server;
// call SelfCheck at node start.
func New(cfg Config) (*Executor, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, engine.Infra(engine.InfraConfig, err)
	}
	mc, err := parseAdminDSN(cfg.AdminDSN)
	if err != nil {
		return nil, engine.Infra(engine.InfraConfig, err)
	}
	// The admin connection runs the manifest's DDL and seed, which may hold
	// several statements (and compound ones, which only the server can split).
	mc.MultiStatements = true
	mc.AllowAllFiles = false
	mc.InterpolateParams = false
	mc.ParseTime = false
	mc.Timeout = cmp.Or(mc.Timeout, DialTimeoutDefault)
	if mc.Params == nil {
		mc.Params = map[string]string{}
	}
	if _, ok := mc.Params["lock_wait_timeout"]; !ok {
		mc.Params["lock_wait_timeout"] = lockWaitTimeoutSeconds
	}
	connector, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, engine.Infra(engine.InfraConfig, errors.New("sqljudge: admin DSN refused by the driver"))
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(cfg.AdminMaxOpenConns)
	db.SetMaxIdleConns(cfg.AdminMaxOpenConns)
	db.SetConnMaxIdleTime(time.Minute)
	killDB := sql.OpenDB(connector)
	killDB.SetMaxOpenConns(killConns)
	killDB.SetConnMaxIdleTime(time.Minute)
	return &Executor{
		cfg:      cfg,
		log:      cfg.Logger,
		db:       db,
		killDB:   killDB,
		adminCfg: mc,
		active:   map[string]struct{}{},
	}, nil
}

// Close closes the admin pools. Running Execute calls fail afterwards.
func (e *Executor) Close() error {
	return errors.Join(e.db.Close(), e.killDB.Close())
}

// claim marks a lease's database as in use by this process; false if it is.
func (e *Executor) claim(db string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.active[db]; ok {
		return false
	}
	e.active[db] = struct{}{}
	return true
}

func (e *Executor) release(db string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.active, db)
}

func (e *Executor) isActive(db string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.active[db]
	return ok
}

// Execute judges task.Source against task.SQL. A SQL error of the student's
// statement is RE, the statement limit TLE, a result over the row or byte cap
// OLE, a differing result WA. A broken manifest, an unreachable server,
// missing admin rights, registry failures and cancellation are infrastructure
// errors. The lease's database and account are dropped on every path, on a
// context detached from ctx and bounded by CleanupTimeout.
func (e *Executor) Execute(ctx context.Context, task engine.Task, progress engine.ProgressSink) (engine.Verdict, error) {
	if progress == nil {
		progress = engine.NoProgress
	}
	p := task.SQL
	if err := ValidateProblem(p); err != nil {
		return engine.Verdict{}, engine.Infra(engine.InfraCorruptInput, err)
	}
	if p.StatementTimeout > e.cfg.MaxStatementTimeout {
		return engine.Verdict{}, engine.Infraf(engine.InfraCorruptInput,
			"statement time limit %s exceeds this node's ceiling %s", p.StatementTimeout, e.cfg.MaxStatementTimeout)
	}
	if task.NodeID != "" && task.NodeID != e.cfg.NodeID {
		return engine.Verdict{}, engine.Infraf(engine.InfraConfig, "task for node %q reached node %q", task.NodeID, e.cfg.NodeID)
	}
	if task.JobID == "" || len(task.JobID) > 128 {
		return engine.Verdict{}, engine.Infraf(engine.InfraCorruptInput, "job id must be 1-128 bytes")
	}
	if err := ctx.Err(); err != nil {
		return engine.Verdict{}, engine.Infra(engine.InfraCancelled, err)
	}
	srv, err := e.preflight(ctx)
	if err != nil {
		return engine.Verdict{}, err
	}
	names := namesFor(e.cfg.NodeID, task.JobID, task.LeaseEpoch)
	if !e.claim(names.DB) {
		return engine.Verdict{}, engine.Infraf(engine.InfraInternal, "job %s lease %d is already running on this node", task.JobID, task.LeaseEpoch)
	}
	defer e.release(names.DB)

	log := e.log.With("node_id", e.cfg.NodeID, "job_id", task.JobID, "lease_epoch", task.LeaseEpoch)
	l := &lease{e: e, srv: srv, names: names, jobID: task.JobID, epoch: task.LeaseEpoch, kind: p.Kind, began: time.Now()}
	defer func() {
		if e.hooks.skipCleanup {
			l.closeStudent()
			return
		}
		if cerr := l.cleanup(ctx); cerr != nil {
			// The verdict stands; the registry rows stay for the janitor.
			log.Warn("sql judge cleanup failed; janitor will retry", "database", names.DB, "err", cerr)
		}
	}()

	progress.Report(engine.Progress{Phase: engine.PhaseJudging, CasesTotal: 1})
	err = l.create(ctx)
	var v engine.Verdict
	if err == nil {
		v, err = l.judge(ctx, task)
	}
	if err != nil {
		if ctx.Err() != nil {
			// Lease lost or past its local deadline: whatever failed, the
			// cause is the cancellation.
			return engine.Verdict{}, engine.Infra(engine.InfraCancelled, fmt.Errorf("sql judge: %w", ctx.Err()))
		}
		return engine.Verdict{}, err
	}
	progress.Report(engine.Progress{Phase: engine.PhaseJudging, CasesDone: 1, CasesTotal: 1})
	return v, nil
}

// lease is the temporary database and account of one (job, lease epoch).
type lease struct {
	e        *Executor
	srv      *serverInfo
	names    leaseNames
	jobID    string
	epoch    int64
	kind     engine.SQLKind
	password string
	created  []resource // recorded in the registry, in creation order
	student  *studentSession
	// began is when the lease's database work began; sandbox is how long
	// its database, account, setup and the student's session took to be
	// ready (Phases.Sandbox); checkFrom is when checking the outcome began.
	began, checkFrom time.Time
	sandbox          time.Duration
}

// privileges granted to the temporary account on its database, by problem kind.
func privileges(kind engine.SQLKind) string {
	if kind == engine.SQLKindDML {
		return "SELECT, INSERT, UPDATE, DELETE, SHOW VIEW"
	}
	return "SELECT, SHOW VIEW"
}

// create records and creates the database and the account. Each resource is
// recorded before it is created, so a crash leaves nothing unrecorded. A
// leftover of the same lease (same names) is dropped first.
func (l *lease) create(ctx context.Context) error {
	e := l.e
	pw, err := newPassword()
	if err != nil {
		return engine.Infra(engine.InfraInternal, err)
	}
	l.password = pw
	dbr := resource{Kind: kindDatabase, Name: l.names.DB, NodeID: e.cfg.NodeID, JobID: l.jobID, LeaseEpoch: l.epoch}
	if dbr.fresh, err = e.register(ctx, dbr); err != nil {
		return err
	}
	l.created = append(l.created, dbr)
	for _, s := range []string{
		"DROP DATABASE IF EXISTS `" + l.names.DB + "`",
		"CREATE DATABASE `" + l.names.DB + "`",
	} {
		if _, err := e.db.ExecContext(ctx, s); err != nil {
			return classifyAdmin(ctx, err, "create temporary database")
		}
	}
	l.created[len(l.created)-1].made = true
	ur := resource{Kind: kindUser, Name: l.names.User, Host: l.srv.StudentHost, NodeID: e.cfg.NodeID, JobID: l.jobID, LeaseEpoch: l.epoch}
	if ur.fresh, err = e.register(ctx, ur); err != nil {
		return err
	}
	l.created = append(l.created, ur)
	acct := account(l.names.User, l.srv.StudentHost)
	for _, s := range []string{
		"DROP USER IF EXISTS " + acct,
		"CREATE USER " + acct + " IDENTIFIED BY '" + pw + "' WITH MAX_USER_CONNECTIONS " + strconv.Itoa(e.cfg.StudentConnections),
		"GRANT " + privileges(l.kind) + " ON `" + l.names.DB + "`.* TO " + acct,
	} {
		if _, err := e.db.ExecContext(ctx, s); err != nil {
			// The statement text holds the password; the error does not.
			return classifyAdmin(ctx, err, "create temporary account")
		}
	}
	l.created[len(l.created)-1].made = true
	return nil
}

func (l *lease) closeStudent() {
	if l.student != nil {
		l.student.close()
		l.student = nil
	}
}

// cleanup drops the account (killing its sessions) and then the database, and
// deletes their registry rows. It runs detached from ctx's cancellation.
func (l *lease) cleanup(ctx context.Context) error {
	l.closeStudent()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.e.cfg.CleanupTimeout)
	defer cancel()
	return l.e.dropAll(cctx, l.created)
}

// dropAll drops resources, accounts before databases, and unregisters each
// one that is gone. It keeps going after a failure and joins the errors.
func (e *Executor) dropAll(ctx context.Context, rs []resource) error {
	var errs []error
	for _, kind := range []string{kindUser, kindDatabase} {
		for _, r := range rs {
			if r.Kind != kind {
				continue
			}
			if err := e.dropResource(ctx, r); err != nil {
				// Without the right to drop it, a resource whose row this
				// lease inserted and whose CREATE failed cannot exist (rows
				// precede resources), so its row goes; anything else stays
				// recorded for the janitor.
				if !(r.fresh && !r.made && engine.ClassOf(err) == engine.InfraJudgeDBRights) {
					errs = append(errs, err)
					continue
				}
			}
			if err := e.unregister(ctx, r); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// judge applies the problem, runs the student's SQL and compares. Admin
// connections are held only for the setup and verification phases, never
// while the student's statements run, so a node with many slots cannot
// starve the admin pool.
func (l *lease) judge(ctx context.Context, task engine.Task) (engine.Verdict, error) {
	e, p := l.e, task.SQL
	expected, err := l.setup(ctx, p)
	if err != nil {
		return engine.Verdict{}, err
	}
	l.sandbox = time.Since(l.began)

	sc := newScrubber(l.names.User, l.names.DB, l.srv.StudentHost, e.cfg.MaxMessageBytes)
	if len(task.Source) > e.cfg.MaxSourceBytes {
		return l.verdict(task, engine.StatusRuntimeError, fmt.Sprintf("submission is larger than %d bytes", e.cfg.MaxSourceBytes), 0), nil
	}
	stmts := splitStatements(string(task.Source))
	switch {
	case len(stmts) == 0:
		return l.verdict(task, engine.StatusRuntimeError, "the submission contains no SQL statement", 0), nil
	case len(stmts) > 1 && !p.AllowMultiStatements:
		return l.verdict(task, engine.StatusRuntimeError, fmt.Sprintf("this problem accepts a single statement; the submission has %d", len(stmts)), 0), nil
	case len(stmts) > e.cfg.MaxStatements:
		return l.verdict(task, engine.StatusRuntimeError, fmt.Sprintf("the submission has %d statements; at most %d are allowed", len(stmts), e.cfg.MaxStatements), 0), nil
	}
	sess, err := l.openStudent(ctx, p.StatementTimeout)
	if err != nil {
		return engine.Verdict{}, err
	}
	l.sandbox = time.Since(l.began)
	if e.hooks.studentStarted != nil {
		e.hooks.studentStarted()
	}
	var (
		last    *engine.ResultSet
		elapsed time.Duration
	)
	for _, s := range stmts {
		out := sess.run(ctx, s, p.MaxRows, p.MaxBytes, sc)
		elapsed += out.elapsed
		if out.err != nil {
			return engine.Verdict{}, out.err
		}
		if out.status != "" {
			return l.verdict(task, out.status, out.message, elapsed), nil
		}
		if out.result != nil {
			last = out.result
		}
	}
	// Closing the session ends any transaction the student left open (rolled
	// back, as with any client that disconnects) before verification.
	l.closeStudent()
	l.checkFrom = time.Now()

	if p.Kind == engine.SQLKindSelect {
		if last == nil {
			return l.verdict(task, engine.StatusWrongAnswer, "the submission returned no result set", elapsed), nil
		}
		if diff := compareResults(*expected, *last, p.Ordered, p.CompareColumnNames, e.cfg.MaxMessageBytes); diff != "" {
			return l.verdict(task, engine.StatusWrongAnswer, diff, elapsed), nil
		}
		return l.verdict(task, engine.StatusAccepted, "", elapsed), nil
	}
	status, msg, err := l.verify(ctx, p)
	if err != nil {
		return engine.Verdict{}, err
	}
	return l.verdict(task, status, msg, elapsed), nil
}

// adminConn returns an admin connection whose default database is the
// lease's, and a release func that discards it: the manifest's SQL may have
// changed session state (USE, sql_mode, foreign_key_checks…), so it never
// goes back to the pool.
func (l *lease) adminConn(ctx context.Context) (*sql.Conn, func(), error) {
	c, err := l.e.db.Conn(ctx)
	if err != nil {
		return nil, nil, classifyAdmin(ctx, err, "admin connection")
	}
	release := func() {
		_ = c.Raw(func(any) error { return driver.ErrBadConn })
		c.Close()
	}
	if _, err := c.ExecContext(ctx, "USE `"+l.names.DB+"`"); err != nil {
		release()
		return nil, nil, classifyAdmin(ctx, err, "use temporary database")
	}
	return c, release, nil
}

// setup applies DDL and seed as admin and, for SELECT problems, returns the
// expected result (frozen, or the reference query's on the fresh data).
func (l *lease) setup(ctx context.Context, p *engine.SQLProblem) (*engine.ResultSet, error) {
	actx, cancel := context.WithTimeout(ctx, l.e.cfg.AdminStatementTimeout)
	defer cancel()
	admin, release, err := l.adminConn(actx)
	if err != nil {
		return nil, err
	}
	defer release()
	if _, err := admin.ExecContext(actx, p.Schema); err != nil {
		return nil, classifyManifest(actx, err, "apply schema DDL")
	}
	if strings.TrimSpace(p.Seed) != "" {
		if _, err := admin.ExecContext(actx, p.Seed); err != nil {
			return nil, classifyManifest(actx, err, "apply seed data")
		}
	}
	if p.Kind != engine.SQLKindSelect {
		return nil, nil
	}
	if p.Expected != nil {
		return p.Expected, nil
	}
	rs, capped, err := readResults(actx, admin, p.Reference, p.MaxRows, p.MaxBytes, nil)
	switch {
	case err != nil:
		return nil, classifyManifest(actx, err, "run reference query")
	case capped:
		return nil, engine.Infraf(engine.InfraCorruptInput, "reference result exceeds the problem's row or byte cap")
	case rs == nil:
		return nil, engine.Infraf(engine.InfraCorruptInput, "reference query returned no result set")
	}
	return rs, nil
}

// verify runs a DML problem's verification queries as admin and compares
// each with its expected result. The first difference is the WA message.
func (l *lease) verify(ctx context.Context, p *engine.SQLProblem) (engine.Status, string, error) {
	actx, cancel := context.WithTimeout(ctx, l.e.cfg.AdminStatementTimeout)
	defer cancel()
	admin, release, err := l.adminConn(actx)
	if err != nil {
		return "", "", err
	}
	defer release()
	for i, v := range p.Verification {
		rs, capped, err := readResults(actx, admin, v.Query, p.MaxRows, p.MaxBytes, nil)
		switch {
		case err != nil:
			return "", "", classifyManifest(actx, err, fmt.Sprintf("run verification query %d", i+1))
		case capped:
			return engine.StatusWrongAnswer, fmt.Sprintf("verification %d: the table holds more than the problem's row or byte cap", i+1), nil
		case rs == nil:
			return "", "", engine.Infraf(engine.InfraCorruptInput, "verification query %d returned no result set", i+1)
		}
		if diff := compareResults(v.Expected, *rs, v.Ordered, p.CompareColumnNames, l.e.cfg.MaxMessageBytes-32); diff != "" {
			return engine.StatusWrongAnswer, fmt.Sprintf("verification %d: %s", i+1, diff), nil
		}
	}
	return engine.StatusAccepted, "", nil
}

// verdict builds the task's verdict. A SQL task is one unit of score: the
// weight of its single case when the task lists exactly one (which then
// carries the outcome), else 1.
func (l *lease) verdict(task engine.Task, status engine.Status, msg string, elapsed time.Duration) engine.Verdict {
	weight, id := int64(1), ""
	if len(task.Cases) == 1 {
		id = task.Cases[0].ID
		if task.Cases[0].Weight > 0 {
			weight = task.Cases[0].Weight
		}
	}
	// The phases: the database work until the statements could run as
	// the sandbox, the statements' time as the run, comparing or verifying
	// as the check (none when no statement ran to its end).
	ph := engine.Phases{Sandbox: l.sandbox, Run: elapsed}
	if !l.checkFrom.IsZero() {
		ph.Check = time.Since(l.checkFrom)
	}
	v := engine.Verdict{Status: status, MaxScore: weight, Message: msg, Phases: ph}
	if status == engine.StatusAccepted {
		v.Score = float64(weight)
	}
	if id != "" {
		v.Cases = []engine.CaseResult{{ID: id, Status: status, Score: v.Score, WallTime: elapsed, Message: msg}}
	}
	return v
}
