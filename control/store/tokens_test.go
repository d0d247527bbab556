package store_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

func TestTokenExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok, err := b.Store.Tokens().IssueToken(b.Ctx, store.TokenSpec{Kind: store.TokenBusiness, Name: "short", ExpiresIn: time.Hour})
	require.NoError(t, err)
	_, err = b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, tok)
	require.NoError(t, err, "valid before its expiry")

	// Move the expiry into the past on the database clock.
	_, err = b.DB.Exec(`UPDATE judge_api_token SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE name = 'short'`)
	require.NoError(t, err)
	_, err = b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, tok)
	require.ErrorIs(t, err, store.ErrTokenExpired)
	require.ErrorIs(t, err, store.ErrUnauthenticated, "an expired token is still unauthenticated for callers that only know that class")

	_, err = b.Store.Tokens().IssueToken(b.Ctx, store.TokenSpec{Kind: store.TokenBusiness, Name: "neg", ExpiresIn: -time.Second})
	require.ErrorIs(t, err, store.ErrValidation)
	_, err = b.Store.Tokens().IssueToken(b.Ctx, store.TokenSpec{Kind: "ROOT", Name: "x"})
	require.ErrorIs(t, err, store.ErrValidation)
}

func TestTokenRotationKeepsIdentityAndOverlaps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old, err := b.Store.Tokens().CreateToken(b.Ctx, store.TokenBusiness, "oj")
	require.NoError(t, err)
	before, err := b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, old)
	require.NoError(t, err)

	// An idempotency key recorded under the old secret.
	req := store.EnqueueRequest{SubmissionType: "ALGO", SubmissionID: "r1", Language: "cpp", Source: "int main(){}", ManifestID: b.Manifest}
	first, err := b.Store.Jobs().EnqueueIdempotent(b.Ctx, before.ID, "key-1", req)
	require.NoError(t, err)

	fresh, err := b.Store.Tokens().RotateToken(b.Ctx, store.RotateSpec{Kind: store.TokenBusiness, Name: "oj", Overlap: time.Hour})
	require.NoError(t, err)
	require.NotEqual(t, old, fresh)
	for _, secret := range []string{old, fresh} {
		id, err := b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, secret)
		require.NoError(t, err, "both secrets are valid during the overlap")
		require.Equal(t, before, id, "one token, one identity")
	}
	// The key survives the rotation: the retry under the new secret gets the same job.
	after, err := b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, fresh)
	require.NoError(t, err)
	again, err := b.Store.Jobs().EnqueueIdempotent(b.Ctx, after.ID, "key-1", req)
	require.NoError(t, err)
	require.Equal(t, first.JobID, again.JobID)

	// The overlap ends: the old secret is refused as expired, the new one works.
	_, err = b.DB.Exec(`UPDATE judge_api_token SET prev_valid_until = NOW(6) - INTERVAL 1 SECOND WHERE name = 'oj'`)
	require.NoError(t, err)
	_, err = b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, old)
	require.ErrorIs(t, err, store.ErrTokenExpired)
	_, err = b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, fresh)
	require.NoError(t, err)

	// Rotating again while an overlap runs ends the oldest secret at once:
	// never more than two secrets.
	third, err := b.Store.Tokens().RotateToken(b.Ctx, store.RotateSpec{Kind: store.TokenBusiness, Name: "oj", Overlap: time.Hour})
	require.NoError(t, err)
	fourth, err := b.Store.Tokens().RotateToken(b.Ctx, store.RotateSpec{Kind: store.TokenBusiness, Name: "oj", Overlap: time.Hour})
	require.NoError(t, err)
	_, err = b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, fresh)
	require.ErrorIs(t, err, store.ErrTokenExpired, "retired by the second rotation: expired, not unknown")
	for _, s := range []string{third, fourth} {
		_, err = b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, s)
		require.NoError(t, err)
	}

	// Overlap 0: the old secret stops now. Revoke stops every secret.
	fifth, err := b.Store.Tokens().RotateToken(b.Ctx, store.RotateSpec{Kind: store.TokenBusiness, Name: "oj"})
	require.NoError(t, err)
	_, err = b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, fourth)
	require.ErrorIs(t, err, store.ErrTokenExpired)
	live, err := b.Store.Tokens().RevokeToken(b.Ctx, store.TokenBusiness, "oj")
	require.NoError(t, err)
	require.True(t, live)
	_, err = b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, fifth)
	require.ErrorIs(t, err, store.ErrTokenExpired, "a revoked token's secret is one it no longer accepts")
	require.ErrorContains(t, err, "revoked")

	_, err = b.Store.Tokens().RotateToken(b.Ctx, store.RotateSpec{Kind: store.TokenBusiness, Name: "oj"})
	require.ErrorIs(t, err, store.ErrNotFound, "a revoked token cannot be rotated back to life")
	_, err = b.Store.Tokens().RotateToken(b.Ctx, store.RotateSpec{Kind: store.TokenBusiness, Name: "x", Overlap: store.TokenMaxOverlap + time.Second})
	require.ErrorIs(t, err, store.ErrValidation)
}

func TestListTokensShowsStatesNeverSecrets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	adm, err := b.Store.Tokens().CreateToken(b.Ctx, store.TokenAdmin, "ops")
	require.NoError(t, err)
	_, err = b.Store.Tokens().IssueToken(b.Ctx, store.TokenSpec{Kind: store.TokenBusiness, Name: "expiring", ExpiresIn: 48 * time.Hour})
	require.NoError(t, err)
	_, err = b.Store.Tokens().CreateToken(b.Ctx, store.TokenBusiness, "gone")
	require.NoError(t, err)
	_, err = b.Store.Tokens().RevokeToken(b.Ctx, store.TokenBusiness, "gone")
	require.NoError(t, err)
	_, err = b.Store.Tokens().CreateToken(b.Ctx, store.TokenBusiness, "rolling")
	require.NoError(t, err)
	_, err = b.Store.Tokens().RotateToken(b.Ctx, store.RotateSpec{Kind: store.TokenBusiness, Name: "rolling", Overlap: time.Hour})
	require.NoError(t, err)
	_, err = b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenAdmin, adm)
	require.NoError(t, err)

	all, err := b.Store.Tokens().ListTokens(b.Ctx, "")
	require.NoError(t, err)
	byName := map[string]store.TokenInfo{}
	for _, ti := range all {
		byName[ti.Name] = ti
	}
	require.Len(t, byName, 4)
	require.Equal(t, store.TokenActive, byName["ops"].State)
	require.NotNil(t, byName["ops"].LastUsedAt, "authentication records the last use")
	require.Nil(t, byName["expiring"].LastUsedAt)
	require.NotNil(t, byName["expiring"].ExpiresAt)
	require.WithinDuration(t, byName["expiring"].CreatedAt.Add(48*time.Hour), *byName["expiring"].ExpiresAt, time.Second)
	require.Equal(t, store.TokenRevoked, byName["gone"].State)
	require.Equal(t, store.TokenRotating, byName["rolling"].State)
	require.NotNil(t, byName["rolling"].PreviousValidUntil)

	_, err = b.DB.Exec(`UPDATE judge_api_token SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE name = 'expiring'`)
	require.NoError(t, err)
	biz, err := b.Store.Tokens().ListTokens(b.Ctx, store.TokenBusiness)
	require.NoError(t, err)
	require.Len(t, biz, 3)
	for _, ti := range biz {
		if ti.Name == "expiring" {
			require.Equal(t, store.TokenExpired, ti.State)
		}
	}
	raw, err := json.Marshal(all)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "kat_", "no secret in a listing")
	require.NotContains(t, string(raw), "hash")
}

func TestTokensAreKindBound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	adm, err := b.Store.Tokens().CreateToken(b.Ctx, store.TokenAdmin, "ops")
	require.NoError(t, err)
	biz, err := b.Store.Tokens().CreateToken(b.Ctx, store.TokenBusiness, "oj")
	require.NoError(t, err)
	_, err = b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenAdmin, adm)
	require.NoError(t, err)
	_, err = b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenAdmin, biz)
	require.ErrorIs(t, err, store.ErrUnauthenticated)
	_, err = b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, adm)
	require.ErrorIs(t, err, store.ErrUnauthenticated)
	id, err := b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, biz)
	require.NoError(t, err)
	require.Equal(t, "oj", id.Name)
}

func TestTokenChangesAreAudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok, err := b.Store.Tokens().IssueToken(b.Ctx, store.TokenSpec{Kind: store.TokenAdmin, Name: "ops", ExpiresIn: time.Hour})
	require.NoError(t, err)
	_, err = b.Store.Tokens().RotateToken(b.Ctx, store.RotateSpec{Kind: store.TokenAdmin, Name: "ops", Overlap: time.Minute})
	require.NoError(t, err)
	live, err := b.Store.Tokens().RevokeToken(b.Ctx, store.TokenAdmin, "ops")
	require.NoError(t, err)
	require.True(t, live)
	live, err = b.Store.Tokens().RevokeToken(b.Ctx, store.TokenAdmin, "ops")
	require.NoError(t, err)
	require.False(t, live, "revoking again changes nothing, and audits nothing")
	_, err = b.Store.Tokens().CreateToken(b.Ctx, store.TokenAdmin, "ops")
	require.ErrorIs(t, err, store.ErrConflict, "a refused create audits nothing")

	var actions []string
	for _, e := range mustAudit(t, b, store.AuditFilter{Actor: "kece-control"}) {
		actions = append(actions, e.Action)
		require.Contains(t, string(e.Detail), `"name":"ops"`)
		require.NotContains(t, string(e.Detail), tok, "the secret is never audited")
	}
	require.Equal(t, []string{"token.revoke", "token.rotate", "token.create"}, actions)
}

func mustAudit(t *testing.T, b *testBundle, f store.AuditFilter) []store.AuditEntry {
	t.Helper()
	out, err := b.Store.AuditLog().ListAudit(b.Ctx, f)
	require.NoError(t, err)
	return out
}

// Every secret a token stopped accepting answers TOKEN_EXPIRED and a secret
// it never had UNAUTHENTICATED, whatever the order of rotations: no
// overlap, an overlap that ends, a second rotation during the first one's
// overlap (which used to push the oldest secret out of the row, answered
// as never issued), chains of both, and the token's own expiry.
func TestRetiredSecretsAnswerTokenExpiredInEveryOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type step struct {
		overlap  time.Duration
		endsOver bool // the overlap is moved into the past after this rotation
	}
	for name, steps := range map[string][]step{
		"no overlap":                         {{overlap: 0}},
		"overlap ends":                       {{overlap: time.Hour, endsOver: true}},
		"second rotation during the overlap": {{overlap: time.Hour}, {overlap: time.Hour}},
		"overlap, then none":                 {{overlap: time.Hour}, {overlap: 0}},
		"none, then overlap":                 {{overlap: 0}, {overlap: time.Hour}},
		"three in one overlap":               {{overlap: time.Hour}, {overlap: time.Hour}, {overlap: time.Hour}},
		"ended overlap, then two more":       {{overlap: time.Hour, endsOver: true}, {overlap: time.Hour}, {overlap: 0}},
	} {
		t.Run(name, func(t *testing.T) {
			tokName := fmt.Sprintf("tok-%d", b.Seq.Add(1))
			first, err := b.Store.Tokens().CreateToken(b.Ctx, store.TokenBusiness, tokName)
			require.NoError(t, err)
			secrets := []string{first}
			live := map[string]bool{first: true}
			for _, st := range steps {
				s, err := b.Store.Tokens().RotateToken(b.Ctx, store.RotateSpec{Kind: store.TokenBusiness, Name: tokName, Overlap: st.overlap})
				require.NoError(t, err)
				prev := secrets[len(secrets)-1]
				live = map[string]bool{s: true}
				if st.overlap > 0 && !st.endsOver {
					live[prev] = true
				}
				if st.endsOver {
					_, err = b.DB.Exec(`UPDATE judge_api_token SET prev_valid_until = NOW(6) - INTERVAL 1 SECOND WHERE name = ?`, tokName)
					require.NoError(t, err)
				}
				secrets = append(secrets, s)
			}
			for i, s := range secrets {
				_, err := b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, s)
				if live[s] {
					require.NoError(t, err, "secret %d", i)
					continue
				}
				require.ErrorIs(t, err, store.ErrTokenExpired, "secret %d of %d", i, len(secrets))
			}
			never, _ := b.Store.Tokens().CreateToken(b.Ctx, store.TokenAdmin, tokName+"-admin")
			for _, s := range []string{"kbt_never-issued-secret", never} {
				_, err := b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, s)
				require.ErrorIs(t, err, store.ErrUnauthenticated)
				require.NotErrorIs(t, err, store.ErrTokenExpired, "a secret the token never had")
			}
			// The token's own expiry: every secret it had is expired.
			_, err = b.DB.Exec(`UPDATE judge_api_token SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE name = ?`, tokName)
			require.NoError(t, err)
			for i, s := range secrets {
				_, err := b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, s)
				require.ErrorIs(t, err, store.ErrTokenExpired, "secret %d after the token expired", i)
			}
			// Revoked: still every secret it had, and still only those.
			_, err = b.Store.Tokens().RevokeToken(b.Ctx, store.TokenBusiness, tokName)
			require.NoError(t, err)
			for i, s := range secrets {
				_, err := b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, s)
				require.ErrorIs(t, err, store.ErrTokenExpired, "secret %d after the token was revoked", i)
			}
			for _, s := range []string{"kbt_never-issued-secret", never} {
				_, err := b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, s)
				require.NotErrorIs(t, err, store.ErrTokenExpired, "a secret the token never had, after the revoke")
			}
		})
	}
}
