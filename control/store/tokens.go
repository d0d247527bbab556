package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// TokenKind separates admin and business API tokens; they are never
// interchangeable with each other or with node credentials.
type TokenKind string

// Token kinds.
const (
	TokenAdmin    TokenKind = "ADMIN"
	TokenBusiness TokenKind = "BUSINESS"
)

// Token lifetime bounds.
const (
	// TokenMaxLifetime bounds --expires-in: a token that should live longer
	// has no expiry and is rotated and revoked by hand.
	TokenMaxLifetime = 10 * 365 * 24 * time.Hour
	// TokenMaxOverlap bounds how long a rotated-out secret stays valid.
	TokenMaxOverlap = 30 * 24 * time.Hour
	// TokenOverlapDefault is the overlap of a rotation that names none.
	TokenOverlapDefault = 24 * time.Hour
	// tokenLastUsedResolution: last_used_at is written at most once per this
	// interval per token, so authentication is not a write per request.
	tokenLastUsedResolution = time.Minute
)

// ErrTokenExpired: the token's expiry passed, or the secret was rotated out
// and its overlap ended. It matches ErrUnauthenticated too.
var ErrTokenExpired = fmt.Errorf("token expired: %w", ErrUnauthenticated)

func tokenPrefix(k TokenKind) string {
	if k == TokenAdmin {
		return "kat_"
	}
	return "kbt_"
}

func validKind(kind TokenKind) error {
	if kind != TokenAdmin && kind != TokenBusiness {
		return invalid("kind", "must be admin or business")
	}
	return nil
}

// TokenSpec describes a token to issue.
type TokenSpec struct {
	Kind TokenKind
	Name string
	// ExpiresIn, when positive, makes the token expire that long after
	// creation (database clock); zero means no expiry.
	ExpiresIn time.Duration
}

// CreateToken makes an API token of a kind with no expiry; see IssueToken.
func (s *Store) CreateToken(ctx context.Context, kind TokenKind, name string) (string, error) {
	return s.IssueToken(ctx, TokenSpec{Kind: kind, Name: name})
}

// IssueToken makes an API token; the token is returned once and only its
// hash is stored. Creating, rotating and revoking a token are audited
// (token.create, token.rotate, token.revoke; never the secret).
func (s *Store) IssueToken(ctx context.Context, spec TokenSpec) (string, error) {
	if err := validKind(spec.Kind); err != nil {
		return "", err
	}
	if !nameRE.MatchString(spec.Name) {
		return "", invalid("name", "must match %s", nameRE)
	}
	if spec.ExpiresIn < 0 || spec.ExpiresIn > TokenMaxLifetime {
		return "", invalid("expiresIn", "must be 0 (no expiry) up to %s", TokenMaxLifetime)
	}
	tok, hash := newSecret(tokenPrefix(spec.Kind))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `INSERT INTO judge_api_token (kind, name, token_hash, expires_at)
			VALUES (?, ?, ?, IF(? > 0, NOW(6) + INTERVAL ? MICROSECOND, NULL))`,
			spec.Kind, spec.Name, hash, spec.ExpiresIn.Microseconds(), spec.ExpiresIn.Microseconds())
		if isDuplicate(err) {
			return conflict("a %s token named %q exists", spec.Kind, spec.Name)
		}
		if err != nil {
			return fmt.Errorf("store: create token: %w", err)
		}
		id, _ := r.LastInsertId()
		return audit(ctx, tx, auditActorCLI, "token.create", 0, 0, "", map[string]any{"tokenId": id, "kind": spec.Kind,
			"name": spec.Name, "expiresInSeconds": int64(spec.ExpiresIn / time.Second)})
	})
	if err != nil {
		return "", err
	}
	return tok, nil
}

// auditActorCLI is the actor of token changes: `kece-control token` makes
// them on a host that holds the database's credentials, not through the
// API, so no admin token names the operator.
const auditActorCLI = "kece-control"

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

// AuthenticateToken resolves a token of the wanted kind. Any other kind,
// an unknown or revoked token is ErrUnauthenticated; an expired token, or
// a rotated-out secret past its overlap, is ErrTokenExpired. Both the
// current and, during a rotation's overlap, the previous secret resolve to
// the same identity.
func (s *Store) AuthenticateToken(ctx context.Context, kind TokenKind, token string) (TokenIdentity, error) {
	if len(token) < 8 || len(token) > 128 || token[:4] != tokenPrefix(kind) {
		return TokenIdentity{}, fmt.Errorf("token: %w", ErrUnauthenticated)
	}
	h := hashSecret(token)
	var t TokenIdentity
	var current, expired, prevLive, stale bool
	// Two unique keys (current and previous hash); a UNION keeps each an
	// index lookup.
	err := s.db.QueryRowContext(ctx, `
		SELECT id, kind, name, token_hash = ?,
		       expires_at IS NOT NULL AND expires_at <= NOW(6),
		       prev_valid_until IS NOT NULL AND prev_valid_until > NOW(6),
		       last_used_at IS NULL OR last_used_at < NOW(6) - INTERVAL ? MICROSECOND
		FROM (SELECT * FROM judge_api_token WHERE token_hash = ?
		      UNION ALL
		      SELECT * FROM judge_api_token WHERE prev_token_hash = ?) t
		WHERE kind = ? AND revoked_at IS NULL
		LIMIT 1`,
		h, tokenLastUsedResolution.Microseconds(), h, h, kind).Scan(&t.ID, &t.Kind, &t.Name, &current, &expired, &prevLive, &stale)
	if errors.Is(err, sql.ErrNoRows) {
		return TokenIdentity{}, fmt.Errorf("token: %w", ErrUnauthenticated)
	}
	if err != nil {
		return TokenIdentity{}, fmt.Errorf("store: authenticate token: %w", err)
	}
	switch {
	case expired:
		return TokenIdentity{}, fmt.Errorf("%s token %q: %w", kind, t.Name, ErrTokenExpired)
	case !current && !prevLive:
		return TokenIdentity{}, fmt.Errorf("%s token %q: this secret was replaced by a rotation and its overlap ended: %w", kind, t.Name, ErrTokenExpired)
	}
	if stale {
		// Best effort: a failed bookkeeping write must not refuse the caller.
		_, _ = s.db.ExecContext(ctx, `UPDATE judge_api_token SET last_used_at = NOW(6)
			WHERE id = ? AND (last_used_at IS NULL OR last_used_at < NOW(6) - INTERVAL ? MICROSECOND)`,
			t.ID, tokenLastUsedResolution.Microseconds())
	}
	return t, nil
}

// RotateSpec names a token to rotate and how.
type RotateSpec struct {
	Kind TokenKind
	Name string
	// Overlap is how long the current secret stays valid next to the new
	// one (0: it stops at once). A secret still in an earlier rotation's
	// overlap stops at once: at most two secrets are valid.
	Overlap time.Duration
	// ExpiresIn, when positive, sets a new expiry from now; zero keeps the
	// token's expiry as it is.
	ExpiresIn time.Duration
}

// RotateToken gives a live token a new secret, returned once. The token
// keeps its id, so idempotency keys and audit rows stay attached to it.
func (s *Store) RotateToken(ctx context.Context, spec RotateSpec) (string, error) {
	if err := validKind(spec.Kind); err != nil {
		return "", err
	}
	if spec.Overlap < 0 || spec.Overlap > TokenMaxOverlap {
		return "", invalid("overlap", "must be 0..%s", TokenMaxOverlap)
	}
	if spec.ExpiresIn < 0 || spec.ExpiresIn > TokenMaxLifetime {
		return "", invalid("expiresIn", "must be 0 (keep) up to %s", TokenMaxLifetime)
	}
	tok, hash := newSecret(tokenPrefix(spec.Kind))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE judge_api_token
			SET prev_token_hash = token_hash, prev_valid_until = NOW(6) + INTERVAL ? MICROSECOND,
			    token_hash = ?, rotated_at = NOW(6),
			    expires_at = IF(? > 0, NOW(6) + INTERVAL ? MICROSECOND, expires_at)
			WHERE kind = ? AND name = ? AND revoked_at IS NULL`,
			spec.Overlap.Microseconds(), hash, spec.ExpiresIn.Microseconds(), spec.ExpiresIn.Microseconds(), spec.Kind, spec.Name)
		if err != nil {
			return fmt.Errorf("store: rotate token: %w", err)
		}
		if n, _ := r.RowsAffected(); n != 1 {
			return fmt.Errorf("no live %s token named %q: %w", spec.Kind, spec.Name, ErrNotFound)
		}
		return audit(ctx, tx, auditActorCLI, "token.rotate", 0, 0, "", map[string]any{"kind": spec.Kind, "name": spec.Name,
			"overlapSeconds": int64(spec.Overlap / time.Second), "expiresInSeconds": int64(spec.ExpiresIn / time.Second)})
	})
	if err != nil {
		return "", err
	}
	return tok, nil
}

// RevokeToken refuses a token (every secret of it) from now on; it reports
// whether one was live.
func (s *Store) RevokeToken(ctx context.Context, kind TokenKind, name string) (bool, error) {
	var live bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx,
			`UPDATE judge_api_token SET revoked_at = NOW(6) WHERE kind = ? AND name = ? AND revoked_at IS NULL`, kind, name)
		if err != nil {
			return fmt.Errorf("store: revoke token: %w", err)
		}
		n, _ := r.RowsAffected()
		if live = n == 1; !live {
			return nil
		}
		return audit(ctx, tx, auditActorCLI, "token.revoke", 0, 0, "", map[string]any{"kind": kind, "name": name})
	})
	return live, err
}

// Token states as ListTokens reports them.
const (
	TokenActive   = "ACTIVE"
	TokenExpired  = "EXPIRED"
	TokenRevoked  = "REVOKED"
	TokenRotating = "ROTATING" // active, and a rotated-out secret is still valid
)

// TokenInfo describes a token without its secret.
type TokenInfo struct {
	ID         int64      `json:"id,string"`
	Kind       TokenKind  `json:"kind"`
	Name       string     `json:"name"`
	State      string     `json:"state"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	RotatedAt  *time.Time `json:"rotatedAt,omitempty"`
	// PreviousValidUntil is when the rotated-out secret stops, while it is
	// still valid.
	PreviousValidUntil *time.Time `json:"previousValidUntil,omitempty"`
	RevokedAt          *time.Time `json:"revokedAt,omitempty"`
}

// ListTokens lists tokens (of one kind, or all when kind is ""), by kind
// and name; states are judged on the database clock.
func (s *Store) ListTokens(ctx context.Context, kind TokenKind) ([]TokenInfo, error) {
	if kind != "" {
		if err := validKind(kind); err != nil {
			return nil, err
		}
	}
	out, err := queryAll(ctx, s.db, func(rows rowScanner) (TokenInfo, error) {
		var t TokenInfo
		var lastUsed, expires, rotated, prevUntil, revoked sql.NullTime
		var state string
		err := rows.Scan(&t.ID, &t.Kind, &t.Name, &t.CreatedAt, &lastUsed, &expires, &rotated, &prevUntil, &revoked, &state)
		t.State = state
		for _, p := range []struct {
			src sql.NullTime
			dst **time.Time
		}{{lastUsed, &t.LastUsedAt}, {expires, &t.ExpiresAt}, {rotated, &t.RotatedAt}, {prevUntil, &t.PreviousValidUntil}, {revoked, &t.RevokedAt}} {
			if p.src.Valid {
				v := p.src.Time.UTC()
				*p.dst = &v
			}
		}
		t.CreatedAt = t.CreatedAt.UTC()
		return t, err
	}, `SELECT id, kind, name, created_at, last_used_at, expires_at, rotated_at,
	           IF(prev_valid_until > NOW(6), prev_valid_until, NULL), revoked_at,
	           CASE WHEN revoked_at IS NOT NULL THEN 'REVOKED'
	                WHEN expires_at IS NOT NULL AND expires_at <= NOW(6) THEN 'EXPIRED'
	                WHEN prev_valid_until > NOW(6) THEN 'ROTATING'
	                ELSE 'ACTIVE' END
	    FROM judge_api_token WHERE ? = '' OR kind = ? ORDER BY kind, name`, kind, kind)
	if err != nil {
		return nil, fmt.Errorf("store: list tokens: %w", err)
	}
	return out, nil
}
