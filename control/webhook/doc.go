// Package webhook pushes settlement events to business URLs: an optional
// alternative to the pull API. A Dispatcher (one per replica) runs a Sender
// for every consumer group that has a webhook (store.WebhookGroups), each
// with its own delivery slots, hold and backoff, so one slow receiver never
// delays another group. A Sender claims its group's events under the consumer name
// "webhook" (store.ClaimEvents), POSTs each as JSON signed per the Standard
// Webhooks specification (headers webhook-id = the eventId,
// webhook-timestamp, webhook-signature "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>", one entry per configured secret; secrets in the
// "whsec_<base64>" form, see ParseSecret for older raw secrets), acks on
// 2xx, and otherwise schedules a retry with capped exponential backoff until
// MaxAttempts, after which the event is DEAD (store.ListEvents with
// store.EventDead shows it to admins). Receivers verify with any Standard
// Webhooks library, or VerifyStandard in Go. The pre-standard header
// X-Kece-Signature (Sign/Verify) is still sent for one release.
//
// The package owns delivery only: it reads and writes events solely through
// control/store, follows no redirects, bounds every delivery in time and the
// response it reads, and never logs the secret or event bodies.
package webhook
