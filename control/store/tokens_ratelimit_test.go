package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/ratelimit"
	"github.com/kece-oj/kece/control/store"
)

// A business token's own rate limit is stored with it, read back at every
// authentication (so a change reaches every replica at the next request),
// listed, audited, and NULL (the server's default) until set.
func TestTokenRateLimitIsStoredReadAndAudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	own := &ratelimit.Limit{Rate: 2.5, Burst: 7}
	tok, err := b.Store.Tokens().IssueToken(b.Ctx, store.TokenSpec{Kind: store.TokenBusiness, Name: "limited", RateLimit: own})
	require.NoError(t, err)
	plain, err := b.Store.Tokens().CreateToken(b.Ctx, store.TokenBusiness, "plain")
	require.NoError(t, err)

	id, err := b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, tok)
	require.NoError(t, err)
	require.Equal(t, own, id.RateLimit)
	id, err = b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, plain)
	require.NoError(t, err)
	require.Nil(t, id.RateLimit, "no limit of its own: the server's default")

	// Set, then back to the default.
	require.NoError(t, b.Store.Tokens().SetTokenRateLimit(b.Ctx, "plain", &ratelimit.Limit{}, "admin:ops#1"))
	id, err = b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, plain)
	require.NoError(t, err)
	require.Equal(t, &ratelimit.Limit{}, id.RateLimit, "rate 0: unlimited, kept apart from the default")
	require.NoError(t, b.Store.Tokens().SetTokenRateLimit(b.Ctx, "plain", &ratelimit.Limit{}, "admin:ops#1"), "setting the same limit again is no error")
	require.NoError(t, b.Store.Tokens().SetTokenRateLimit(b.Ctx, "limited", nil, "admin:ops#1"))
	id, err = b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, tok)
	require.NoError(t, err)
	require.Nil(t, id.RateLimit)

	toks, err := b.Store.Tokens().ListTokens(b.Ctx, store.TokenBusiness)
	require.NoError(t, err)
	require.Len(t, toks, 2)
	require.Nil(t, toks[0].RateLimit, "limited is back on the default")
	require.Equal(t, &ratelimit.Limit{}, toks[1].RateLimit)

	entries := mustAudit(t, b, store.AuditFilter{Action: "token.rate_limit"})
	require.Len(t, entries, 3)
	require.Contains(t, string(entries[0].Detail), `"rateLimit":"default"`)
	require.Contains(t, string(entries[1].Detail), `"rateLimit":{"burst":0,"rate":0}`)
	require.Equal(t, "admin:ops#1", entries[0].Actor)
}

func TestTokenRateLimitRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.Store.Tokens().CreateToken(b.Ctx, store.TokenBusiness, "oj")
	require.NoError(t, err)
	for _, tc := range []struct {
		lim   ratelimit.Limit
		field string
	}{
		{ratelimit.Limit{Rate: -1, Burst: 1}, "rateLimit.rate"},
		{ratelimit.Limit{Rate: 5, Burst: 0}, "rateLimit.burst"},
		{ratelimit.Limit{Rate: 0, Burst: 3}, "rateLimit.burst"},
	} {
		err := b.Store.Tokens().SetTokenRateLimit(b.Ctx, "oj", &tc.lim, "")
		var ve *store.ValidationError
		require.ErrorAs(t, err, &ve, "%+v", tc.lim)
		require.Equal(t, tc.field, ve.Field)
		_, err = b.Store.Tokens().IssueToken(b.Ctx, store.TokenSpec{Kind: store.TokenBusiness, Name: "new", RateLimit: &tc.lim})
		require.ErrorAs(t, err, &ve)
		require.Equal(t, tc.field, ve.Field)
	}
	_, err = b.Store.Tokens().IssueToken(b.Ctx, store.TokenSpec{Kind: store.TokenAdmin, Name: "ops", RateLimit: &ratelimit.Limit{Rate: 1, Burst: 1}})
	require.ErrorIs(t, err, store.ErrValidation, "admin tokens are not rate limited")
	err = b.Store.Tokens().SetTokenRateLimit(b.Ctx, "nobody", nil, "")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = b.Store.Tokens().RevokeToken(b.Ctx, store.TokenBusiness, "oj")
	require.NoError(t, err)
	err = b.Store.Tokens().SetTokenRateLimit(b.Ctx, "oj", nil, "")
	require.ErrorIs(t, err, store.ErrNotFound, "a revoked token takes no limit")
}
