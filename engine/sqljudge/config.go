package sqljudge

import (
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
	if c.RegistrySchema == "" {
		c.RegistrySchema = RegistrySchemaDefault
	}
	if c.StudentConnections == 0 {
		c.StudentConnections = StudentConnectionsDefault
	}
	if c.AdminMaxOpenConns == 0 {
		c.AdminMaxOpenConns = AdminMaxOpenConnsDefault
	}
	if c.CleanupTimeout == 0 {
		c.CleanupTimeout = CleanupTimeoutDefault
	}
	if c.KillGrace == 0 {
		c.KillGrace = KillGraceDefault
	}
	if c.MaxStatementTimeout == 0 {
		c.MaxStatementTimeout = MaxStatementTimeoutDefault
	}
	if c.AdminStatementTimeout == 0 {
		c.AdminStatementTimeout = AdminStatementTimeoutDefault
	}
	if c.MaxSourceBytes == 0 {
		c.MaxSourceBytes = MaxSourceBytesDefault
	}
	if c.MaxStatements == 0 {
		c.MaxStatements = MaxStatementsDefault
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = MaxMessageBytesDefault
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate refuses a configuration the executor cannot run safely with.
// Zero durations and counts are filled with their defaults by New before
// validation; Validate on a raw Config treats zero as "use the default".
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.AdminDSN == "" {
		return errors.New("sqljudge config: admin DSN is empty")
	}
	if _, err := parseAdminDSN(c.AdminDSN); err != nil {
		return err
	}
	if !nodeIDRE.MatchString(c.NodeID) {
		return fmt.Errorf("sqljudge config: node id %q must be 1-128 characters of [A-Za-z0-9_.:@-]", c.NodeID)
	}
	if !identRE.MatchString(c.RegistrySchema) {
		return fmt.Errorf("sqljudge config: registry schema %q must be 1-64 characters of [A-Za-z0-9_]", c.RegistrySchema)
	}
	if len(c.StudentHost) > 255 || containsAny(c.StudentHost, "'\\`\x00\n") {
		return fmt.Errorf("sqljudge config: student host %q is not a plain host pattern", c.StudentHost)
	}
	switch {
	case c.StudentConnections < 1:
		return errors.New("sqljudge config: student connections must be at least 1")
	case c.AdminMaxOpenConns < 2:
		// One connection runs a job's setup while another kills its query.
		return errors.New("sqljudge config: admin max open conns must be at least 2")
	case c.CleanupTimeout < 0, c.KillGrace < 0, c.MaxStatementTimeout < 0, c.AdminStatementTimeout < 0:
		return errors.New("sqljudge config: durations must not be negative")
	case c.MaxSourceBytes < 1, c.MaxStatements < 1:
		return errors.New("sqljudge config: source and statement caps must be positive")
	case c.MaxMessageBytes < 64:
		return errors.New("sqljudge config: max message bytes must be at least 64")
	}
	return nil
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
