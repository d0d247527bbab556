// Package store is the control plane's scheduling core: every SQL statement
// about host groups, nodes, submissions, jobs, attempts, manifests and
// settlement events lives here, one file per aggregate. Each operation is one
// short transaction that takes locks in the order
//
//	host group → node → submission pointer → job → attempt
//
// and only the locks it needs. Deadlocks (1213) and lock-wait timeouts (1205)
// are retried a bounded number of times. All scheduling times come from the
// database clock (NOW(6)); callers are given durations, never instants.
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
//	store.go         Config and its defaults, Store, New, hooks, notifier, caches
//	tx.go            transactions with deadlock retry; txx (sqlx on a transaction);
//	                 the hand-written scan helpers the hot path keeps
//	batch.go         the batcher that lets concurrent calls share one commit
//	script.go        scripts: a transaction's independent statements sent in one
//	                 round trip (multiStatements), or one by one where not allowed
//	errors.go        error classes (ErrNotFound, ErrConflict, …), their typed forms, and
//	                 Classify for database failures (ErrUnavailable, ErrDatabase)
//	host_groups.go   judge_host_group: create, resize, per-group detail
//	nodes.go         judge_node configuration: create, get/list, enable/drain/disable/revoke, resize
//	credentials.go   join codes, credentials, sessions, heartbeats (node identity)
//	languages.go     nodes' per-language reports and the language catalog
//	checks.go        self-checks (judge_node_check and their CHECK jobs)
//	console_sessions.go admin console browser sessions (hash-only ids, CSRF token,
//	                 idle and absolute expiry, ended with the admin secret that opened them)
//	audit.go         judge_audit: the audit insert every change shares (with the caller's
//	                 address from WithCaller), a node's or job's trail, the filtered global list
//	tokens.go        business/admin API tokens, rotation and retired secrets
//	tenancy.go       token scopes (submission types), consumer groups, EventScope,
//	                 owners of test data (Tenant: who may use a manifest or artifact)
//	jobs.go          job kinds and states, job rows, rejudge, cancel (pointer → job writes)
//	enqueue.go       Enqueue (batched), EnqueueTx, EnqueueMany, their idempotent forms
//	idempotency.go   idempotency keys for enqueue and their purge
//	status.go        job, attempt and submission-status reads; settled-job lookups for waiting reads
//	job_search.go    admin job search (JobFilter: submission, pool, state, verdict, time; keyset
//	                 pages) and a submission's generations
//	verdict_mix.go   per-pool outcomes and completions of the submissions finished in the last minutes
//	signals.go       pool signal rows (the cross-replica wake-up)
//	wakeups.go       the after-commit wake-ups of this replica's waiters (claims,
//	                 status reads): their one owner
//	reapinterval.go  the reap interval's default and bound (one fact for all)
//	results.go       result shape, its validation against the manifest, a result
//	                 prepared before anything is written (prepareResult)
//	verdict_check.go verdict checks against the manifest (cases, scores)
//	events.go        settlement events: the settle insert, claim/ack/fail, admin listing, redelivery
//	manifests.go     artifacts and manifests, each with its owner
//	summary.go       pool and node counts for dashboards; FleetStats, the metrics gauges
//	reconcile.go     invariant checks over the whole database
//	observe.go       Observer: what the public operations report after the fact
//
// The lease engine, one file per operation, each public entry point beside
// its logic:
//
//	claim.go         Claim, ClaimRequest, NextReady: the claim batcher and its ready read
//	claim_tx.go      the claim transaction: group and node locks, replays, the pick, the lease
//	renew.go         Renew: batched in the lease writer, item by item when a lease is lost
//	complete.go      Complete: the lease writer's batches and resultWrite, the one result
//	                 commit (batched, or inside a slot cycle's claim), and its fallback
//	                 completeSlow; fenceResult
//	cycle.go         a result with the node's next claim (CompleteClaim, the slot cycle):
//	                 the claim batch's transaction stages resultWrite
//	lease_update.go  the one job UPDATE of renewals and results (leaseUpdate), attempt receipts
//	expire.go        Reap (expired leases, silent nodes), ExpireDrainDeadlines
//	release.go       Release, and a new session taking back its node's old leases
//	lease_end.go     how a lease ends without a result (endLeaseLocked)
//
// Tests follow the same split: <file>_test.go tests <file>.go
// (<file>_internal_test.go from inside the package), with these exceptions:
// bundle_test.go holds the shared test bundle and export_test.go the test
// hooks; leases_test.go, fence_test.go (result fencing),
// drain_deadline_test.go and lease_end_test.go test the lease engine's
// files; search_plan_test.go checks the query plans of
// job_search.go, audit.go and verdict_mix.go; tenancy_bench_test.go
// benchmarks the settlement fan-out of events.go.
package store
