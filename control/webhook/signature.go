package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks (https://www.standardwebhooks.com/) headers. The
// signature is "v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." +
// body)>", several separated by spaces; any existing verifier of the
// specification checks it with the "whsec_…" form of the secret.
const (
	IDHeader                = "webhook-id"
	TimestampHeader         = "webhook-timestamp"
	StandardSignatureHeader = "webhook-signature"
)

// SignatureHeader is the pre-standard header "t=<unix>,v1=<hex HMAC over
// "<t>.<body>">", signed with the first secret. Deprecated: sent for one
// more release so existing receivers keep working while they move to the
// standard headers; verify new receivers with VerifyStandard.
const SignatureHeader = "X-Kece-Signature"

// SecretPrefix marks a secret in the Standard Webhooks form.
const SecretPrefix = "whsec_"

// Secret is one signing key. Its String form ("whsec_" + base64 of the key)
// is what a receiver configures; the zero value is not usable.
type Secret struct{ key []byte }

// ParseSecret reads one secret: "whsec_<base64 key>" (the standard form),
// or, for files written before the standard, any other text of at least
// MinSecretBytes bytes, whose bytes are the key as they always were (so
// the old header's signatures do not change). Either way String gives the
// whsec_ form receivers configure.
func ParseSecret(s string) (Secret, error) {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, SecretPrefix); ok {
		key, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return Secret{}, fmt.Errorf("webhook secret: %s… is not valid base64 after %q", SecretPrefix, SecretPrefix)
		}
		if len(key) < MinSecretBytes {
			return Secret{}, fmt.Errorf("webhook secret: the key is %d bytes; at least %d", len(key), MinSecretBytes)
		}
		return Secret{key: key}, nil
	}
	if len(s) < MinSecretBytes {
		return Secret{}, fmt.Errorf("webhook secret: shorter than %d bytes", MinSecretBytes)
	}
	return Secret{key: []byte(s)}, nil
}

// ParseSecrets reads one secret per non-empty line: the first is the
// current one, the others are being rotated in or out (every delivery is
// signed with each).
func ParseSecrets(text string) ([]Secret, error) {
	var out []Secret
	for i, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		s, err := ParseSecret(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, errors.New("webhook secret: none given")
	}
	if len(out) > MaxSecrets {
		return nil, fmt.Errorf("webhook secret: %d secrets; at most %d at once", len(out), MaxSecrets)
	}
	return out, nil
}

// NewSecret returns a fresh random 32-byte secret.
func NewSecret() Secret {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return Secret{key: key}
}

// String returns the whsec_ form. It is the secret itself: never log it.
func (s Secret) String() string { return SecretPrefix + base64.StdEncoding.EncodeToString(s.key) }

// SignStandard returns the webhook-signature value for a message: one
// "v1,<base64>" per secret, space separated.
func SignStandard(secrets []Secret, id string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(standardMAC(s.key, id, ts, body)))
	}
	return strings.Join(sigs, " ")
}

func standardMAC(key []byte, id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verification errors.
var (
	ErrSignatureMalformed = errors.New("webhook: signature header malformed")
	ErrSignatureMismatch  = errors.New("webhook: signature does not match")
	ErrSignatureExpired   = errors.New("webhook: signature timestamp outside tolerance")
)

// VerifyStandard checks a delivery for Go receivers as the specification
// says: the webhook-id, webhook-timestamp and webhook-signature headers,
// the raw body exactly as received, a timestamp within tolerance of now
// (bounding replays), and any v1 signature matching in constant time.
// Receivers in other languages use their Standard Webhooks library with
// secret.String().
func VerifyStandard(secret Secret, h http.Header, body []byte, tolerance time.Duration) error {
	return verifyStandardAt(secret, h, body, tolerance, time.Now())
}

func verifyStandardAt(secret Secret, h http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	id, ts, sigs := h.Get(IDHeader), h.Get(TimestampHeader), h.Get(StandardSignatureHeader)
	unix, err := strconv.ParseInt(ts, 10, 64)
	if id == "" || err != nil || sigs == "" {
		return ErrSignatureMalformed
	}
	if d := now.Sub(time.Unix(unix, 0)); d > tolerance || d < -tolerance {
		return ErrSignatureExpired
	}
	want := standardMAC(secret.key, id, ts, body)
	for _, sig := range strings.Fields(sigs) {
		version, b64, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue // other versions are for other verifiers
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrSignatureMismatch
}

// Sign returns the deprecated X-Kece-Signature value for body sent at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256(key, "<unix>.<body>")>".
func Sign(key []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + legacyMAC(key, ts, body)
}

func legacyMAC(key []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Verify checks the deprecated X-Kece-Signature header with a raw key (the
// bytes of a pre-standard secret file). Deprecated: use VerifyStandard.
func Verify(key []byte, header string, body []byte, tolerance time.Duration) error {
	return verifyAt(key, header, body, tolerance, time.Now())
}

func verifyAt(key []byte, header string, body []byte, tolerance time.Duration, now time.Time) error {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrSignatureMalformed
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrSignatureMalformed
	}
	if d := now.Sub(time.Unix(unix, 0)); d > tolerance || d < -tolerance {
		return ErrSignatureExpired
	}
	want := legacyMAC(key, ts, body)
	for _, sig := range sigs {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return ErrSignatureMismatch
}
