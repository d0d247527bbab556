// Package telemetry holds what kece-control and kece-node share for being
// observed: the slog setup (JSON by default, one set of attribute names and
// types, durations in milliseconds, the request id of the HTTP request a log
// line belongs to) and the Prometheus registry every server process starts
// from (go_ and process_ collectors, build info).
//
// It knows nothing of the control plane, the node or the engine; metrics
// that belong to one of them are declared there (control/metrics,
// worker/metrics.go). CLIs (kecectl, kece-bench) do not use it: their output
// is for people.
package telemetry
