package httpapi

// Admin API: webhooks per consumer group (docs/business.md, "Webhooks").
// The store seals the secrets (store.WebhookGroups); every replica's
// dispatcher (control/webhook) follows the rows.

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/control/webhook"
)

// webhookOverlapDefault is how long a rotation keeps the old secrets
// signing when the request does not say.
const webhookOverlapDefault = 24 * time.Hour

// ListWebhookGroups lists every group's webhook, never a secret.
func (a tenantsAdmin) ListWebhookGroups(ctx context.Context, _ adminapi.ListWebhookGroupsRequestObject) (adminapi.ListWebhookGroupsResponseObject, error) {
	gs, err := a.s.webhooks.List(ctx)
	if err != nil {
		return nil, err
	}
	out := adminapi.WebhookGroupList{Groups: make([]adminapi.WebhookGroup, 0, len(gs))}
	for _, g := range gs {
		out.Groups = append(out.Groups, webhookGroupOut(g))
	}
	return adminapi.ListWebhookGroups200JSONResponse(out), nil
}

// GetWebhookGroup reads one group's webhook.
func (a tenantsAdmin) GetWebhookGroup(ctx context.Context, req adminapi.GetWebhookGroupRequestObject) (adminapi.GetWebhookGroupResponseObject, error) {
	g, err := a.s.webhooks.Get(ctx, req.Group)
	if err != nil {
		return nil, webhookErr(err)
	}
	return adminapi.GetWebhookGroup200JSONResponse(webhookGroupOut(g)), nil
}

// PutWebhookGroup creates or updates a group's webhook.
func (a tenantsAdmin) PutWebhookGroup(ctx context.Context, req adminapi.PutWebhookGroupRequestObject) (adminapi.PutWebhookGroupResponseObject, error) {
	body := req.Body
	if err := webhook.ValidateURL(body.Url); err != nil {
		e := apiErr(http.StatusBadRequest, codeWebhookURLInvalid, err)
		e.Details = map[string]any{"field": "url"}
		return nil, e
	}
	spec := store.WebhookGroupSpec{Group: req.Group, URL: body.Url, Enabled: body.Enabled, Actor: actor(ctx)}
	if body.Concurrency != nil {
		spec.Concurrency = *body.Concurrency
	}
	if body.TimeoutMs != nil {
		spec.Timeout = time.Duration(*body.TimeoutMs) * time.Millisecond
	}
	if body.MaxAttempts != nil {
		spec.MaxAttempts = *body.MaxAttempts
	}
	if body.Reason != nil {
		spec.Reason = *body.Reason
	}
	var generated *string
	if body.Secret != nil {
		sec, err := parseWebhookSecret(*body.Secret)
		if err != nil {
			return nil, err
		}
		spec.Secret = sec
	} else if _, err := a.s.webhooks.Get(ctx, req.Group); errors.Is(err, store.ErrWebhookGroupNotFound) {
		// A new webhook without a secret: make one and show it once.
		sec := webhook.NewSecret().String()
		spec.Secret, generated = sec, &sec
	} else if err != nil {
		return nil, err
	}
	g, created, err := a.s.webhooks.Put(ctx, spec)
	if err != nil {
		return nil, webhookErr(err)
	}
	if !created {
		generated = nil
	}
	a.s.log.InfoContext(ctx, "webhook group written", "consumer_group", g.Group, "created", created, "enabled", g.Enabled,
		"concurrency", g.Concurrency, "actor", actor(ctx))
	out := adminapi.WebhookGroupWritten{WebhookGroup: webhookGroupOut(g), Secret: generated}
	if created {
		return adminapi.PutWebhookGroup201JSONResponse(out), nil
	}
	return adminapi.PutWebhookGroup200JSONResponse(out), nil
}

// DeleteWebhookGroup stops pushing a group's events.
func (a tenantsAdmin) DeleteWebhookGroup(ctx context.Context, req adminapi.DeleteWebhookGroupRequestObject) (adminapi.DeleteWebhookGroupResponseObject, error) {
	if err := a.s.webhooks.Delete(ctx, req.Group, actor(ctx), ""); err != nil {
		return nil, webhookErr(err)
	}
	a.s.log.InfoContext(ctx, "webhook group deleted", "consumer_group", req.Group, "actor", actor(ctx))
	return adminapi.DeleteWebhookGroup204Response{}, nil
}

// RotateWebhookSecret makes a new secret current; the old ones sign on
// for the overlap.
func (a tenantsAdmin) RotateWebhookSecret(ctx context.Context, req adminapi.RotateWebhookSecretRequestObject) (adminapi.RotateWebhookSecretResponseObject, error) {
	body := req.Body
	var sec string
	var generated *string
	if body.Secret != nil {
		var err error
		if sec, err = parseWebhookSecret(*body.Secret); err != nil {
			return nil, err
		}
	} else {
		sec = webhook.NewSecret().String()
		generated = &sec
	}
	overlap := webhookOverlapDefault
	if body.OverlapMs != nil {
		overlap = time.Duration(*body.OverlapMs) * time.Millisecond
	}
	reason := ""
	if body.Reason != nil {
		reason = *body.Reason
	}
	g, err := a.s.webhooks.Rotate(ctx, req.Group, sec, overlap, actor(ctx), reason)
	if err != nil {
		return nil, webhookErr(err)
	}
	a.s.log.InfoContext(ctx, "webhook secret rotated", "consumer_group", g.Group, "overlap", overlap.String(), "actor", actor(ctx))
	return adminapi.RotateWebhookSecret200JSONResponse(adminapi.WebhookGroupWritten{WebhookGroup: webhookGroupOut(g), Secret: generated}), nil
}

// parseWebhookSecret checks a secret an admin gave and returns its whsec_
// form.
func parseWebhookSecret(text string) (string, error) {
	s, err := webhook.ParseSecret(text)
	if err == nil && !strings.HasPrefix(strings.TrimSpace(text), webhook.SecretPrefix) {
		err = errors.New("webhook secret: use the whsec_ form (kece-control webhook-secret new prints one)")
	}
	if err != nil {
		e := apiErr(http.StatusBadRequest, codeWebhookSecretInvalid, err)
		e.Details = map[string]any{"field": "secret"}
		return "", e
	}
	return s.String(), nil
}

// webhookErr gives the webhook store's refusals their own codes.
func webhookErr(err error) error {
	switch {
	case errors.Is(err, store.ErrConsumerGroupNotFound):
		e := apiErr(http.StatusBadRequest, codeConsumerGroupUnknown, err)
		e.Details = map[string]any{"field": "group"}
		return e
	case errors.Is(err, store.ErrWebhookGroupNotFound):
		return apiErr(http.StatusNotFound, codeWebhookGroupNotFound, err)
	case errors.Is(err, store.ErrWebhookKeyMissing):
		return apiErr(http.StatusConflict, codeWebhookKeyMissing, err)
	}
	return err
}

func webhookGroupOut(g store.WebhookGroup) adminapi.WebhookGroup {
	out := adminapi.WebhookGroup{ConsumerGroup: g.Group, Url: g.URL, Enabled: g.Enabled, Concurrency: g.Concurrency,
		TimeoutMs: g.Timeout.Milliseconds(), MaxAttempts: g.MaxAttempts, Revision: g.Revision, CreatedAt: g.CreatedAt,
		UpdatedAt: g.UpdatedAt, Secrets: make([]adminapi.WebhookSecretInfo, 0, len(g.Secrets))}
	for _, s := range g.Secrets {
		out.Secrets = append(out.Secrets, adminapi.WebhookSecretInfo{Id: strconv.FormatInt(s.ID, 10), KeyId: s.KeyID,
			CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt, Readable: s.OpenErr == nil})
	}
	return out
}
