package atrest_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/atrest"
)

func mustKey(t *testing.T) atrest.Key {
	t.Helper()
	k, err := atrest.ParseKey(atrest.NewKeyText())
	require.NoError(t, err)
	return k
}

func TestSealOpenRoundTripWithFreshNonces(t *testing.T) {
	t.Parallel()
	ring := atrest.NewKeyring(mustKey(t))
	id1, s1, err := ring.Seal([]byte("whsec_secret"), []byte("group-a"))
	require.NoError(t, err)
	id2, s2, err := ring.Seal([]byte("whsec_secret"), []byte("group-a"))
	require.NoError(t, err)
	require.Equal(t, id1, id2)
	require.Equal(t, ring.CurrentID(), id1)
	require.NotEqual(t, s1, s2, "each value has its own nonce")
	require.False(t, bytes.Contains(s1, []byte("whsec_secret")))
	plain, err := ring.Open(id1, s1, []byte("group-a"))
	require.NoError(t, err)
	require.Equal(t, "whsec_secret", string(plain))
}

func TestOpenRefusesMovedTamperedOrUnknown(t *testing.T) {
	t.Parallel()
	ring := atrest.NewKeyring(mustKey(t))
	id, sealed, err := ring.Seal([]byte("value"), []byte("group-a"))
	require.NoError(t, err)
	_, err = ring.Open(id, sealed, []byte("group-b"))
	require.ErrorIs(t, err, atrest.ErrCorrupt, "a value copied to another group's row does not open")
	bad := bytes.Clone(sealed)
	bad[len(bad)-1] ^= 1
	_, err = ring.Open(id, bad, []byte("group-a"))
	require.ErrorIs(t, err, atrest.ErrCorrupt)
	_, err = ring.Open(id, sealed[:5], []byte("group-a"))
	require.ErrorIs(t, err, atrest.ErrCorrupt)
	other := atrest.NewKeyring(mustKey(t))
	_, err = other.Open(id, sealed, []byte("group-a"))
	require.ErrorIs(t, err, atrest.ErrUnknownKey, "a lost key is named as such, not as corruption")
	var none *atrest.Keyring
	_, _, err = none.Seal([]byte("x"), nil)
	require.ErrorIs(t, err, atrest.ErrNoKey)
	_, err = none.Open(id, sealed, nil)
	require.ErrorIs(t, err, atrest.ErrNoKey)
}

func TestRotationOldKeyStillOpens(t *testing.T) {
	t.Parallel()
	oldKey, newKey := mustKey(t), mustKey(t)
	id, sealed, err := atrest.NewKeyring(oldKey).Seal([]byte("v"), nil)
	require.NoError(t, err)
	ring := atrest.NewKeyring(newKey, oldKey)
	require.Equal(t, newKey.ID(), ring.CurrentID())
	require.True(t, ring.Has(oldKey.ID()))
	plain, err := ring.Open(id, sealed, nil)
	require.NoError(t, err)
	require.Equal(t, "v", string(plain))
	id2, _, err := ring.Seal([]byte("v"), nil)
	require.NoError(t, err)
	require.Equal(t, newKey.ID(), id2, "the new key seals")
}

func TestParseKeyNamesTheProblem(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]string{
		"nope":                            "must start with",
		atrest.KeyPrefix + "!!!":          "not valid base64",
		atrest.KeyPrefix + "AAAAAAAAAAA=": "want 32",
	} {
		_, err := atrest.ParseKey(text)
		require.Error(t, err, text)
		require.True(t, strings.Contains(err.Error(), want), "%q: %v", text, err)
	}
	text := atrest.NewKeyText()
	a, err := atrest.ParseKey(text + "\n")
	require.NoError(t, err)
	b, err := atrest.ParseKey(text)
	require.NoError(t, err)
	require.Equal(t, a.ID(), b.ID(), "the id is derived from the key")
	require.Len(t, a.ID(), 16)
	require.False(t, errors.Is(err, atrest.ErrNoKey))
}
