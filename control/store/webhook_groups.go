package store

// Webhooks per consumer group (migration 00015): an endpoint, delivery
// settings and signing secrets per settlement-event consumer group. The
// secrets are encrypted at rest with the replica's keyring (control/atrest);
// this file is the only place that seals or opens them.

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/kece-oj/kece/control/atrest"
	"github.com/kece-oj/kece/control/internal/jobdb"
)

// Limits of a webhook group's settings.
const (
	WebhookConcurrencyDefault = 4
	WebhookConcurrencyMax     = 32
	WebhookTimeoutDefault     = 10 * time.Second
	WebhookTimeoutMax         = 5 * time.Minute
	WebhookMaxAttemptsDefault = 8
	// WebhookSecretsMax is how many secrets a group signs with at once
	// (the current one and those a rotation keeps for its overlap).
	WebhookSecretsMax = 4
	// WebhookURLMax is judge_webhook_group.url's width.
	WebhookURLMax = 2048
	// webhookSecretMax bounds one secret's text (sealed fits VARBINARY(512)).
	webhookSecretMax = 256
)

var (
	// ErrConsumerGroupNotFound: no consumer group of that name (a group
	// exists once a business token joined it; "default" always does). It
	// also matches ErrNotFound.
	ErrConsumerGroupNotFound = fmt.Errorf("consumer group: %w", ErrNotFound)
	// ErrWebhookGroupNotFound: the group has no webhook. It also matches
	// ErrNotFound.
	ErrWebhookGroupNotFound = fmt.Errorf("webhook group: %w", ErrNotFound)
	// ErrWebhookKeyMissing: the replica has no encryption key
	// (KECE_WEBHOOK_KEY_FILE), so it cannot store a secret.
	ErrWebhookKeyMissing = errors.New("no webhook encryption key configured on this replica (KECE_WEBHOOK_KEY_FILE)")
)

// WebhookGroups stores webhook groups and their sealed secrets. It is its
// own type over the shared database handle (not a Store method set), so
// it can move with its aggregate.
type WebhookGroups struct {
	// db is the pool (db.Pool) and runs transactions as the rest of the
	// store does (db.InTx).
	db   *jobdb.Core
	keys *atrest.Keyring
}

// NewWebhookGroups returns the webhook group store over db. keys seals new
// secrets and opens stored ones; nil (no key configured) still lists
// groups, but reports every secret unreadable and refuses to store one.
func NewWebhookGroups(db *sql.DB, keys *atrest.Keyring) *WebhookGroups {
	return &WebhookGroups{db: jobdb.TxHandle(db), keys: keys}
}

// WebhookGroup is one group's webhook.
type WebhookGroup struct {
	Group       string
	URL         string
	Enabled     bool
	Concurrency int
	Timeout     time.Duration
	MaxAttempts int
	// Revision grows with every change of the row or its secrets.
	Revision  int64
	CreatedAt time.Time
	UpdatedAt time.Time
	// Secrets are the ones not expired, newest (the current one) first.
	Secrets []WebhookSecret
}

// WebhookSecret is one signing secret of a group.
type WebhookSecret struct {
	ID        int64
	KeyID     string
	CreatedAt time.Time
	// ExpiresAt is when a rotation stops signing with it; nil: current.
	ExpiresAt *time.Time
	// Value is the secret's text (whsec_…), empty when it did not open;
	// OpenErr then says why (atrest.ErrUnknownKey: the key is lost or not
	// given to this replica). Never log Value.
	Value   string
	OpenErr error
}

// Readable reports whether every secret of the group opened.
func (g WebhookGroup) Readable() error {
	var errs []error
	for _, s := range g.Secrets {
		if s.OpenErr != nil {
			errs = append(errs, fmt.Errorf("webhook group %q: secret %d (key %s): %w", g.Group, s.ID, s.KeyID, s.OpenErr))
		}
	}
	return errors.Join(errs...)
}

// WebhookGroupSpec is what Put sets. Zero Concurrency, Timeout and
// MaxAttempts, and a nil Enabled, keep the current values of an existing
// webhook and take the defaults (enabled) for a new one.
type WebhookGroupSpec struct {
	Group       string
	URL         string
	Enabled     *bool
	Concurrency int
	Timeout     time.Duration
	MaxAttempts int
	// Secret is the first secret of a new group (required then); it must be
	// empty for an existing group, whose secrets change by Rotate.
	Secret string
	Actor  string
	Reason string
}

func (sp *WebhookGroupSpec) validate() error {
	var errs []error
	if !ValidConsumerGroup(sp.Group) {
		errs = append(errs, jobdb.Invalid("group", "must be lowercase letters, digits, . _ - (at most 64)"))
	}
	if sp.URL == "" || len(sp.URL) > WebhookURLMax {
		errs = append(errs, jobdb.Invalid("url", "must be 1..%d characters", WebhookURLMax))
	}
	if sp.Concurrency < 0 || sp.Concurrency > WebhookConcurrencyMax {
		errs = append(errs, jobdb.Invalid("concurrency", "must be 1..%d", WebhookConcurrencyMax))
	}
	if sp.Timeout != 0 && (sp.Timeout < 10*time.Millisecond || sp.Timeout > WebhookTimeoutMax) {
		errs = append(errs, jobdb.Invalid("timeoutMs", "must be 10..%d", WebhookTimeoutMax.Milliseconds()))
	}
	if sp.MaxAttempts < 0 || sp.MaxAttempts > 100 {
		errs = append(errs, jobdb.Invalid("maxAttempts", "must be 1..100"))
	}
	if len(sp.Secret) > webhookSecretMax {
		errs = append(errs, jobdb.Invalid("secret", "longer than %d characters", webhookSecretMax))
	}
	return errors.Join(errs...)
}

// Put creates the group's webhook or updates its settings; created tells
// which. A new webhook needs spec.Secret; an existing one refuses it
// (secrets change by Rotate, so a repeated Put never drops a secret a
// receiver still uses).
func (w *WebhookGroups) Put(ctx context.Context, spec WebhookGroupSpec) (g WebhookGroup, created bool, err error) {
	if err := spec.validate(); err != nil {
		return WebhookGroup{}, false, err
	}
	err = w.db.InTx(ctx, func(tx *sql.Tx) error {
		created = false
		var name string
		err := tx.QueryRowContext(ctx, `SELECT name FROM judge_consumer_group WHERE name = ? FOR UPDATE`, spec.Group).Scan(&name)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %q (a group exists once a business token joins it)", ErrConsumerGroupNotFound, spec.Group)
		}
		if err != nil {
			return err
		}
		var cur struct {
			enabled                       bool
			concurrency, timeoutMs, tries int64
		}
		err = tx.QueryRowContext(ctx, `SELECT enabled, concurrency, timeout_ms, max_attempts FROM judge_webhook_group
			WHERE consumer_group = ? FOR UPDATE`, spec.Group).Scan(&cur.enabled, &cur.concurrency, &cur.timeoutMs, &cur.tries)
		if errors.Is(err, sql.ErrNoRows) {
			cur.enabled, cur.concurrency = true, WebhookConcurrencyDefault
			cur.timeoutMs, cur.tries = WebhookTimeoutDefault.Milliseconds(), WebhookMaxAttemptsDefault
		}
		enabled := cur.enabled
		if spec.Enabled != nil {
			enabled = *spec.Enabled
		}
		conc := cmp.Or(int64(spec.Concurrency), cur.concurrency)
		timeoutMs := cmp.Or(spec.Timeout.Milliseconds(), cur.timeoutMs)
		tries := cmp.Or(int64(spec.MaxAttempts), cur.tries)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if spec.Secret == "" {
				return jobdb.Invalid("secret", "a new webhook group needs a secret")
			}
			created = true
			if _, err := tx.ExecContext(ctx, `INSERT INTO judge_webhook_group (consumer_group, url, enabled, concurrency, timeout_ms, max_attempts)
				VALUES (?, ?, ?, ?, ?, ?)`, spec.Group, spec.URL, enabled, conc, timeoutMs, tries); err != nil {
				return err
			}
			if err := w.insertSecret(ctx, tx, spec.Group, spec.Secret); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			if spec.Secret != "" {
				return jobdb.Invalid("secret", "the group already has a secret: rotate it (rotate-secret) instead")
			}
			if _, err := tx.ExecContext(ctx, `UPDATE judge_webhook_group SET url = ?, enabled = ?, concurrency = ?, timeout_ms = ?,
				max_attempts = ?, revision = revision + 1, updated_at = NOW(6) WHERE consumer_group = ?`,
				spec.URL, enabled, conc, timeoutMs, tries, spec.Group); err != nil {
				return err
			}
		}
		action := map[bool]string{true: "webhook.create", false: "webhook.update"}[created]
		return jobdb.Audit(ctx, tx, spec.Actor, action, 0, 0, spec.Reason, map[string]any{"consumerGroup": spec.Group, "enabled": enabled,
			"concurrency": conc, "timeoutMs": timeoutMs, "maxAttempts": tries})
	})
	if err != nil {
		return WebhookGroup{}, false, err
	}
	g, err = w.Get(ctx, spec.Group)
	return g, created, err
}

// insertSecret seals secret for group and stores it as the current one.
func (w *WebhookGroups) insertSecret(ctx context.Context, tx *sql.Tx, group, secret string) error {
	if w.keys == nil {
		return ErrWebhookKeyMissing
	}
	keyID, sealed, err := w.keys.Seal([]byte(secret), secretAAD(group))
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO judge_webhook_secret (consumer_group, key_id, sealed) VALUES (?, ?, ?)`, group, keyID, sealed)
	return err
}

// secretAAD binds a sealed secret to its group: copied to another group's
// row, it does not open.
func secretAAD(group string) []byte { return []byte("webhook-secret\x00" + group) }

// Rotate makes secret the group's current secret. The secrets current
// until now keep signing for overlap (receivers move to the new one
// meanwhile), then expire; overlap 0 drops them at once (a secret that
// leaked, or secrets sealed with a lost key). Expired secrets are deleted.
func (w *WebhookGroups) Rotate(ctx context.Context, group, secret string, overlap time.Duration, actor, reason string) (WebhookGroup, error) {
	if secret == "" || len(secret) > webhookSecretMax {
		return WebhookGroup{}, jobdb.Invalid("secret", "must be 1..%d characters", webhookSecretMax)
	}
	if overlap < 0 || overlap > 30*24*time.Hour {
		return WebhookGroup{}, jobdb.Invalid("overlapMs", "must be 0..30 days")
	}
	err := w.db.InTx(ctx, func(tx *sql.Tx) error {
		if err := lockWebhookGroup(ctx, tx, group); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM judge_webhook_secret
			WHERE consumer_group = ? AND (? = 0 OR expires_at <= NOW(6))`, group, overlap.Microseconds()); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE judge_webhook_secret SET expires_at = NOW(6) + INTERVAL ? MICROSECOND
			WHERE consumer_group = ? AND expires_at IS NULL`, overlap.Microseconds(), group); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM judge_webhook_secret WHERE consumer_group = ?`, group).Scan(&n); err != nil {
			return err
		}
		if n+1 > WebhookSecretsMax {
			return jobdb.Invalid("overlapMs", "the group already signs with %d secrets; wait until a rotation's overlap ends, or rotate with overlap 0", n)
		}
		if err := w.insertSecret(ctx, tx, group, secret); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE judge_webhook_group SET revision = revision + 1, updated_at = NOW(6) WHERE consumer_group = ?`, group); err != nil {
			return err
		}
		return jobdb.Audit(ctx, tx, actor, "webhook.rotate_secret", 0, 0, reason, map[string]any{"consumerGroup": group, "overlapMs": overlap.Milliseconds()})
	})
	if err != nil {
		return WebhookGroup{}, err
	}
	return w.Get(ctx, group)
}

func lockWebhookGroup(ctx context.Context, tx *sql.Tx, group string) error {
	var rev int64
	err := tx.QueryRowContext(ctx, `SELECT revision FROM judge_webhook_group WHERE consumer_group = ? FOR UPDATE`, group).Scan(&rev)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %q", ErrWebhookGroupNotFound, group)
	}
	return err
}

// Delete removes the group's webhook and its secrets: the group's events
// are then only pulled.
func (w *WebhookGroups) Delete(ctx context.Context, group, actor, reason string) error {
	return w.db.InTx(ctx, func(tx *sql.Tx) error {
		if err := lockWebhookGroup(ctx, tx, group); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM judge_webhook_group WHERE consumer_group = ?`, group); err != nil {
			return err
		}
		return jobdb.Audit(ctx, tx, actor, "webhook.delete", 0, 0, reason, map[string]any{"consumerGroup": group})
	})
}

// Get reads one group's webhook with its live secrets opened.
func (w *WebhookGroups) Get(ctx context.Context, group string) (WebhookGroup, error) {
	gs, err := w.list(ctx, group)
	if err != nil {
		return WebhookGroup{}, err
	}
	if len(gs) == 0 {
		return WebhookGroup{}, fmt.Errorf("%w: %q", ErrWebhookGroupNotFound, group)
	}
	return gs[0], nil
}

// List reads every group's webhook, by group name, with its live secrets
// opened (a secret that does not open carries OpenErr).
func (w *WebhookGroups) List(ctx context.Context) ([]WebhookGroup, error) { return w.list(ctx, "") }

func (w *WebhookGroups) list(ctx context.Context, only string) ([]WebhookGroup, error) {
	groups, err := jobdb.QueryAll(ctx, w.db.Pool, func(r jobdb.RowScanner) (WebhookGroup, error) {
		var g WebhookGroup
		var timeoutMs int64
		err := r.Scan(&g.Group, &g.URL, &g.Enabled, &g.Concurrency, &timeoutMs, &g.MaxAttempts, &g.Revision, &g.CreatedAt, &g.UpdatedAt)
		g.Timeout = time.Duration(timeoutMs) * time.Millisecond
		return g, err
	}, `SELECT consumer_group, url, enabled, concurrency, timeout_ms, max_attempts, revision, created_at, updated_at
	    FROM judge_webhook_group WHERE (? = '' OR consumer_group = ?) ORDER BY consumer_group`, only, only)
	if err != nil {
		return nil, Classify(fmt.Errorf("store: webhook groups: %w", err))
	}
	type sealedRow struct {
		group string
		s     WebhookSecret
		box   []byte
	}
	rows, err := jobdb.QueryAll(ctx, w.db.Pool, func(r jobdb.RowScanner) (sealedRow, error) {
		var x sealedRow
		var exp sql.NullTime
		err := r.Scan(&x.group, &x.s.ID, &x.s.KeyID, &x.box, &x.s.CreatedAt, &exp)
		if exp.Valid {
			x.s.ExpiresAt = &exp.Time
		}
		return x, err
	}, `SELECT consumer_group, id, key_id, sealed, created_at, expires_at FROM judge_webhook_secret
	    WHERE (? = '' OR consumer_group = ?) AND (expires_at IS NULL OR expires_at > NOW(6))
	    ORDER BY consumer_group, id DESC`, only, only)
	if err != nil {
		return nil, Classify(fmt.Errorf("store: webhook secrets: %w", err))
	}
	byGroup := map[string][]WebhookSecret{}
	for _, x := range rows {
		plain, err := w.keys.Open(x.s.KeyID, x.box, secretAAD(x.group))
		if err != nil {
			x.s.OpenErr = err
		} else {
			x.s.Value = string(plain)
		}
		byGroup[x.group] = append(byGroup[x.group], x.s)
	}
	for i := range groups {
		groups[i].Secrets = byGroup[groups[i].Group]
	}
	return groups, nil
}

// Reencrypt seals again, with the current key, every secret sealed with
// another key this keyring still opens, and returns how many it rewrote
// and the groups whose secrets it cannot open (their key is lost: rotate
// their secret with overlap 0). Run it after a key rotation; then the old
// key file can go.
func (w *WebhookGroups) Reencrypt(ctx context.Context) (rewritten int, unreadable []string, err error) {
	if w.keys == nil {
		return 0, nil, ErrWebhookKeyMissing
	}
	type row struct {
		id           int64
		group, keyID string
		box          []byte
	}
	rows, err := jobdb.QueryAll(ctx, w.db.Pool, func(r jobdb.RowScanner) (row, error) {
		var x row
		return x, r.Scan(&x.id, &x.group, &x.keyID, &x.box)
	}, `SELECT id, consumer_group, key_id, sealed FROM judge_webhook_secret WHERE key_id <> ? ORDER BY id`, w.keys.CurrentID())
	if err != nil {
		return 0, nil, Classify(fmt.Errorf("store: webhook secrets: %w", err))
	}
	seen := map[string]bool{}
	for _, x := range rows {
		plain, err := w.keys.Open(x.keyID, x.box, secretAAD(x.group))
		if err != nil {
			if !seen[x.group] {
				seen[x.group] = true
				unreadable = append(unreadable, x.group)
			}
			continue
		}
		keyID, sealed, err := w.keys.Seal(plain, secretAAD(x.group))
		if err != nil {
			return rewritten, unreadable, err
		}
		// Only if nobody rewrote it meanwhile; the revision is unchanged:
		// the secret is the same.
		r, err := w.db.Pool.ExecContext(ctx, `UPDATE judge_webhook_secret SET key_id = ?, sealed = ? WHERE id = ? AND key_id = ?`,
			keyID, sealed, x.id, x.keyID)
		if err != nil {
			return rewritten, unreadable, Classify(fmt.Errorf("store: webhook secret %d: %w", x.id, err))
		}
		if n, _ := r.RowsAffected(); n == 1 {
			rewritten++
		}
	}
	return rewritten, unreadable, nil
}
