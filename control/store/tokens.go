package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kece-oj/kece/control/internal/jobdb"
	"github.com/kece-oj/kece/control/ratelimit"
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
		return jobdb.Invalid("kind", "must be admin or business")
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
	// SubmissionTypes scopes a business token to these submission types
	// (tenancy.go); empty means every type. Admin tokens take none.
	SubmissionTypes []string
	// ConsumerGroup is the settlement-event consumer group of a business
	// token; empty means DefaultConsumerGroup. Admin tokens take none.
	ConsumerGroup string
	// RateLimit is a business token's own request budget; nil means the
	// server's default. Admin tokens take none.
	RateLimit *ratelimit.Limit
	// Actor, when set, is recorded in the audit log (token.create) with
	// the token's scope; the admin API sets it, the local CLI does not.
	Actor string
}

// CreateToken makes an API token of a kind with no expiry; see IssueToken.
func (s *Tokens) CreateToken(ctx context.Context, kind TokenKind, name string) (string, error) {
	return s.IssueToken(ctx, TokenSpec{Kind: kind, Name: name})
}

// IssueToken makes an API token; the token is returned once and only its
// hash is stored. A business token joins its consumer group in the same
// transaction, so the group takes its submission types from the next
// settlement on. Creating, rotating and revoking a token are audited
// (token.create, token.rotate, token.revoke; never the secret).
func (s *Tokens) IssueToken(ctx context.Context, spec TokenSpec) (string, error) {
	if err := validKind(spec.Kind); err != nil {
		return "", err
	}
	if !nameRE.MatchString(spec.Name) {
		return "", jobdb.Invalid("name", "must match %s", nameRE)
	}
	if spec.ExpiresIn < 0 || spec.ExpiresIn > TokenMaxLifetime {
		return "", jobdb.Invalid("expiresIn", "must be 0 (no expiry) up to %s", TokenMaxLifetime)
	}
	scope, err := tokenScopeOf(spec)
	if err != nil {
		return "", err
	}
	if err := checkRateLimit(spec.Kind, spec.RateLimit); err != nil {
		return "", err
	}
	rateCol, burstCol := rateLimitColumns(spec.RateLimit)
	tok, hash := newSecret(tokenPrefix(spec.Kind))
	err = s.db.InTx(ctx, func(tx *sql.Tx) error {
		if spec.Kind == TokenBusiness {
			if err := lockConsumerGroup(ctx, tx, scope.group); err != nil {
				return err
			}
		}
		r, err := tx.ExecContext(ctx, `INSERT INTO judge_api_token (kind, name, token_hash, expires_at, submission_types, consumer_group,
				rate_limit_rate, rate_limit_burst)
			VALUES (?, ?, ?, IF(? > 0, NOW(6) + INTERVAL ? MICROSECOND, NULL), ?, ?, ?, ?)`,
			spec.Kind, spec.Name, hash, spec.ExpiresIn.Microseconds(), spec.ExpiresIn.Microseconds(), scope.column(), scope.group,
			rateCol, burstCol)
		if jobdb.IsDuplicate(err) {
			return jobdb.Conflict("a %s token named %q exists", spec.Kind, spec.Name)
		}
		if err != nil {
			return fmt.Errorf("store: create token: %w", err)
		}
		id, _ := r.LastInsertId()
		detail := map[string]any{"tokenId": id, "kind": spec.Kind, "name": spec.Name,
			"expiresInSeconds": int64(spec.ExpiresIn / time.Second)}
		if spec.Kind == TokenBusiness {
			detail["submissionTypes"], detail["consumerGroup"] = scope.types, scope.group
			if spec.RateLimit != nil {
				detail["rateLimit"] = rateLimitDetail(spec.RateLimit)
			}
		}
		if err := jobdb.Audit(ctx, tx, cmp.Or(spec.Actor, auditActorCLI), "token.create", 0, 0, "", detail); err != nil {
			return err
		}
		if spec.Kind == TokenBusiness {
			return refreshConsumerGroup(ctx, tx, scope.group)
		}
		return nil
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
	// SubmissionTypes are the types a business token may use, sorted; nil
	// means every type (MaySee).
	SubmissionTypes []string
	// ConsumerGroup is a business token's settlement-event consumer group.
	ConsumerGroup string
	// RateLimit is a business token's own request budget; nil: the
	// server's default.
	RateLimit *ratelimit.Limit
}

// Actor names the caller in audit rows.
func (t TokenIdentity) Actor() string {
	return string(t.Kind) + ":" + t.Name + "#" + strconv.FormatInt(t.ID, 10)
}

// AuthenticateToken resolves a token of the wanted kind. Any other kind or
// a secret no token of the kind ever had is ErrUnauthenticated; every
// secret the token no longer accepts — its expiry passed, it was revoked,
// or a rotation retired the secret (past its overlap) — is ErrTokenExpired. Both the
// current and, during a rotation's overlap, the previous secret resolve to
// the same identity.
func (s *Tokens) AuthenticateToken(ctx context.Context, kind TokenKind, token string) (TokenIdentity, error) {
	if len(token) < 8 || len(token) > 128 || token[:4] != tokenPrefix(kind) {
		return TokenIdentity{}, fmt.Errorf("token: %w", ErrUnauthenticated)
	}
	h := hashSecret(token)
	var t TokenIdentity
	var current, expired, prevLive, stale bool
	var types sql.NullString
	var limRate sql.NullFloat64
	var limBurst sql.NullInt64
	// Two unique keys (current and previous hash); a UNION keeps each an
	// index lookup.
	err := s.db.Pool.QueryRowContext(ctx, `
		SELECT id, kind, name, submission_types, consumer_group, rate_limit_rate, rate_limit_burst, token_hash = ?,
		       expires_at IS NOT NULL AND expires_at <= NOW(6),
		       prev_valid_until IS NOT NULL AND prev_valid_until > NOW(6),
		       last_used_at IS NULL OR last_used_at < NOW(6) - INTERVAL ? MICROSECOND
		FROM (SELECT * FROM judge_api_token WHERE token_hash = ?
		      UNION ALL
		      SELECT * FROM judge_api_token WHERE prev_token_hash = ?) t
		WHERE kind = ? AND revoked_at IS NULL
		LIMIT 1`,
		h, tokenLastUsedResolution.Microseconds(), h, h, kind).Scan(&t.ID, &t.Kind, &t.Name, &types, &t.ConsumerGroup, &limRate, &limBurst, &current, &expired, &prevLive, &stale)
	if errors.Is(err, sql.ErrNoRows) {
		return TokenIdentity{}, s.unknownSecret(ctx, kind, h)
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
	t.SubmissionTypes = parseTypeSet(types)
	if t.Kind != TokenBusiness {
		t.ConsumerGroup = ""
	} else {
		t.RateLimit = rateLimitOf(limRate, limBurst)
	}
	if stale {
		// Best effort: a failed bookkeeping write must not refuse the caller.
		_, _ = s.db.Pool.ExecContext(ctx, `UPDATE judge_api_token SET last_used_at = NOW(6)
			WHERE id = ? AND (last_used_at IS NULL OR last_used_at < NOW(6) - INTERVAL ? MICROSECOND)`,
			t.ID, tokenLastUsedResolution.Microseconds())
	}
	return t, nil
}

// unknownSecret answers a secret that is neither a live token's current
// nor its previous one: TOKEN_EXPIRED when its token had it — a revoked
// token's current or previous secret, or one a rotation retired (however
// many rotations ago, revoked or not) — and UNAUTHENTICATED when no token
// of the kind ever had it. Each branch is one lookup of a unique key.
func (s *core) unknownSecret(ctx context.Context, kind TokenKind, h []byte) error {
	var name string
	var revoked bool
	err := s.db.Pool.QueryRowContext(ctx, `
		SELECT name, revoked FROM (
		  SELECT t.name, t.revoked_at IS NOT NULL AS revoked, t.kind FROM judge_api_token_retired r
		    JOIN judge_api_token t ON t.id = r.token_id WHERE r.token_hash = ?
		  UNION ALL
		  SELECT name, TRUE, kind FROM judge_api_token WHERE token_hash = ? AND revoked_at IS NOT NULL
		  UNION ALL
		  SELECT name, TRUE, kind FROM judge_api_token WHERE prev_token_hash = ? AND revoked_at IS NOT NULL) x
		WHERE kind = ?
		LIMIT 1`, h, h, h, kind).Scan(&name, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("token: %w", ErrUnauthenticated)
	}
	if err != nil {
		return fmt.Errorf("store: authenticate token: %w", err)
	}
	if revoked {
		return fmt.Errorf("%s token %q was revoked: %w", kind, name, ErrTokenExpired)
	}
	return fmt.Errorf("%s token %q: this secret was replaced by a rotation and its overlap ended: %w", kind, name, ErrTokenExpired)
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
func (s *Tokens) RotateToken(ctx context.Context, spec RotateSpec) (string, error) {
	if err := validKind(spec.Kind); err != nil {
		return "", err
	}
	if spec.Overlap < 0 || spec.Overlap > TokenMaxOverlap {
		return "", jobdb.Invalid("overlap", "must be 0..%s", TokenMaxOverlap)
	}
	if spec.ExpiresIn < 0 || spec.ExpiresIn > TokenMaxLifetime {
		return "", jobdb.Invalid("expiresIn", "must be 0 (keep) up to %s", TokenMaxLifetime)
	}
	tok, hash := newSecret(tokenPrefix(spec.Kind))
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var id int64
		var prev []byte
		err := tx.QueryRowContext(ctx, `SELECT id, prev_token_hash FROM judge_api_token
			WHERE kind = ? AND name = ? AND revoked_at IS NULL FOR UPDATE`, spec.Kind, spec.Name).Scan(&id, &prev)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("no live %s token named %q: %w", spec.Kind, spec.Name, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: rotate token: %w", err)
		}
		// The previous secret, if any, leaves the row now (even inside its
		// overlap: at most two secrets are valid); it is kept as retired
		// so it answers TOKEN_EXPIRED, not "never issued".
		if prev != nil {
			if _, err := tx.ExecContext(ctx, `INSERT IGNORE INTO judge_api_token_retired (token_hash, token_id) VALUES (?, ?)`,
				prev, id); err != nil {
				return fmt.Errorf("store: rotate token: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE judge_api_token
			SET prev_token_hash = token_hash, prev_valid_until = NOW(6) + INTERVAL ? MICROSECOND,
			    token_hash = ?, rotated_at = NOW(6),
			    expires_at = IF(? > 0, NOW(6) + INTERVAL ? MICROSECOND, expires_at)
			WHERE id = ?`,
			spec.Overlap.Microseconds(), hash, spec.ExpiresIn.Microseconds(), spec.ExpiresIn.Microseconds(), id); err != nil {
			return fmt.Errorf("store: rotate token: %w", err)
		}
		return jobdb.Audit(ctx, tx, auditActorCLI, "token.rotate", 0, 0, "", map[string]any{"kind": spec.Kind, "name": spec.Name,
			"overlapSeconds": int64(spec.Overlap / time.Second), "expiresInSeconds": int64(spec.ExpiresIn / time.Second)})
	})
	if err != nil {
		return "", err
	}
	return tok, nil
}

// RevokeToken refuses a token (every secret of it) from now on; it reports
// whether one was live. A business token leaves its consumer group in the
// same transaction: the group stops taking the types only it could see.
func (s *Tokens) RevokeToken(ctx context.Context, kind TokenKind, name string) (bool, error) {
	return s.RevokeTokenAs(ctx, kind, name, "", "")
}

// RevokeTokenAs revokes like RevokeToken, recording actor (the CLI when
// empty) and reason in the audit log (token.revoke).
func (s *Tokens) RevokeTokenAs(ctx context.Context, kind TokenKind, name, actor, reason string) (bool, error) {
	var live bool
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		live = false
		var group string
		err := tx.QueryRowContext(ctx, `SELECT consumer_group FROM judge_api_token
			WHERE kind = ? AND name = ? AND revoked_at IS NULL`, kind, name).Scan(&group)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("store: revoke token: %w", err)
		}
		if kind == TokenBusiness {
			// Lock order: consumer group, then its tokens (as IssueToken).
			if err := lockConsumerGroup(ctx, tx, group); err != nil {
				return err
			}
		}
		r, err := tx.ExecContext(ctx,
			`UPDATE judge_api_token SET revoked_at = NOW(6) WHERE kind = ? AND name = ? AND revoked_at IS NULL`, kind, name)
		if err != nil {
			return fmt.Errorf("store: revoke token: %w", err)
		}
		n, _ := r.RowsAffected()
		if live = n == 1; !live {
			return nil
		}
		if err := jobdb.Audit(ctx, tx, cmp.Or(actor, auditActorCLI), "token.revoke", 0, 0, reason, map[string]any{"kind": kind, "name": name}); err != nil {
			return err
		}
		if kind == TokenBusiness {
			return refreshConsumerGroup(ctx, tx, group)
		}
		return nil
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
	// SubmissionTypes scopes a business token (absent: every type).
	SubmissionTypes []string `json:"submissionTypes,omitempty"`
	// ConsumerGroup is a business token's consumer group.
	ConsumerGroup string `json:"consumerGroup,omitempty"`
	// RateLimit is a business token's own request budget (absent: the
	// server's default).
	RateLimit *ratelimit.Limit `json:"rateLimit,omitempty"`
}

// ListTokens lists tokens (of one kind, or all when kind is ""), by kind
// and name; states are judged on the database clock.
func (s *Tokens) ListTokens(ctx context.Context, kind TokenKind) ([]TokenInfo, error) {
	if kind != "" {
		if err := validKind(kind); err != nil {
			return nil, err
		}
	}
	out, err := jobdb.QueryAll(ctx, s.db.Pool, func(rows jobdb.RowScanner) (TokenInfo, error) {
		var t TokenInfo
		var lastUsed, expires, rotated, prevUntil, revoked sql.NullTime
		var state string
		var types sql.NullString
		var limRate sql.NullFloat64
		var limBurst sql.NullInt64
		err := rows.Scan(&t.ID, &t.Kind, &t.Name, &t.CreatedAt, &lastUsed, &expires, &rotated, &prevUntil, &revoked, &state,
			&types, &t.ConsumerGroup, &limRate, &limBurst)
		t.State = state
		t.SubmissionTypes = parseTypeSet(types)
		if t.Kind != TokenBusiness {
			t.ConsumerGroup = ""
		} else {
			t.RateLimit = rateLimitOf(limRate, limBurst)
		}
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
	                ELSE 'ACTIVE' END,
	           submission_types, consumer_group, rate_limit_rate, rate_limit_burst
	    FROM judge_api_token WHERE ? = '' OR kind = ? ORDER BY kind, name`, kind, kind)
	if err != nil {
		return nil, fmt.Errorf("store: list tokens: %w", err)
	}
	return out, nil
}

// SetTokenRateLimit sets a live business token's own request budget; nil
// returns it to the server's default. It takes effect on every replica at
// the token's next request, and is audited (token.rate_limit).
func (s *Tokens) SetTokenRateLimit(ctx context.Context, name string, lim *ratelimit.Limit, actor string) error {
	if err := checkRateLimit(TokenBusiness, lim); err != nil {
		return err
	}
	rateCol, burstCol := rateLimitColumns(lim)
	return s.db.InTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE judge_api_token SET rate_limit_rate = ?, rate_limit_burst = ?
			WHERE kind = ? AND name = ? AND revoked_at IS NULL`, rateCol, burstCol, TokenBusiness, name)
		if err != nil {
			return fmt.Errorf("store: set token rate limit: %w", err)
		}
		if n, _ := r.RowsAffected(); n == 0 {
			// RowsAffected counts changed rows: tell "unchanged" from "absent".
			var one int
			err := tx.QueryRowContext(ctx, `SELECT 1 FROM judge_api_token WHERE kind = ? AND name = ? AND revoked_at IS NULL`,
				TokenBusiness, name).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("no live business token named %q: %w", name, ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("store: set token rate limit: %w", err)
			}
		}
		return jobdb.Audit(ctx, tx, cmp.Or(actor, auditActorCLI), "token.rate_limit", 0, 0, "",
			map[string]any{"kind": TokenBusiness, "name": name, "rateLimit": rateLimitDetail(lim)})
	})
}

// checkRateLimit refuses a limit on an admin token and a bad limit,
// naming the field (rateLimit.rate, rateLimit.burst).
func checkRateLimit(kind TokenKind, lim *ratelimit.Limit) error {
	if lim == nil {
		return nil
	}
	if kind != TokenBusiness {
		return jobdb.Invalid("rateLimit", "only business tokens are rate limited")
	}
	err := lim.Validate()
	var fe *ratelimit.FieldError
	if !errors.As(err, &fe) {
		return nil
	}
	// The first field is named; the message says every problem.
	problem := fe.Msg
	if errs := err.(interface{ Unwrap() []error }).Unwrap(); len(errs) > 1 {
		problem = strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	return jobdb.Invalid("rateLimit."+fe.Field, "%s", problem)
}

func rateLimitColumns(lim *ratelimit.Limit) (rate, burst any) {
	if lim == nil {
		return nil, nil
	}
	return lim.Rate, lim.Burst
}

func rateLimitOf(rate sql.NullFloat64, burst sql.NullInt64) *ratelimit.Limit {
	if !rate.Valid || !burst.Valid {
		return nil
	}
	return &ratelimit.Limit{Rate: rate.Float64, Burst: int(burst.Int64)}
}

// rateLimitDetail is a limit as the audit log records it ("default": nil).
func rateLimitDetail(lim *ratelimit.Limit) any {
	if lim == nil {
		return "default"
	}
	return map[string]any{"rate": lim.Rate, "burst": lim.Burst}
}
