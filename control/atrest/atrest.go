// Package atrest encrypts secrets the control plane must keep in MySQL and
// read back (the webhook groups' signing secrets): AES-256-GCM from the
// standard library, a fresh random nonce per value, and the id of the key
// stored beside each value, so a key can be rotated while values sealed
// with the previous one are still read.
//
// A Keyring has one current key, which seals, and any number of older
// keys, which only open. The key itself lives in a file outside the
// database (KECE_WEBHOOK_KEY_FILE); a database dump alone reveals no
// secret. Key text is "kecekey_" + base64 of 32 random bytes (NewKeyText);
// its id is derived from the key (the first 8 bytes of a SHA-256 over a
// label and the key, hex), so the id names the key without revealing it and
// two files holding the same key agree on it.
package atrest

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeyPrefix marks a key in its text form.
const KeyPrefix = "kecekey_"

// keyBytes is the AES-256 key length.
const keyBytes = 32

var (
	// ErrNoKey: no key is configured, so nothing can be sealed or opened.
	ErrNoKey = errors.New("no encryption key configured")
	// ErrUnknownKey: the value was sealed with a key this keyring does not
	// hold (lost, or not yet given to this replica).
	ErrUnknownKey = errors.New("sealed with a key this replica does not have")
	// ErrCorrupt: the value does not open with the key it names (tampered,
	// moved to another row, or a different key with a colliding id).
	ErrCorrupt = errors.New("sealed value does not open with its key")
)

// Key is one AES-256-GCM key and its id.
type Key struct {
	id   string
	aead cipher.AEAD
}

// ID is the key's id, stored beside every value it seals.
func (k Key) ID() string { return k.id }

// ParseKey reads a key in its text form (surrounding space is ignored).
func ParseKey(text string) (Key, error) {
	text = strings.TrimSpace(text)
	rest, ok := strings.CutPrefix(text, KeyPrefix)
	if !ok {
		return Key{}, fmt.Errorf("encryption key: must start with %q (kece-control webhook-key new writes one)", KeyPrefix)
	}
	raw, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return Key{}, fmt.Errorf("encryption key: not valid base64 after %q", KeyPrefix)
	}
	if len(raw) != keyBytes {
		return Key{}, fmt.Errorf("encryption key: %d bytes; want %d (kece-control webhook-key new writes one)", len(raw), keyBytes)
	}
	return newKey(raw)
}

func newKey(raw []byte) (Key, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return Key{}, fmt.Errorf("encryption key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return Key{}, fmt.Errorf("encryption key: %w", err)
	}
	sum := sha256.Sum256(append([]byte("kece at-rest key id\x00"), raw...))
	return Key{id: hex.EncodeToString(sum[:8]), aead: aead}, nil
}

// NewKeyText returns a fresh random key in its text form.
func NewKeyText() string {
	raw := make([]byte, keyBytes)
	if _, err := rand.Read(raw); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return KeyPrefix + base64.StdEncoding.EncodeToString(raw)
}

// Keyring seals with its current key and opens with any key it holds. A nil
// *Keyring holds no key: Seal and Open answer ErrNoKey.
type Keyring struct {
	current Key
	byID    map[string]Key
}

// NewKeyring returns a keyring that seals with current and also opens
// values sealed with any of old.
func NewKeyring(current Key, old ...Key) *Keyring {
	k := &Keyring{current: current, byID: map[string]Key{current.id: current}}
	for _, o := range old {
		if _, dup := k.byID[o.id]; !dup {
			k.byID[o.id] = o
		}
	}
	return k
}

// CurrentID is the id of the key that seals; "" for a nil keyring.
func (k *Keyring) CurrentID() string {
	if k == nil {
		return ""
	}
	return k.current.id
}

// Has reports whether the keyring can open values sealed with key id.
func (k *Keyring) Has(id string) bool {
	if k == nil {
		return false
	}
	_, ok := k.byID[id]
	return ok
}

// Seal encrypts plain with the current key and a fresh nonce. aad binds the
// value to where it is stored (the row's owner), so a sealed value copied
// elsewhere does not open. It returns the key id to store beside the value
// and nonce‖ciphertext‖tag.
func (k *Keyring) Seal(plain, aad []byte) (keyID string, sealed []byte, err error) {
	if k == nil {
		return "", nil, ErrNoKey
	}
	a := k.current.aead
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(plain)+a.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, fmt.Errorf("nonce: %w", err)
	}
	return k.current.id, a.Seal(nonce, nonce, plain, k.aad(k.current.id, aad)), nil
}

// Open decrypts a value sealed with key keyID and the same aad.
func (k *Keyring) Open(keyID string, sealed, aad []byte) ([]byte, error) {
	if k == nil {
		return nil, ErrNoKey
	}
	key, ok := k.byID[keyID]
	if !ok {
		return nil, fmt.Errorf("key %s: %w", keyID, ErrUnknownKey)
	}
	n := key.aead.NonceSize()
	if len(sealed) < n+key.aead.Overhead() {
		return nil, ErrCorrupt
	}
	plain, err := key.aead.Open(nil, sealed[:n], sealed[n:], k.aad(keyID, aad))
	if err != nil {
		return nil, ErrCorrupt
	}
	return plain, nil
}

// aad is the additional data authenticated with every value: the key id
// (so a value cannot be relabelled to another key) and the caller's.
func (*Keyring) aad(keyID string, aad []byte) []byte {
	return append([]byte(keyID+"\x00"), aad...)
}
