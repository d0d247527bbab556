// Package code is the code executor: it judges the cpp (C++ and C), java, python and arkts (ArkTS stand-in and JavaScript) pools'
// tasks in Docker sandboxes through the Docker Engine Go SDK
// (github.com/moby/moby/client). The four runtimes share one flow and differ
// only by their engine.RuntimeSpec.
//
// It owns the sandbox container's configuration, the host-side work
// directories, verdict classification, the host-side checkers (sub-package
// checker) and the in-container supervisor (sub-package sandboxinit, binary
// cmd/kece-sandbox-init). It must not import control, worker or contracts,
// and it never shells out to the docker CLI.
//
// # API for the node
//
//	x, err := code.New(code.Config{NodeID: id, Workspace: dir, SupervisorPath: bin})
//	removed, err := x.Janitor(ctx, id, isLive) // at node start: containers and work dirs of this node but live leases
//	spec, err := code.RuntimeForLanguage("cpp20") // spec of a language id, locally built image
//	specs, err := code.LanguagesOfPool("cpp")   // every id a cpp node serves
//	spec, err := code.DefaultRuntime("cpp")     // the pool's default id (cpp17)
//	version, err := x.Probe(ctx, spec)        // daemon, image and runtime answer
//	verdict, err := x.Execute(ctx, task, sink) // engine.Executor
//	go x.Prewarm(ctx, specs, n)                // n started sandboxes per image, until ctx ends
//	x.Close()                                   // waits for finished jobs' sandbox removals
//
// Config: NodeID (container label), Workspace (host dir for per-job work
// dirs), SupervisorPath (static kece-sandbox-init; a dynamic binary is a
// config error), SeccompProfilePath (empty = the built-in profile, the same as
// deploy/images/seccomp-kece.json; a path
// that cannot be read or parsed, or that the daemon rejects, is an
// engine.InfraConfig error — never a fallback), DockerHost (empty =
// DOCKER_HOST or the default socket), and limits with …Default constants.
// New validates and loads the profile but does not contact the daemon.
//
// Errors are *engine.InfraError with a class: DAEMON_UNREACHABLE,
// IMAGE_MISSING (missing tag or digest reference that does not resolve),
// CONTAINER_CREATE (daemon/runtime refused the container), RESOURCE_EXHAUSTED
// (host disk/memory, supervisor OOM-killed), CORRUPT_INPUT (missing or
// non-regular input/expected file), CANCELLED (context ended; containers are
// still removed with a separate bounded context), CONFIG (bad spec, limits,
// seccomp profile, or an image whose commands do not start), CHECKER_FAILED
// (special judge does not compile, crashes, times out or exits other than
// 0/1/2). None of these is ever a user's CE or RE.
//
// # Images
//
// DefaultRuntime(pool) references kece/runtime-<pool>:<hash>, where hash is
// the first 12 hex digits of sha256(recipes/base || recipes/<pool>); the
// recipes are embedded here and read by deploy/images/build-local.sh, which
// computes the same tag (a test checks both agree). Operators may pin images
// by digest (repo@sha256:…). Commands may use MemoryPlaceholder
// ("{memory_mb}"), replaced by the task's memory limit in MiB (java -Xmx,
// node --max-old-space-size), engine.SourcePlaceholder ("{source}") and,
// under the engine.EntryJavaClass rule, engine.ClassPlaceholder ("{class}"),
// filled from the source before anything runs (javaentry.go).
//
// # Languages
//
// languages.go is the node's table of accepted language ids: one validated
// spec per id, with the standard it names (cpp20 compiles with
// -std=gnu++20), its compile limits and its minimum memory. The control
// plane's copy of the ids is contracts/languages.go; a test in package worker
// keeps both in agreement (this package must not import contracts).
//
// # One container per job
//
// Execute starts one container per job (a second one only for a special
// judge), with the supervisor as PID 1; compile and every case run inside it
// over the attach stream, so a case costs milliseconds, not a container
// start. A job may take a container started before it arrived (warm.go),
// never one another job used; its compile may come from the node's compile
// cache (compile.go, engine/compilecache), keyed by everything the compile
// reads. See docs/engine.md for the sandbox rules and measurements.
package code
