package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
)

// TokenKind separates admin and business API tokens; they are never
// interchangeable with each other or with node credentials.
type TokenKind string

// Token kinds.
const (
	TokenAdmin    TokenKind = "ADMIN"
	TokenBusiness TokenKind = "BUSINESS"
)

func tokenPrefix(k TokenKind) string {
	if k == TokenAdmin {
		return "kat_"
	}
	return "kbt_"
}

// CreateToken makes an API token of a kind; the token is returned once and
// only its hash is stored.
func (s *Store) CreateToken(ctx context.Context, kind TokenKind, name string) (string, error) {
	if kind != TokenAdmin && kind != TokenBusiness {
		return "", invalid("kind", "must be admin or business")
	}
	if !nameRE.MatchString(name) {
		return "", invalid("name", "must match %s", nameRE)
	}
	tok, hash := newSecret(tokenPrefix(kind))
	_, err := s.db.ExecContext(ctx, `INSERT INTO judge_api_token (kind, name, token_hash) VALUES (?, ?, ?)`, kind, name, hash)
	if isDuplicate(err) {
		return "", conflict("a %s token named %q exists", kind, name)
	}
	if err != nil {
		return "", fmt.Errorf("store: create token: %w", err)
	}
	return tok, nil
}

// TokenIdentity is an authenticated API caller.
type TokenIdentity struct {
	ID   int64
	Kind TokenKind
	Name string
}

// Actor names the caller in audit rows.
func (t TokenIdentity) Actor() string {
	return string(t.Kind) + ":" + t.Name + "#" + strconv.FormatInt(t.ID, 10)
}

// AuthenticateToken resolves a token of the wanted kind; any other kind, or
// an unknown or revoked token, is ErrUnauthenticated.
func (s *Store) AuthenticateToken(ctx context.Context, kind TokenKind, token string) (TokenIdentity, error) {
	if len(token) < 8 || len(token) > 128 || token[:4] != tokenPrefix(kind) {
		return TokenIdentity{}, fmt.Errorf("token: %w", ErrUnauthenticated)
	}
	var t TokenIdentity
	err := s.db.QueryRowContext(ctx,
		`SELECT id, kind, name FROM judge_api_token WHERE token_hash = ? AND kind = ? AND revoked_at IS NULL`,
		hashSecret(token), kind).Scan(&t.ID, &t.Kind, &t.Name)
	if errors.Is(err, sql.ErrNoRows) {
		return TokenIdentity{}, fmt.Errorf("token: %w", ErrUnauthenticated)
	}
	if err != nil {
		return TokenIdentity{}, fmt.Errorf("store: authenticate token: %w", err)
	}
	return t, nil
}

// RevokeToken refuses a token from now on; it reports whether one was live.
func (s *Store) RevokeToken(ctx context.Context, kind TokenKind, name string) (bool, error) {
	r, err := s.db.ExecContext(ctx,
		`UPDATE judge_api_token SET revoked_at = NOW(6) WHERE kind = ? AND name = ? AND revoked_at IS NULL`, kind, name)
	if err != nil {
		return false, fmt.Errorf("store: revoke token: %w", err)
	}
	n, _ := r.RowsAffected()
	return n == 1, nil
}
