package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

func TestTokensAreKindBound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	adm, err := b.store.CreateToken(b.ctx, store.TokenAdmin, "ops")
	require.NoError(t, err)
	biz, err := b.store.CreateToken(b.ctx, store.TokenBusiness, "oj")
	require.NoError(t, err)
	_, err = b.store.AuthenticateToken(b.ctx, store.TokenAdmin, adm)
	require.NoError(t, err)
	_, err = b.store.AuthenticateToken(b.ctx, store.TokenAdmin, biz)
	require.ErrorIs(t, err, store.ErrUnauthenticated)
	_, err = b.store.AuthenticateToken(b.ctx, store.TokenBusiness, adm)
	require.ErrorIs(t, err, store.ErrUnauthenticated)
	id, err := b.store.AuthenticateToken(b.ctx, store.TokenBusiness, biz)
	require.NoError(t, err)
	require.Equal(t, "oj", id.Name)
}
