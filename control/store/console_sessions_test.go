package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

var consoleLimits = store.ConsoleSessionLimits{Idle: time.Minute, Absolute: time.Hour}

func TestConsoleSessionLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok, err := b.Store.Tokens().CreateToken(b.Ctx, store.TokenAdmin, "ops")
	require.NoError(t, err)
	admin, err := b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenAdmin, tok)
	require.NoError(t, err)

	sess, err := b.Store.Tokens().OpenConsoleSession(b.Ctx, admin, tok, "192.0.2.7", consoleLimits)
	require.NoError(t, err)
	require.Regexp(t, `^kcs_`, sess.Secret)
	require.Len(t, sess.CSRF, 64)
	require.Equal(t, admin, sess.Admin)

	// Only the hash is stored: the row is found by the secret's SHA-256,
	// and the secret itself is in no column.
	var n int
	require.NoError(t, b.DB.QueryRowContext(b.Ctx, `SELECT COUNT(*) FROM judge_console_session WHERE session_hash = UNHEX(SHA2(?, 256))`,
		sess.Secret).Scan(&n))
	require.Equal(t, 1, n)
	require.NoError(t, b.DB.QueryRowContext(b.Ctx, `SELECT COUNT(*) FROM judge_console_session
		WHERE csrf_token = ? OR remote_addr = ? OR HEX(session_hash) = HEX(?)`, sess.Secret, sess.Secret, sess.Secret).Scan(&n))
	require.Zero(t, n)

	// Another store over the same database (another replica) resolves it.
	other, err := store.New(b.DB, store.Config{})
	require.NoError(t, err)
	got, err := other.Tokens().ConsoleSessionBySecret(b.Ctx, sess.Secret, consoleLimits)
	require.NoError(t, err)
	require.Equal(t, sess.CSRF, got.CSRF)
	require.Equal(t, admin, got.Admin)

	// Login and logout are audited with the token and the address.
	require.NoError(t, b.Store.Tokens().EndConsoleSession(b.Ctx, sess.Secret, "192.0.2.8"))
	_, err = b.Store.Tokens().ConsoleSessionBySecret(b.Ctx, sess.Secret, consoleLimits)
	require.ErrorIs(t, err, store.ErrConsoleSessionInvalid)
	require.ErrorIs(t, err, store.ErrUnauthenticated)
	require.NoError(t, b.Store.Tokens().EndConsoleSession(b.Ctx, sess.Secret, "192.0.2.8"), "logout is idempotent")
	rows, err := b.DB.QueryContext(b.Ctx, `SELECT action, actor, remote_addr FROM judge_audit WHERE action LIKE 'console.%' ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var seen []string
	for rows.Next() {
		var action, actor, addr string
		require.NoError(t, rows.Scan(&action, &actor, &addr))
		require.Equal(t, admin.Actor(), actor)
		seen = append(seen, action+"@"+addr)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"console.login@192.0.2.7", "console.logout@192.0.2.8"}, seen)
}

func TestConsoleSessionRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok, err := b.Store.Tokens().CreateToken(b.Ctx, store.TokenAdmin, "ops")
	require.NoError(t, err)
	admin, err := b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenAdmin, tok)
	require.NoError(t, err)
	open := func() store.ConsoleSession {
		s, err := b.Store.Tokens().OpenConsoleSession(b.Ctx, admin, tok, "127.0.0.1", consoleLimits)
		require.NoError(t, err)
		return s
	}

	t.Run("business token cannot open one", func(t *testing.T) {
		btok, err := b.Store.Tokens().CreateToken(b.Ctx, store.TokenBusiness, "oj")
		require.NoError(t, err)
		bid, err := b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, btok)
		require.NoError(t, err)
		_, err = b.Store.Tokens().OpenConsoleSession(b.Ctx, bid, btok, "127.0.0.1", consoleLimits)
		require.ErrorIs(t, err, store.ErrUnauthenticated)
	})
	t.Run("garbage and other secrets", func(t *testing.T) {
		for _, s := range []string{"", "kcs_", tok, "kcs_nope-nope-nope"} {
			_, err := b.Store.Tokens().ConsoleSessionBySecret(b.Ctx, s, consoleLimits)
			require.ErrorIs(t, err, store.ErrConsoleSessionInvalid, s)
		}
	})
	t.Run("idle expiry", func(t *testing.T) {
		s := open()
		_, err := b.DB.ExecContext(b.Ctx, `UPDATE judge_console_session SET last_seen_at = NOW(6) - INTERVAL 61 SECOND WHERE csrf_token = ?`, s.CSRF)
		require.NoError(t, err)
		_, err = b.Store.Tokens().ConsoleSessionBySecret(b.Ctx, s.Secret, consoleLimits)
		require.ErrorIs(t, err, store.ErrConsoleSessionInvalid)
	})
	t.Run("a request restarts the idle clock", func(t *testing.T) {
		s := open()
		_, err := b.DB.ExecContext(b.Ctx, `UPDATE judge_console_session SET last_seen_at = NOW(6) - INTERVAL 50 SECOND WHERE csrf_token = ?`, s.CSRF)
		require.NoError(t, err)
		_, err = b.Store.Tokens().ConsoleSessionBySecret(b.Ctx, s.Secret, consoleLimits)
		require.NoError(t, err)
		var age float64
		require.NoError(t, b.DB.QueryRowContext(b.Ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, last_seen_at, NOW(6)) / 1e6 FROM judge_console_session WHERE csrf_token = ?`, s.CSRF).Scan(&age))
		require.Less(t, age, 10.0)
	})
	t.Run("absolute expiry", func(t *testing.T) {
		s := open()
		_, err := b.DB.ExecContext(b.Ctx, `UPDATE judge_console_session SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE csrf_token = ?`, s.CSRF)
		require.NoError(t, err)
		_, err = b.Store.Tokens().ConsoleSessionBySecret(b.Ctx, s.Secret, consoleLimits)
		require.ErrorIs(t, err, store.ErrConsoleSessionInvalid)
	})
	t.Run("revoking the admin token ends its sessions", func(t *testing.T) {
		tok2, err := b.Store.Tokens().CreateToken(b.Ctx, store.TokenAdmin, "temp")
		require.NoError(t, err)
		id2, err := b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenAdmin, tok2)
		require.NoError(t, err)
		s, err := b.Store.Tokens().OpenConsoleSession(b.Ctx, id2, tok2, "127.0.0.1", consoleLimits)
		require.NoError(t, err)
		_, err = b.Store.Tokens().RevokeToken(b.Ctx, store.TokenAdmin, "temp")
		require.NoError(t, err)
		_, err = b.Store.Tokens().ConsoleSessionBySecret(b.Ctx, s.Secret, consoleLimits)
		require.True(t, errors.Is(err, store.ErrConsoleSessionInvalid))
	})
	t.Run("limits are validated", func(t *testing.T) {
		_, err := b.Store.Tokens().OpenConsoleSession(b.Ctx, admin, tok, "127.0.0.1", store.ConsoleSessionLimits{Idle: time.Second, Absolute: time.Hour})
		require.ErrorIs(t, err, store.ErrValidation)
	})
}

// A console session lasts only while the API accepts the admin secret that
// opened it. Each way a secret stops being accepted ends the session at its
// next request, audited once; a session opened with the new secret of a
// rotation is unaffected.
func TestConsoleSessionEndsWithItsSecret(t *testing.T) {
	t.Parallel()
	b := setup(t)
	newAdmin := func(t *testing.T) (string, string, store.TokenIdentity) {
		name := fmt.Sprintf("ops-%d", b.Seq.Add(1))
		tok, err := b.Store.Tokens().CreateToken(b.Ctx, store.TokenAdmin, name)
		require.NoError(t, err)
		id, err := b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenAdmin, tok)
		require.NoError(t, err)
		return name, tok, id
	}
	open := func(t *testing.T, id store.TokenIdentity, secret string) store.ConsoleSession {
		s, err := b.Store.Tokens().OpenConsoleSession(b.Ctx, id, secret, "192.0.2.9", consoleLimits)
		require.NoError(t, err)
		return s
	}
	rotate := func(t *testing.T, name string, overlap time.Duration) string {
		s, err := b.Store.Tokens().RotateToken(b.Ctx, store.RotateSpec{Kind: store.TokenAdmin, Name: name, Overlap: overlap})
		require.NoError(t, err)
		return s
	}
	// ended checks the next request is refused, the row ended, and one
	// audit row says why (a second request neither ends nor audits again).
	ended := func(t *testing.T, s store.ConsoleSession, why string) {
		t.Helper()
		for range 2 {
			_, err := b.Store.Tokens().ConsoleSessionBySecret(store.WithCaller(b.Ctx, "198.51.100.4"), s.Secret, consoleLimits)
			require.ErrorIs(t, err, store.ErrConsoleSessionInvalid)
		}
		require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_console_session WHERE csrf_token = ? AND ended_at IS NOT NULL`, s.CSRF))
		require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_audit WHERE action = 'console.session_ended'
			AND reason = ? AND remote_addr = '198.51.100.4' AND JSON_VALUE(detail, '$.admin') = ?`,
			"console session ended: "+why, s.Admin.Actor()))
	}
	const rotatedOut = "the admin secret that opened it was rotated out"

	t.Run("rotation with no overlap", func(t *testing.T) {
		name, tok, id := newAdmin(t)
		s := open(t, id, tok)
		fresh := rotate(t, name, 0)
		ended(t, s, rotatedOut)
		_, err := b.Store.Tokens().OpenConsoleSession(b.Ctx, id, tok, "192.0.2.9", consoleLimits)
		require.ErrorIs(t, err, store.ErrUnauthenticated, "the old secret opens nothing either")
		s2 := open(t, id, fresh)
		_, err = b.Store.Tokens().ConsoleSessionBySecret(b.Ctx, s2.Secret, consoleLimits)
		require.NoError(t, err, "a session of the new secret works")
	})
	t.Run("rotation whose overlap ends", func(t *testing.T) {
		name, tok, id := newAdmin(t)
		s := open(t, id, tok)
		fresh := rotate(t, name, time.Hour)
		_, err := b.Store.Tokens().ConsoleSessionBySecret(b.Ctx, s.Secret, consoleLimits)
		require.NoError(t, err, "inside the overlap the old secret is accepted, so is its session")
		s2 := open(t, id, fresh)
		_, err = b.DB.ExecContext(b.Ctx, `UPDATE judge_api_token SET prev_valid_until = NOW(6) - INTERVAL 1 SECOND WHERE name = ?`, name)
		require.NoError(t, err)
		ended(t, s, rotatedOut)
		_, err = b.Store.Tokens().ConsoleSessionBySecret(b.Ctx, s2.Secret, consoleLimits)
		require.NoError(t, err, "the new secret's session outlives the old one's")
	})
	t.Run("second rotation during the overlap", func(t *testing.T) {
		name, tok, id := newAdmin(t)
		s := open(t, id, tok)
		rotate(t, name, time.Hour)
		rotate(t, name, time.Hour)
		ended(t, s, rotatedOut)
	})
	t.Run("revoke", func(t *testing.T) {
		name, tok, id := newAdmin(t)
		s := open(t, id, tok)
		_, err := b.Store.Tokens().RevokeTokenAs(b.Ctx, store.TokenAdmin, name, "test", "leaked")
		require.NoError(t, err)
		ended(t, s, "its admin token was revoked")
	})
	t.Run("token expiry", func(t *testing.T) {
		name, tok, id := newAdmin(t)
		s := open(t, id, tok)
		_, err := b.DB.ExecContext(b.Ctx, `UPDATE judge_api_token SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE name = ?`, name)
		require.NoError(t, err)
		ended(t, s, "its admin token expired")
	})
	t.Run("a secret the token does not accept opens nothing", func(t *testing.T) {
		_, _, id := newAdmin(t)
		_, otherTok, _ := newAdmin(t)
		_, err := b.Store.Tokens().OpenConsoleSession(b.Ctx, id, otherTok, "192.0.2.9", consoleLimits)
		require.ErrorIs(t, err, store.ErrUnauthenticated)
	})
}
