package jobdb

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/go-sql-driver/mysql"
)

// Error classes. Callers test them with errors.Is; the HTTP layer maps each to
// a status and machine code in one place.
var (
	// ErrNotFound: the named row does not exist.
	ErrNotFound = errors.New("not found")
	// ErrValidation: bad input; nothing was written.
	ErrValidation = errors.New("validation failed")
	// ErrConflict: the request conflicts with accepted state (stale revision,
	// same identity with a different body, a state that forbids the action).
	ErrConflict = errors.New("conflict")
	// ErrLeaseLost: the lease is no longer this caller's.
	ErrLeaseLost = errors.New("lease lost")
	// ErrResultConflict: a different result was already committed for this lease.
	ErrResultConflict = errors.New("a different result was already committed for this lease")
	// ErrJobCancelled: the job was cancelled.
	ErrJobCancelled = errors.New("job cancelled")
	// ErrSuperseded: a rejudge moved the submission to a newer job.
	ErrSuperseded = errors.New("job superseded by a rejudge")
	// ErrUnauthenticated: unknown credential, session or token.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrSessionSuperseded: a newer boot of this node opened a session.
	ErrSessionSuperseded = errors.New("session superseded by a newer boot")
	// ErrNodeRevoked: the node's credential was revoked.
	ErrNodeRevoked = errors.New("node revoked")
	// ErrJoinCodeExpired and ErrJoinCodeUsed: a join code that can no longer be used.
	ErrJoinCodeExpired = errors.New("join code expired")
	ErrJoinCodeUsed    = errors.New("join code already used")
)

// ValidationError names the field that failed; it matches ErrValidation.
type ValidationError struct {
	Field   string
	Problem string
	// Kind, when set, is a more specific class the error also matches
	// (ErrUnknownLanguage, ErrManifestMissing, ErrManifestMismatch).
	Kind error
}

// Error names the field and its problem.
func (e *ValidationError) Error() string { return e.Field + ": " + e.Problem }

// Is makes errors.Is(err, ErrValidation) true, and errors.Is(err, Kind).
func (e *ValidationError) Is(target error) bool {
	return target == ErrValidation || (e.Kind != nil && target == e.Kind)
}

// Invalid is a validation error of field.
func Invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// InvalidOf is a validation error of a specific kind.
func InvalidOf(kind error, field, format string, args ...any) error {
	return &ValidationError{Field: field, Problem: fmt.Sprintf(format, args...), Kind: kind}
}

// Why a submission is refused at enqueue; each also matches ErrValidation.
var (
	// ErrUnknownLanguage: no pool judges the language.
	ErrUnknownLanguage = errors.New("unknown language")
	// ErrManifestMissing: the manifest does not exist.
	ErrManifestMissing = errors.New("manifest does not exist")
	// ErrManifestMismatch: the language's pool cannot judge the manifest's kind.
	ErrManifestMismatch = errors.New("language does not fit the manifest")
	// ErrMemoryTooLow: the manifest's memory limit is below what the
	// language's runtime needs to start.
	ErrMemoryTooLow = errors.New("memory limit too low for the language")
)

// ConflictError explains a conflict; it matches ErrConflict.
type ConflictError struct {
	Reason string
	// Kind, when set, is a more specific class the error also matches
	// (ErrCheckRequired, ErrHeartbeatStale, ErrNodeRevoked).
	Kind error
}

// Error says what conflicts.
func (e *ConflictError) Error() string { return "conflict: " + e.Reason }

// Is makes errors.Is(err, ErrConflict) true, and errors.Is(err, Kind).
func (e *ConflictError) Is(target error) bool {
	return target == ErrConflict || (e.Kind != nil && target == e.Kind)
}

// Conflict is a conflict with accepted state.
func Conflict(format string, args ...any) error {
	return &ConflictError{Reason: fmt.Sprintf(format, args...)}
}

// ConflictOf is a conflict of a specific kind.
func ConflictOf(kind error, format string, args ...any) error {
	return &ConflictError{Reason: fmt.Sprintf(format, args...), Kind: kind}
}

// Why an enable is refused; each also matches ErrConflict.
var (
	// ErrCheckRequired: no fresh passing self-check for the runtime the node reports.
	ErrCheckRequired = errors.New("a fresh passing self-check is required")
	// ErrHeartbeatStale: the node has no fresh heartbeat.
	ErrHeartbeatStale = errors.New("no fresh heartbeat")
)

// Database failure classes. Classify marks an error with one of them so that
// callers tell an outage from a bug without knowing the driver.
var (
	// ErrUnavailable: the database could not be reached or did not answer
	// (connection refused or lost, a client-side timeout, locks still
	// conflicting after the store's retries). Retrying later may succeed.
	ErrUnavailable = errors.New("database unavailable")
	// ErrDatabase: the server refused a statement (a server-side SQL error):
	// a bug or a schema problem, not an outage.
	ErrDatabase = errors.New("database error")
)

// dbError is a database failure marked with its class.
type dbError struct {
	class error
	err   error
}

func (e *dbError) Error() string        { return e.err.Error() }
func (e *dbError) Unwrap() error        { return e.err }
func (e *dbError) Is(target error) bool { return target == e.class }

// Classify returns err marked ErrUnavailable or ErrDatabase when its chain
// holds a database failure, and err unchanged otherwise (nil, store classes,
// context errors). The store's transactions return classified errors;
// callers of the store may classify any error they got from it.
func Classify(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrDatabase) {
		return err
	}
	var me *mysql.MySQLError
	var ne net.Error
	switch {
	case errors.As(err, &me):
		// 2000+ are client-side errors (lost connection, …); 1205/1213
		// reach callers only after the retries ran out.
		if me.Number >= 2000 || me.Number == 1205 || me.Number == 1213 {
			return &dbError{class: ErrUnavailable, err: err}
		}
		return &dbError{class: ErrDatabase, err: err}
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.As(err, &ne):
		return &dbError{class: ErrUnavailable, err: err}
	}
	return err
}

// SessionError is why a claim by sess is refused (nil: it is not): the node
// is gone (found false), revoked, or has a newer session.
func SessionError(sess NodeSession, found, revoked bool, epoch int64) error {
	switch {
	case !found:
		return fmt.Errorf("node %d: %w", sess.NodeID, ErrUnauthenticated)
	case revoked:
		return fmt.Errorf("node %d: %w", sess.NodeID, ErrNodeRevoked)
	case epoch != sess.SessionEpoch:
		return fmt.Errorf("node %d session %d (current %d): %w", sess.NodeID, sess.SessionEpoch, epoch, ErrSessionSuperseded)
	}
	return nil
}
