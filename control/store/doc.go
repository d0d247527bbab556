// Package store is the control plane's job database, one type per
// aggregate: host groups and nodes, node identity, submissions and jobs,
// manifests and artifacts, settlement events, tokens and the audit trail.
// The lease engine (claims, renewals, results, releases, expiry) is
// control/lease; a Store builds one over its handle and hands it out as
// Store.Leases. What both share — the handle, transactions, scripts,
// batchers, error classes, job and node states, settlement rows — is
// control/internal/jobdb, whose vocabulary the store re-exports under its
// own names (vocab.go), so callers write store.X as before.
//
// Every transaction, here and in the lease engine, takes locks in the order
//
//	host group → node → submission pointer → job → attempt
//
// and only the locks it needs (this is the one place the order is written
// down; control/lease and docs/design.md point here). Deadlocks (1213) and
// lock-wait timeouts (1205) are retried a bounded number of times. All
// scheduling times come from the database clock (NOW(6)); callers are given
// durations, never instants.
//
// The store knows nothing about HTTP, nodes' processes or engines.
//
// Reads into structs use sqlx (Get, Select, sqlx.In) with `db:"…"` tags on
// the row types; the per-job hot path (claim, renew, complete, enqueue,
// events, session authentication) keeps hand-written Scan lists: it runs
// for every job, so it stays free of per-row reflection, and a change there
// has to show its worth in kece-bench scheduler first.
//
// # What lives where
//
//	File             Aggregate / responsibility
//	doc.go           this overview
//	store.go         Store (the handle its aggregates share), New, its With… copies
//	vocab.go         the shared vocabulary under the store's names: errors, states,
//	                 Config and defaults (jobdb), the lease engine's types (lease)
//	aggregates.go    the types a caller holds over a Store: Jobs, Leases (lease.Engine),
//	                 Nodes, Credentials, Events, Manifests, AuditLog, Tokens (≤ 25 methods each)
//	caps.go          the capabilities a node's heartbeat reports
//	host_groups.go   judge_host_group: create, resize, per-group detail
//	nodes.go         judge_node configuration: create, get/list, enable/drain/disable/revoke, resize
//	credentials.go   join codes, credentials, sessions, heartbeats (node identity)
//	languages.go     nodes' per-language reports and the language catalog
//	checks.go        self-checks (judge_node_check and their CHECK jobs)
//	console_sessions.go admin console browser sessions (hash-only ids, CSRF token,
//	                 idle and absolute expiry, ended with the admin secret that opened them)
//	audit.go         judge_audit reads: a node's or job's trail, the filtered global list
//	                 (the insert every change shares is jobdb.Audit)
//	tokens.go        business/admin API tokens, rotation and retired secrets
//	tenancy.go       token scopes (submission types), consumer groups, EventScope,
//	                 owners of test data (Tenant: who may use a manifest or artifact)
//	jobs.go          job rows, rejudge, cancel (pointer → job writes)
//	enqueue.go       Enqueue (batched), EnqueueTx, EnqueueMany, their idempotent forms
//	idempotency.go   idempotency keys for enqueue and their purge
//	status.go        job, attempt and submission-status reads; settled-job lookups for waiting reads
//	job_search.go    admin job search (JobFilter: submission, pool, state, verdict, time; keyset
//	                 pages) and a submission's generations
//	verdict_mix.go   per-pool outcomes and completions of the submissions finished in the last minutes
//	signals.go       PoolSignals: the pool signal rows read (the cross-replica wake-up)
//	reapinterval.go  the reap interval's default and bound (one fact for all)
//	events.go        settlement events: claim/ack/fail, admin listing, redelivery (their insert: jobdb)
//	manifests.go     artifacts and manifests, each with its owner
//	summary.go       pool and node counts for dashboards; FleetStats, the metrics gauges
//	reconcile.go     invariant checks over the whole database
//	observe.go       what enqueues report to the Observer (jobdb) after the fact
//
// Tests follow the same split: <file>_test.go tests <file>.go
// (<file>_internal_test.go from inside the package), with these exceptions:
// the test bundle is control/internal/storetest (bundle_test.go adds what
// only these tests need), hold.go holds the batch hooks it uses and
// export_test.go the rest; the lease engine's tests are in control/lease;
// search_plan_test.go checks the query plans of
// job_search.go, audit.go and verdict_mix.go; tenancy_bench_test.go
// benchmarks the settlement fan-out of events.go.
package store
