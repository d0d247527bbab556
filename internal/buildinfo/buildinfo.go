// Package buildinfo says which build of KECE is running. Every binary prints
// it for --version / version, and kece-node reports it in heartbeats.
//
// The Makefile stamps the version at link time:
//
//	go build -ldflags "-X github.com/kece-oj/kece/internal/buildinfo.version=v1.2.3" ./cmd/...
//
// Without a stamp (go run, go build by hand) the version comes from the Go
// toolchain's build information: the module version when built with
// `go install …@v1.2.3`, otherwise the VCS revision and time the toolchain
// recorded, with "+dirty" when the tree had uncommitted changes, and "dev"
// when none is known (tests). This package imports nothing of KECE.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set with -ldflags "-X github.com/kece-oj/kece/internal/buildinfo.version=…".
var version string

// Info is what a binary reports about its build.
type Info struct {
	// Version is the stamped version, the module version or "dev".
	Version string `json:"version" yaml:"version"`
	// Revision is the VCS commit (with "+dirty" if modified), if known.
	Revision string `json:"revision,omitempty" yaml:"revision,omitempty"`
	// Time is the commit time the toolchain recorded, if known.
	Time string `json:"time,omitempty" yaml:"time,omitempty"`
	// Go is the toolchain version.
	Go string `json:"go" yaml:"go"`
}

// Read returns this binary's build information.
func Read() Info {
	i := Info{Version: version, Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision = s.Value
			case "vcs.time":
				i.Time = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && i.Revision != "" {
			i.Revision += "+dirty"
		}
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
	}
	if i.Version == "" {
		i.Version = "dev"
		if i.Revision != "" {
			i.Version = "dev-" + short(i.Revision)
		}
	}
	return i
}

// Version is Read().Version: what heartbeats and one-line outputs carry.
func Version() string { return Read().Version }

// String is the one-line form printed by --version: "NAME VERSION (rev …, go …)".
func String(name string) string {
	i := Read()
	s := fmt.Sprintf("%s %s", name, i.Version)
	if i.Revision != "" && i.Version != "dev-"+short(i.Revision) {
		s += " (" + short(i.Revision) + ")"
	}
	return s + " " + i.Go
}

func short(rev string) string {
	if len(rev) > 12 && rev[12] != '+' {
		plus := ""
		if n := len(rev); n > 6 && rev[n-6:] == "+dirty" {
			plus = "+dirty"
		}
		return rev[:12] + plus
	}
	return rev
}
