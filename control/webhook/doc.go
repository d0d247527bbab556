// Package webhook pushes settlement events to one business URL: an optional
// alternative to the pull API. A Sender claims events under the consumer name
// "webhook" (store.ClaimEvents), POSTs each as JSON signed with HMAC-SHA256
// over "timestamp.body" (header X-Kece-Signature: t=<unix>,v1=<hex>), acks
// on 2xx, and otherwise schedules a retry with capped exponential backoff
// until MaxAttempts, after which the event is DEAD (store.ListEvents with
// store.EventDead shows it to admins). Receivers check deliveries with
// Verify.
//
// The package owns delivery only: it reads and writes events solely through
// control/store, follows no redirects, bounds every delivery in time and the
// response it reads, and never logs the secret or event bodies.
package webhook
