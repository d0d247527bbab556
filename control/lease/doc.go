// Package lease is the lease engine: how a job is leased to a node, kept,
// answered and taken back. It holds no state of its own beyond caches and
// batchers; every fact is a row of the job database, reached through the
// handle it shares with the store's aggregates (control/internal/jobdb).
// A Store builds one engine over its handle and hands it out decorated
// with its metrics and wake-ups (Store.Leases, an Observed); New and
// Observe build one over any handle of the control plane.
//
// One file per operation, each public entry point beside its logic:
//
//	engine.go        Engine, New
//	claim.go         Claim, ClaimRequest, NextReady: the claim batcher and its ready read
//	claim_tx.go      the claim transaction: group and node locks, replays, the pick
//	                 (pickReady, pickPool), the lease
//	slots.go         slot weights: a claim's rooms per call, node and group, the
//	                 fit rule, jobs handed out in queue order (slotRooms)
//	renew.go         Renew: batched in the lease writer, item by item when a lease is lost
//	results.go       Result and its shape, validation against the manifest, a result
//	                 prepared before anything is written (prepareResult)
//	verdict_check.go, subtask_check.go  a verdict's cases, scores and subtasks against
//	                 the manifest
//	complete.go      Complete: the one result writer — the lease writer's batches
//	                 commit resultWrite (the job UPDATE, attempt receipts, settlement
//	                 events, fenced by row counts); completeSlow, in the same file, is
//	                 its fallback (locks one by one, fenceResult)
//	cycle.go         CompleteClaim, the slot cycle: a result with the node's next
//	                 claim; the claim batch's transaction stages the same resultWrite
//	release.go       Release, and RequeueOldSession (a new boot takes back its
//	                 node's old leases, in the store's session transaction)
//	expire.go        Reap (expired leases, silent nodes), ExpireDrainDeadlines
//	lease_end.go     how a lease ends without a result (endLeaseLocked), for all of them
//	observed.go      Observed, the decorator: what each call reports to the Observer
//	                 (metrics) and whom it wakes (the Notifier); RefusalReason
//	hold.go          test hooks that queue the batchers
//
// Transactions take locks in the order written once, in control/store's
// package doc (host group → node → submission pointer → job → attempt).
// Fencing never changes: every way a lease ends leaves lease_epoch as it
// is and moves the job out of RUNNING, so an old (node, session epoch, lease
// epoch) can never renew or commit again; the next claim bumps the epoch.
//
// Tests run the engine through a Store over a real database, with the test
// bundle the store's tests share (control/internal/storetest): leases_test.go
// (claims, renewals, results, batching), cycle_test.go, lease_end_test.go
// (expiry, silent nodes, new boots, releases), stale_claim_test.go (a
// request id whose leases ended takes no new ones), slot_weight_test.go
// (weights against node and group capacity), drain_deadline_test.go,
// results_test.go and verdict_check_test.go, observed_test.go (who wakes);
// fence_test.go and subtask_check_internal_test.go test internals.
package lease
