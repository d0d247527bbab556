// Package artifact owns test-data files addressed by their SHA-256 digest.
//
// It has two halves that share digest validation, the on-disk layout and the
// verifying copy:
//
//   - Store is the control plane's filesystem store. Put streams an upload to a
//     temporary file, hashing and counting as it goes, and publishes it under
//     its digest only when size and digest match what the caller declared.
//   - Cache is a judge node's local, size-bounded copy. Acquire downloads a
//     file once (concurrent callers share the download), verifies it, pins it
//     for the job that asked and evicts unpinned files in LRU order.
//
// Digests are 64 lowercase hex characters; a file lives at root/ab/abcdef…
// (the first two characters name a shard directory). A file is never visible
// under its final name until it has been verified, fsynced and renamed.
//
// This package knows nothing about manifests, jobs, leases or HTTP: callers
// pass digests and sizes they trust and a fetch function, and classify the
// errors (see docs/artifacts.md for the mapping). It must not import control,
// worker, engine or contracts.
package artifact
