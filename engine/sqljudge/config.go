package sqljudge

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Defaults for Config. A zero field takes its default in New.
const (
	// RegistrySchemaDefault is the schema on the judge server that records
	// every temporary database and user before it is created.
	RegistrySchemaDefault = "kece_judge_registry"
	// StudentConnectionsDefault is the connection budget of a temporary user
	// (MAX_USER_CONNECTIONS). The executor itself opens one.
	StudentConnectionsDefault = 2
	// AdminMaxOpenConnsDefault bounds the admin pool (per-job setup, kills,
	// verification, registry).
	AdminMaxOpenConnsDefault = 8
	// CleanupTimeoutDefault bounds dropping a lease's user and database; it
	// runs on a context detached from the (possibly cancelled) lease.
	CleanupTimeoutDefault = 15 * time.Second
	// KillGraceDefault is how long after the statement limit the watchdog
	// issues KILL QUERY when the server's own limit did not stop the statement
	// (MySQL only limits SELECT; a student can reset session variables).
	KillGraceDefault = 250 * time.Millisecond
	// MaxStatementTimeoutDefault is the ceiling accepted for a problem's
	// per-statement time limit.
	MaxStatementTimeoutDefault = 60 * time.Second
	// AdminStatementTimeoutDefault bounds each admin step of a job (DDL,
	// seed, reference query, verification queries).
	AdminStatementTimeoutDefault = 60 * time.Second
	// MaxSourceBytesDefault is the largest student SQL text accepted.
	MaxSourceBytesDefault = 64 << 10
	// MaxStatementsDefault is the most statements a multi-statement
	// submission may contain.
	MaxStatementsDefault = 64
	// MaxMessageBytesDefault bounds verdict messages (diffs, SQL errors).
	MaxMessageBytesDefault = 1024
	// DialTimeoutDefault is used when the admin DSN sets no dial timeout.
	DialTimeoutDefault = 5 * time.Second
)

var (
	identRE  = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)
	nodeIDRE = regexp.MustCompile(`^[A-Za-z0-9_.:@-]{1,128}$`)
)

// Config configures an Executor. Parse flags and files in cmd/, not here.
type Config struct {
	// AdminDSN is a go-sql-driver/mysql DSN of an account on the dedicated
	// judge server with rights to create and drop databases and users, grant
	// on them and kill their queries. The caller reads it from a credential
	// file; it is never logged and never comes from a task.
	AdminDSN string
	// NodeID names this judge node. Temporary resources and registry rows
	// carry it; the janitor only touches rows of its own node.
	NodeID string
	// ControlServerIdentity optionally names the control plane's database
	// server (its @@server_uuid on MySQL, or "hostname:port" from
	// @@hostname and @@port). The executor refuses a judge server with the
	// same identity.
	ControlServerIdentity string

	// RegistrySchema is the schema of the resource registry on the judge server.
	RegistrySchema string
	// StudentHost is the host part of temporary accounts. Empty: the host
	// the judge server sees for the admin connection (from USER()).
	StudentHost string
	// StudentConnections is the temporary user's MAX_USER_CONNECTIONS.
	StudentConnections int
	// AdminMaxOpenConns bounds the admin connection pool.
	AdminMaxOpenConns int
	// CleanupTimeout bounds the cleanup of one lease.
	CleanupTimeout time.Duration
	// KillGrace delays the watchdog's KILL QUERY past the statement limit.
	KillGrace time.Duration
	// MaxStatementTimeout is the largest per-statement limit a problem may set.
	MaxStatementTimeout time.Duration
	// AdminStatementTimeout bounds each admin step of a job.
	AdminStatementTimeout time.Duration
	// MaxSourceBytes is the largest student SQL accepted (larger: RE).
	MaxSourceBytes int
	// MaxStatements is the most statements in one multi-statement submission.
	MaxStatements int
	// MaxMessageBytes bounds verdict messages.
	MaxMessageBytes int

	// Logger receives state changes worth an operator's attention. Nil: slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.RegistrySchema = cmp.Or(c.RegistrySchema, RegistrySchemaDefault)
	c.StudentConnections = cmp.Or(c.StudentConnections, StudentConnectionsDefault)
	c.AdminMaxOpenConns = cmp.Or(c.AdminMaxOpenConns, AdminMaxOpenConnsDefault)
	c.CleanupTimeout = cmp.Or(c.CleanupTimeout, CleanupTimeoutDefault)
	c.KillGrace = cmp.Or(c.KillGrace, KillGraceDefault)
	c.MaxStatementTimeout = cmp.Or(c.MaxStatementTimeout, MaxStatementTimeoutDefault)
	c.AdminStatementTimeout = cmp.Or(c.AdminStatementTimeout, AdminStatementTimeoutDefault)
	c.MaxSourceBytes = cmp.Or(c.MaxSourceBytes, MaxSourceBytesDefault)
	c.MaxStatements = cmp.Or(c.MaxStatements, MaxStatementsDefault)
	c.MaxMessageBytes = cmp.Or(c.MaxMessageBytes, MaxMessageBytesDefault)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate refuses a configuration the executor cannot run safely with.
// Zero durations and counts are filled with their defaults by New before
// validation; Validate on a raw Config treats zero as "use the default".
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("sqljudge config: "+format, args...)) }
	if c.AdminDSN == "" {
		bad("admin DSN is empty")
	} else if _, err := parseAdminDSN(c.AdminDSN); err != nil {
		errs = append(errs, err)
	}
	if !nodeIDRE.MatchString(c.NodeID) {
		bad("node id %q must be 1-128 characters of [A-Za-z0-9_.:@-]", c.NodeID)
	}
	if !identRE.MatchString(c.RegistrySchema) {
		bad("registry schema %q must be 1-64 characters of [A-Za-z0-9_]", c.RegistrySchema)
	}
	if len(c.StudentHost) > 255 || containsAny(c.StudentHost, "'\\`\x00\n") {
		bad("student host %q is not a plain host pattern", c.StudentHost)
	}
	if c.StudentConnections < 1 {
		bad("student connections must be at least 1")
	}
	if c.AdminMaxOpenConns < 2 {
		// One connection runs a job's setup while another kills its query.
		bad("admin max open conns must be at least 2")
	}
	if c.CleanupTimeout < 0 || c.KillGrace < 0 || c.MaxStatementTimeout < 0 || c.AdminStatementTimeout < 0 {
		bad("durations must not be negative")
	}
	if c.MaxSourceBytes < 1 || c.MaxStatements < 1 {
		bad("source and statement caps must be positive")
	}
	if c.MaxMessageBytes < 64 {
		bad("max message bytes must be at least 64")
	}
	return errors.Join(errs...)
}

// parseAdminDSN parses the admin DSN. Its errors never quote the DSN, which
// holds a password; the driver's parse error is left out on purpose for the
// same reason (it may echo parts of the input).
func parseAdminDSN(dsn string) (*mysql.Config, error) {
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, errors.New("sqljudge config: admin DSN is not a valid go-sql-driver/mysql DSN")
	}
	if mc.User == "" {
		return nil, errors.New("sqljudge config: admin DSN names no user")
	}
	return mc, nil
}

func containsAny(s, chars string) bool {
	for i := 0; i < len(s); i++ {
		for j := 0; j < len(chars); j++ {
			if s[i] == chars[j] {
				return true
			}
		}
	}
	return false
}
