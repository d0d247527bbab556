// Package worker is the judge node (kece-node): one process serving one pool.
//
// It owns the node's lifecycle — configuration, join and the credential file,
// the session of this boot, heartbeats with runtime and dependency health,
// the long-poll claim loop, leases with batched renewal and a local deadline
// taken from the monotonic clock, artifact download into the verified cache,
// building the engine task, fenced result posting with the contract's retry
// rules, drain and shutdown, and the /healthz and /metrics endpoints.
//
// It speaks to the control plane only through the generated client in
// contracts/machineapi and judges only through engine.Executor (engine/code
// for code pools, engine/sqljudge for mysql). It must not import control:
// the only thing it knows of the control plane is the machine protocol. A
// mysql node never opens the Docker socket and a code node never loads SQL
// credentials: only the configured pool's Backend is ever built.
//
// Files by concern: node.go (the Node, Run and its loops' wiring, /healthz
// status), session.go (credential, session, heartbeat), claim.go (the claim
// loop, giving leases back), lease.go (local deadlines and batched renewal),
// job.go (one job: inputs, execution, result), retry.go (per-status handling
// of failed calls, backoff), client.go (the machine protocol's calls),
// failover.go (per-attempt deadlines, moving off a hung replica, liveness
// checks of the replica holding the long-poll, hedged renews), probe.go (dependency probes, language reports, janitor), config.go.
//
// Sub-package faultproxy is a loopback reverse proxy for fault-injection
// tests (lost claim or result answers, blocked renewals, corrupt artifacts).
package worker
