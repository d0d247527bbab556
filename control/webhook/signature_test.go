package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/webhook"
)

// independentVerify is the Standard Webhooks verification written from the
// specification, sharing no code with the package: decode the whsec_ key,
// HMAC-SHA256 over "id.timestamp.body", compare with each space-separated
// "v1,<base64>" entry, and bound the timestamp to five minutes.
func independentVerify(whsec string, h http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(whsec, "whsec_"))
	if err != nil {
		return err
	}
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || id == "" {
		return errors.New("missing id or timestamp")
	}
	if d := now.Unix() - sec; d > 300 || d < -300 {
		return errors.New("timestamp out of tolerance")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Split(h.Get("webhook-signature"), " ") {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return errors.New("no matching signature")
}

// The specification's published test vector: a receiver using any Standard
// Webhooks library accepts what this package signs.
func TestStandardWebhooksTestVector(t *testing.T) {
	t.Parallel()
	s, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	at := time.Unix(1614265330, 0)
	body := []byte(`{"test": 2432232314}`)
	sig := webhook.SignStandard([]webhook.Secret{s}, "msg_p5jXN8AQM9LWM0D4loKWxJek", at, body)
	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", sig)
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", sig)
	require.NoError(t, independentVerify("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", h, body, at))
}

func TestVerifyStandard(t *testing.T) {
	t.Parallel()
	body := []byte(`{"eventId":"1"}`)
	now := time.Now()
	headers := func(secrets []webhook.Secret, id string, at time.Time) http.Header {
		h := http.Header{}
		h.Set(webhook.IDHeader, id)
		h.Set(webhook.TimestampHeader, strconv.FormatInt(at.Unix(), 10))
		h.Set(webhook.StandardSignatureHeader, webhook.SignStandard(secrets, id, at, body))
		return h
	}
	h := headers(secrets, "1", now)
	require.Regexp(t, `^v1,[A-Za-z0-9+/]{43}=$`, h.Get(webhook.StandardSignatureHeader))
	require.NoError(t, webhook.VerifyStandard(secrets[0], h, body, time.Minute))
	require.NoError(t, independentVerify(secretText, h, body, now))
	require.ErrorIs(t, webhook.VerifyStandard(secrets[0], h, []byte(`{"eventId":"2"}`), time.Minute), webhook.ErrSignatureMismatch)
	other := webhook.NewSecret()
	require.ErrorIs(t, webhook.VerifyStandard(other, h, body, time.Minute), webhook.ErrSignatureMismatch)
	// The id is signed: replaying a body under another id fails.
	moved := h.Clone()
	moved.Set(webhook.IDHeader, "2")
	require.ErrorIs(t, webhook.VerifyStandard(secrets[0], moved, body, time.Minute), webhook.ErrSignatureMismatch)
	require.ErrorIs(t, webhook.VerifyStandard(secrets[0], headers(secrets, "1", now.Add(-10*time.Minute)), body, 5*time.Minute), webhook.ErrSignatureExpired)
	require.ErrorIs(t, webhook.VerifyStandard(secrets[0], headers(secrets, "1", now.Add(10*time.Minute)), body, 5*time.Minute), webhook.ErrSignatureExpired)
	for _, drop := range []string{webhook.IDHeader, webhook.TimestampHeader, webhook.StandardSignatureHeader} {
		bad := h.Clone()
		bad.Del(drop)
		require.ErrorIs(t, webhook.VerifyStandard(secrets[0], bad, body, time.Minute), webhook.ErrSignatureMalformed, drop)
	}

	// Two secrets (a rotation): one signature each; a receiver holding
	// either verifies.
	both := []webhook.Secret{secrets[0], other}
	h2 := headers(both, "3", now)
	require.Len(t, strings.Fields(h2.Get(webhook.StandardSignatureHeader)), 2)
	require.NoError(t, webhook.VerifyStandard(other, h2, body, time.Minute))
	require.NoError(t, independentVerify(other.String(), h2, body, now))
	require.NoError(t, independentVerify(secretText, h2, body, now))
}

// A secret file written before the standard holds raw text: it keeps
// working, its bytes are the key (so the old header is unchanged), and its
// whsec_ form is what receivers configure for the standard headers.
func TestRawSecretMigrates(t *testing.T) {
	t.Parallel()
	raw := "0123456789abcdef0123456789abcdef"
	s, err := webhook.ParseSecret(raw + "\n")
	require.NoError(t, err)
	require.Equal(t, "whsec_"+base64.StdEncoding.EncodeToString([]byte(raw)), s.String())
	again, err := webhook.ParseSecret(s.String())
	require.NoError(t, err)
	require.Equal(t, s, again, "the whsec_ form names the same key")

	now := time.Now()
	body := []byte(`{"eventId":"9"}`)
	h := http.Header{}
	h.Set(webhook.IDHeader, "9")
	h.Set(webhook.TimestampHeader, strconv.FormatInt(now.Unix(), 10))
	h.Set(webhook.StandardSignatureHeader, webhook.SignStandard([]webhook.Secret{s}, "9", now, body))
	require.NoError(t, independentVerify(s.String(), h, body, now))
	// The deprecated header still verifies with the raw bytes, as before.
	require.NoError(t, webhook.Verify([]byte(raw), webhook.Sign([]byte(raw), now, body), body, time.Minute))

	for _, bad := range []string{"short", "whsec_!!!", "whsec_c2hvcnQ="} {
		_, err := webhook.ParseSecret(bad)
		require.Error(t, err, bad)
	}
	_, err = webhook.ParseSecrets("\n \n")
	require.Error(t, err)
	two, err := webhook.ParseSecrets(raw + "\n" + webhook.NewSecret().String() + "\n")
	require.NoError(t, err)
	require.Len(t, two, 2)
	require.NotEqual(t, webhook.NewSecret().String(), webhook.NewSecret().String())
}

func TestLegacyVerify(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	body := []byte(`{"eventId":"1"}`)
	now := time.Now()
	h := webhook.Sign(key, now, body)
	require.Regexp(t, `^t=\d+,v1=[0-9a-f]{64}$`, h)
	require.NoError(t, webhook.Verify(key, h, body, time.Minute))
	require.ErrorIs(t, webhook.Verify(key, h, []byte(`{"eventId":"2"}`), time.Minute), webhook.ErrSignatureMismatch)
	require.ErrorIs(t, webhook.Verify(key, webhook.Sign(key, now.Add(-10*time.Minute), body), body, 5*time.Minute), webhook.ErrSignatureExpired)
	for _, bad := range []string{"", "v1=abc", "t=x,v1=abc", "t=123", "garbage"} {
		require.ErrorIs(t, webhook.Verify(key, bad, body, time.Minute), webhook.ErrSignatureMalformed, bad)
	}
}
