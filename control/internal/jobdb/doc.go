// Package jobdb is what the lease engine (control/lease) and the store's
// aggregates (control/store) share of the job database: the handle (Core)
// with its configuration, transactions retried on deadlock, scripts (a
// transaction's statements in one round trip), batchers (concurrent calls
// sharing one commit), the error classes, the states of jobs and nodes, the
// settlement outbox rows, pool signals, audit rows and capability bits.
// Nothing here decides a lease; control/store re-exports the vocabulary
// (errors, states, Config) under its own names.
package jobdb
