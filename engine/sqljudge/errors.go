package sqljudge

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/kece-oj/kece/engine"
)

// ErrControlDatabase is matched (errors.Is) when the judge DSN points at the
// control plane's database server.
var ErrControlDatabase = errors.New("judge DSN points at the control plane database")

// ErrAdminRights is matched (errors.Is) when the admin account lacks a right
// the executor needs.
var ErrAdminRights = errors.New("judge admin account lacks a required right")

// MySQL/MariaDB server error numbers the executor tells apart.
const (
	erDBAccessDenied       = 1044
	erAccessDenied         = 1045
	erConCount             = 1040
	erServerShutdown       = 1053
	erDiskFull             = 1021
	erNoSuchThread         = 1094
	erKillDenied           = 1095
	erTableAccessDenied    = 1142
	erColumnAccessDenied   = 1143
	erUserLimitReached     = 1226
	erSpecificAccessDenied = 1227
	erCannotUser           = 1396
	erCantCreateUserGrant  = 1410
	erTooManyUserConns     = 1203
	erStatementTimeout     = 1969 // MariaDB max_statement_time
	erQueryTimeout         = 3024 // MySQL max_execution_time
)

func mysqlErrNo(err error) (uint16, bool) {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number, true
	}
	return 0, false
}

// classifyAdmin turns an error of an admin operation into an infrastructure
// fault: rights problems, exhaustion, unreachable server, or cancellation.
func classifyAdmin(ctx context.Context, err error, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return engine.Infra(engine.InfraCancelled, fmt.Errorf("%s: %w", what, ctx.Err()))
	}
	if ctx.Err() != nil {
		// A step's own deadline (or the lease's: Execute reports that as
		// cancellation) passed: the server did not answer in time.
		return engine.Infra(engine.InfraJudgeDBUnreachable, fmt.Errorf("%s: timed out: %w", what, ctx.Err()))
	}
	if no, ok := mysqlErrNo(err); ok {
		switch no {
		case erDBAccessDenied, erAccessDenied, erTableAccessDenied, erColumnAccessDenied,
			erSpecificAccessDenied, erCantCreateUserGrant, erKillDenied:
			return engine.Infra(engine.InfraJudgeDBRights, fmt.Errorf("%s: %w: %w", what, ErrAdminRights, err))
		case erConCount, erTooManyUserConns, erUserLimitReached, erDiskFull:
			return engine.Infra(engine.InfraResourceExhausted, fmt.Errorf("%s: %w", what, err))
		case erServerShutdown:
			return engine.Infra(engine.InfraJudgeDBUnreachable, fmt.Errorf("%s: %w", what, err))
		}
		return engine.Infra(engine.InfraInternal, fmt.Errorf("%s: %w", what, err))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return engine.Infra(engine.InfraJudgeDBUnreachable, fmt.Errorf("%s: timed out: %w", what, err))
	}
	return engine.Infra(engine.InfraJudgeDBUnreachable, fmt.Errorf("%s: %w", what, err))
}

// classifyManifest is classifyAdmin for the manifest's own SQL (DDL, seed,
// reference, verification): a plain SQL error there is a broken manifest.
func classifyManifest(ctx context.Context, err error, what string) error {
	ce := classifyAdmin(ctx, err, what)
	if engine.ClassOf(ce) == engine.InfraInternal {
		return engine.Infra(engine.InfraCorruptInput, fmt.Errorf("%s: %w", what, err))
	}
	return ce
}

// scrubber removes server internals from messages shown to the student: the
// temporary account and database names, the client host, file paths and the
// server product name.
type scrubber struct {
	replacer *strings.Replacer
	max      int
}

var (
	pathRE    = regexp.MustCompile(`(^|[\s'"(=])(/[^\s'"]*)`)
	productRE = regexp.MustCompile(`(?i)your (MariaDB|MySQL) server version`)
)

func newScrubber(user, db, host string, max int) scrubber {
	pairs := []string{user, "student", db, "student_db"}
	if host != "" && host != "%" {
		pairs = append(pairs, "'"+host+"'", "'host'")
	}
	return scrubber{replacer: strings.NewReplacer(pairs...), max: max}
}

func (s scrubber) scrub(msg string) string {
	msg = s.replacer.Replace(msg)
	msg = pathRE.ReplaceAllString(msg, "$1<path>")
	msg = productRE.ReplaceAllString(msg, "your server version")
	return bound(printable(msg), s.max)
}

// studentError renders a SQL error of the student's statement.
func (s scrubber) studentError(err error) string {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return s.scrub(fmt.Sprintf("ERROR %d (%s): %s", me.Number, string(me.SQLState[:]), me.Message))
	}
	return s.scrub("statement failed: " + err.Error())
}
