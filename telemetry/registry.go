package telemetry

import (
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Version is the build's version, set with -ldflags "-X
// github.com/kece-oj/kece/telemetry.Version=…"; "dev" otherwise.
var Version = "dev"

// NewRegistry returns a registry with the standard go_ and process_
// collectors and kece_build_info{component,version,revision,goversion} = 1.
// Each server process has its own registry (no global state), so tests can
// run several in one binary.
func NewRegistry(component string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	revision, goVersion := "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kece_build_info",
		Help: "Build of this process; the value is always 1.",
		ConstLabels: prometheus.Labels{"component": component, "version": Version, "revision": revision,
			"goversion": goVersion},
	})
	info.Set(1)
	reg.MustRegister(info)
	return reg
}
