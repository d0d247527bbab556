package telemetry

import (
	"cmp"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kece-oj/kece/internal/buildinfo"
)

// NewRegistry returns a registry with the standard go_ and process_
// collectors and kece_build_info{component,version,revision,goversion} = 1.
// The labels come from internal/buildinfo, the one version the Makefile
// stamps, so the metric agrees with --version and the heartbeats. Each
// server process has its own registry (no global state), so tests can run
// several in one binary.
func NewRegistry(component string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	bi := buildinfo.Read()
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kece_build_info",
		Help: "Build of this process; the value is always 1.",
		ConstLabels: prometheus.Labels{"component": component, "version": bi.Version,
			"revision": cmp.Or(bi.Revision, "unknown"), "goversion": bi.Go},
	})
	info.Set(1)
	reg.MustRegister(info)
	return reg
}
