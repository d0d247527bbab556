package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

// consoleSessionPrefix marks console session ids, so one is never mistaken
// for an API token or a node credential.
const consoleSessionPrefix = "kcs_"

// consoleSeenResolution: last_seen_at (the idle clock) is written at most
// once per this interval per session, so a page view is not always a write.
// The idle timeout is therefore exact to within this interval.
const consoleSeenResolution = 10 * time.Second

// ErrConsoleSessionInvalid: the console session is unknown, ended, past its
// idle or absolute expiry, or the admin secret that opened it is no longer
// accepted (rotated out, its token revoked or expired). It matches
// ErrUnauthenticated too.
var ErrConsoleSessionInvalid = fmt.Errorf("console session invalid: %w", ErrUnauthenticated)

// ConsoleSessionLimits are the two expiries of a console session.
type ConsoleSessionLimits struct {
	// Idle ends a session this long after its last request.
	Idle time.Duration
	// Absolute ends a session this long after login, however busy.
	Absolute time.Duration
}

func (l ConsoleSessionLimits) validate() error {
	if l.Idle < time.Minute || l.Absolute < l.Idle {
		return jobdb.Invalid("sessionLimits", "idle %s must be at least 1m and absolute %s at least idle", l.Idle, l.Absolute)
	}
	return nil
}

// ConsoleSession is an open console session as the console sees it.
type ConsoleSession struct {
	// Secret is the cookie value; only its hash is stored. It is set by
	// OpenConsoleSession only.
	Secret string
	// CSRF is the per-session token every state-changing form carries.
	CSRF string
	// Admin is the admin token the session was opened with; every action
	// taken through the session is done, and audited, as this token.
	Admin TokenIdentity
	// ExpiresAt is the absolute expiry (database clock).
	ExpiresAt time.Time
}

// OpenConsoleSession starts a console session for an admin token that was
// just authenticated (AuthenticateToken with TokenAdmin) with adminSecret.
// The session is bound to that secret (its hash): it lasts only while the
// API accepts the secret. remote is the browser's IP address, kept with the
// session and in the login's audit row.
func (s *Tokens) OpenConsoleSession(ctx context.Context, admin TokenIdentity, adminSecret, remote string, lim ConsoleSessionLimits) (ConsoleSession, error) {
	if admin.Kind != TokenAdmin || admin.ID <= 0 || adminSecret == "" {
		return ConsoleSession{}, fmt.Errorf("console session: %w", ErrUnauthenticated)
	}
	if err := lim.validate(); err != nil {
		return ConsoleSession{}, err
	}
	secret, hash := newSecret(consoleSessionPrefix)
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return ConsoleSession{}, fmt.Errorf("console session: %w", err)
	}
	csrf := hex.EncodeToString(b[:])
	if len(remote) > jobdb.CallerAddrMax { // judge_console_session.remote_addr is as wide
		remote = remote[:jobdb.CallerAddrMax]
	}
	// Ended and expired sessions are swept here, a few at a time, so the
	// table does not need a maintenance pass of its own.
	if _, err := s.db.Pool.ExecContext(ctx, `DELETE FROM judge_console_session
		WHERE expires_at < NOW(6) - INTERVAL 1 DAY ORDER BY expires_at LIMIT 100`); err != nil {
		return ConsoleSession{}, fmt.Errorf("store: sweep console sessions: %w", err)
	}
	// The login is audited with the session it opened, in one transaction.
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		// Only for a secret the token accepts now: its current one, or the
		// previous one inside its overlap.
		sh := hashSecret(adminSecret)
		r, err := tx.ExecContext(ctx, `INSERT INTO judge_console_session
			(session_hash, token_id, token_secret_hash, csrf_token, remote_addr, expires_at)
			SELECT ?, id, ?, ?, ?, NOW(6) + INTERVAL ? MICROSECOND FROM judge_api_token
			WHERE id = ? AND kind = ? AND revoked_at IS NULL
			  AND (token_hash = ? OR (prev_token_hash = ? AND prev_valid_until > NOW(6)))`,
			hash, sh, csrf, remote, jobdb.Micros(lim.Absolute), admin.ID, TokenAdmin, sh, sh)
		if err != nil {
			return fmt.Errorf("store: open console session: %w", err)
		}
		if n, _ := r.RowsAffected(); n != 1 {
			return fmt.Errorf("console session: the secret is not one the admin token accepts: %w", ErrUnauthenticated)
		}
		return jobdb.Audit(WithCaller(ctx, remote), tx, admin.Actor(), "console.login", 0, 0, "console login", nil)
	})
	if err != nil {
		return ConsoleSession{}, err
	}
	sess, err := s.ConsoleSessionBySecret(ctx, secret, lim)
	if err != nil {
		return ConsoleSession{}, err
	}
	sess.Secret = secret
	return sess, nil
}

// ConsoleSessionBySecret resolves a session cookie. It refuses a session
// that ended or passed either expiry, and ends (audited as
// console.session_ended, with the caller's address from WithCaller) one
// whose admin secret the API no longer accepts: rotated out with no
// overlap, past its overlap, retired by a later rotation, or its token
// revoked or expired. A session never outlives the secret it was opened
// with. A successful lookup restarts the idle clock.
func (s *Tokens) ConsoleSessionBySecret(ctx context.Context, secret string, lim ConsoleSessionLimits) (ConsoleSession, error) {
	if err := lim.validate(); err != nil {
		return ConsoleSession{}, err
	}
	if len(secret) < 8 || len(secret) > 128 || secret[:4] != consoleSessionPrefix {
		return ConsoleSession{}, ErrConsoleSessionInvalid
	}
	var (
		sess    ConsoleSession
		rowID   int64
		stale   bool
		refusal string
	)
	// The secret is accepted exactly as AuthenticateToken accepts it: the
	// token's current secret, or its previous one inside the overlap, of a
	// token neither revoked nor expired.
	err := s.db.Pool.QueryRowContext(ctx, `
		SELECT cs.id, cs.csrf_token, cs.expires_at, t.id, t.kind, t.name,
		       cs.last_seen_at < NOW(6) - INTERVAL ? MICROSECOND,
		       CASE WHEN t.revoked_at IS NOT NULL THEN 'its admin token was revoked'
		            WHEN t.expires_at IS NOT NULL AND t.expires_at <= NOW(6) THEN 'its admin token expired'
		            WHEN cs.token_secret_hash = t.token_hash THEN ''
		            WHEN cs.token_secret_hash = t.prev_token_hash AND t.prev_valid_until > NOW(6) THEN ''
		            ELSE 'the admin secret that opened it was rotated out' END
		FROM judge_console_session cs
		JOIN judge_api_token t ON t.id = cs.token_id
		WHERE cs.session_hash = ?
		  AND cs.ended_at IS NULL
		  AND cs.expires_at > NOW(6)
		  AND cs.last_seen_at > NOW(6) - INTERVAL ? MICROSECOND
		  AND t.kind = ?`,
		jobdb.Micros(consoleSeenResolution), hashSecret(secret), jobdb.Micros(lim.Idle), TokenAdmin).
		Scan(&rowID, &sess.CSRF, &sess.ExpiresAt, &sess.Admin.ID, &sess.Admin.Kind, &sess.Admin.Name, &stale, &refusal)
	if errors.Is(err, sql.ErrNoRows) {
		return ConsoleSession{}, ErrConsoleSessionInvalid
	}
	if err != nil {
		return ConsoleSession{}, fmt.Errorf("store: console session: %w", err)
	}
	if refusal != "" {
		if err := s.endRefusedSession(ctx, rowID, sess.Admin, refusal); err != nil {
			return ConsoleSession{}, err
		}
		return ConsoleSession{}, fmt.Errorf("console session ended: %s: %w", refusal, ErrConsoleSessionInvalid)
	}
	if stale {
		if _, err := s.db.Pool.ExecContext(ctx, `UPDATE judge_console_session SET last_seen_at = NOW(6) WHERE id = ?`, rowID); err != nil {
			return ConsoleSession{}, fmt.Errorf("store: touch console session: %w", err)
		}
	}
	return sess, nil
}

// endRefusedSession ends a session whose admin secret is no longer
// accepted, audited once (concurrent requests of the session race to end
// it; one writes the row).
func (s *core) endRefusedSession(ctx context.Context, id int64, admin TokenIdentity, why string) error {
	return s.db.InTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE judge_console_session SET ended_at = NOW(6) WHERE id = ? AND ended_at IS NULL`, id)
		if err != nil {
			return fmt.Errorf("store: end console session: %w", err)
		}
		if n, _ := r.RowsAffected(); n != 1 {
			return nil
		}
		return jobdb.Audit(ctx, tx, jobdb.ActorControl, "console.session_ended", 0, 0, "console session ended: "+why,
			map[string]any{"admin": admin.Actor(), "sessionId": id})
	})
}

// EndConsoleSession logs a session out (audited as console.logout with the
// browser's IP address, remote); ending an unknown or ended session is not an error
// (logout is idempotent).
func (s *Tokens) EndConsoleSession(ctx context.Context, secret, remote string) error {
	if len(secret) < 8 || len(secret) > 128 {
		return nil
	}
	return s.db.InTx(ctx, func(tx *sql.Tx) error {
		var who TokenIdentity
		var id int64
		err := tx.QueryRowContext(ctx, `SELECT cs.id, t.id, t.kind, t.name
			FROM judge_console_session cs JOIN judge_api_token t ON t.id = cs.token_id
			WHERE cs.session_hash = ? AND cs.ended_at IS NULL FOR UPDATE`, hashSecret(secret)).Scan(&id, &who.ID, &who.Kind, &who.Name)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("store: end console session: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE judge_console_session SET ended_at = NOW(6) WHERE id = ?`, id); err != nil {
			return fmt.Errorf("store: end console session: %w", err)
		}
		return jobdb.Audit(WithCaller(ctx, remote), tx, who.Actor(), "console.logout", 0, 0, "console logout", nil)
	})
}
