package console

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kece-oj/kece/contracts/adminapi"
	durations "github.com/kece-oj/kece/internal/duration"
)

// webhooksData is the Webhooks page: every group's webhook, and a secret
// the control plane just generated (shown this once, never again).
type webhooksData struct {
	Groups []adminapi.WebhookGroup
	// Secret and SecretGroup: a generated secret to hand to the receiver.
	Secret, SecretGroup string
}

func (c *Console) webhooks(w http.ResponseWriter, r *http.Request) {
	c.showWebhooks(w, r, http.StatusOK, nil, nil)
}

func (c *Console) showWebhooks(w http.ResponseWriter, r *http.Request, status int, e *apiError, written *adminapi.WebhookGroupWritten) {
	lr, err := c.admin.ListWebhookGroupsWithResponse(c.api(r))
	if le := check(lr, lr.Body, err, http.StatusOK); le != nil {
		c.fail(w, r, le)
		return
	}
	d := webhooksData{Groups: lr.JSON200.Groups}
	notice := noticeOf(r)
	if written != nil {
		notice = "Webhook of group " + written.WebhookGroup.ConsumerGroup + " saved; every replica delivers with it within 5 seconds."
		if written.Secret != nil {
			d.Secret, d.SecretGroup = *written.Secret, written.WebhookGroup.ConsumerGroup
		}
	}
	c.render(w, r, status, "webhooks", view{Title: "Webhooks", Nav: "webhooks", Notice: notice, Err: e, Data: d})
}

// formDurationMs reads an optional duration field ("10s", "7d"); nil when
// empty.
func formDurationMs(r *http.Request, field string) (*int64, *apiError) {
	v := strings.TrimSpace(r.PostFormValue(field))
	if v == "" {
		return nil, nil
	}
	d, err := durations.Parse(v)
	if err != nil {
		return nil, &apiError{Status: http.StatusBadRequest, Code: "REQUEST_INVALID", Message: field + ": " + err.Error() + " (e.g. 10s, 15m, 7d)"}
	}
	ms := d.Milliseconds()
	return &ms, nil
}

// setWebhook creates or updates a group's webhook (PUT: empty fields keep
// the current values of an existing webhook).
func (c *Console) setWebhook(w http.ResponseWriter, r *http.Request) {
	group := strings.TrimSpace(r.PostFormValue("group"))
	body := adminapi.WebhookGroupPut{Url: strings.TrimSpace(r.PostFormValue("url"))}
	timeout, fe := formDurationMs(r, "timeout")
	for _, f := range []struct {
		name string
		dst  **int
	}{{"concurrency", &body.Concurrency}, {"maxAttempts", &body.MaxAttempts}} {
		if fe != nil || strings.TrimSpace(r.PostFormValue(f.name)) == "" {
			continue
		}
		var n int64
		if n, fe = formInt(r, f.name); fe == nil {
			v := int(n)
			*f.dst = &v
		}
	}
	if fe != nil {
		c.showWebhooks(w, r, fe.Status, fe, nil)
		return
	}
	body.TimeoutMs = timeout
	switch r.PostFormValue("enabled") {
	case "on", "true":
		t := true
		body.Enabled = &t
	case "off", "false":
		f := false
		body.Enabled = &f
	}
	pr, err := c.admin.PutWebhookGroupWithResponse(c.api(r), group, body)
	want := http.StatusCreated
	if err == nil && pr.StatusCode() == http.StatusOK {
		want = http.StatusOK
	}
	if e := check(pr, pr.Body, err, want); e != nil {
		c.showWebhooks(w, r, e.Status, e, nil)
		return
	}
	written := pr.JSON201
	if want == http.StatusOK {
		written = pr.JSON200
	}
	c.showWebhooks(w, r, http.StatusOK, nil, written)
}

// rotateWebhook makes a fresh secret current; the old ones sign for the
// overlap (default one day).
func (c *Console) rotateWebhook(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	overlap, fe := formDurationMs(r, "overlap")
	if fe != nil {
		c.showWebhooks(w, r, fe.Status, fe, nil)
		return
	}
	if overlap == nil {
		day := (24 * time.Hour).Milliseconds()
		overlap = &day
	}
	rr, err := c.admin.RotateWebhookSecretWithResponse(c.api(r), group, adminapi.WebhookSecretRotate{OverlapMs: overlap})
	if e := check(rr, rr.Body, err, http.StatusOK); e != nil {
		c.showWebhooks(w, r, e.Status, e, nil)
		return
	}
	c.showWebhooks(w, r, http.StatusOK, nil, rr.JSON200)
}

// deleteWebhook removes a group's webhook: its events are pulled again.
func (c *Console) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	dr, err := c.admin.DeleteWebhookGroupWithResponse(c.api(r), group)
	if e := check(dr, dr.Body, err, http.StatusNoContent); e != nil {
		c.showWebhooks(w, r, e.Status, e, nil)
		return
	}
	http.Redirect(w, r, Prefix+"webhooks?done=webhook-delete&group="+url.QueryEscape(group), http.StatusSeeOther)
}
