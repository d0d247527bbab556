// Package replica wires one control-plane process (a replica; several may
// share a database). From one Config and the shared database handle it
// builds everything the process runs besides HTTP, and Run owns the
// background work:
//
//	built by New                      run by Run (one errgroup)
//	store (decorated, below)          —
//	long-poll hub (claim waiters)     cross-replica pool-signal poller
//	settlement waiters (status reads) settled-jobs poller
//	outage tracker                    database ping while it is down
//	maintenance                       reaper, drain deadlines, key purge
//	metrics                           — (scraped through its Handler)
//	webhook dispatcher                one sender per consumer group with a webhook
//
// The store is decorated once, here: it reports to the metrics and wakes
// waiters through the notifier the replica hands it (wakeups). The HTTP
// layer (control/httpapi) is built by the caller over HTTPDeps, serves
// requests and nothing else: it runs no background work and wakes no one.
//
// # Who wakes waiters
//
// The job database's notifier, after the commit that warrants the wake-up
// (control/internal/jobdb/wakeups.go): the lease engine's decorator
// (lease.Observed) for what the engine did — a node's slot came free (a
// result, a release), a pool got work back (a requeue, a reap, a drain
// deadline), a job settled — and the store's aggregates for their own
// commits (an enqueue wakes as many waiters as it created jobs; a rejudge, a
// cancel). The replica's part is the fan-out: wakeups passes pool wake-ups
// to the long-poll hub and settlements to the status waiters. Other replicas learn the same facts
// from the database (the pool signal and the settled-jobs poll).
//
// # Seams for the operator tools (issue 27)
//
// Rate limits: Config.RateLimit configures control/ratelimit; New builds
// the one limiter of the replica from it, and HTTPDeps hands it to httpapi
// (Deps.RateLimiter), which the business surface consults after
// authentication (429 RATE_LIMITED with Retry-After); machine and admin
// routes are never limited. The limiter is in memory, so it needs no
// service in Run; a shared budget through the database would add one.
//
// Per-consumer-group webhooks: New builds the replica's one webhook
// dispatcher (control/webhook) over its store, metrics and outage tracker,
// and the webhook group store (store.WebhookGroups, keyed with
// Config.WebhookKeys) that it and the admin API (Deps.WebhookGroups) share;
// Run starts it beside the other services (the "webhook" entry of
// services). Config.Webhook is the deprecated single webhook, run as an
// implicit group.
package replica
