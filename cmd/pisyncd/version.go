package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// version names a release. It is the one package variable here, because
// the linker can set nothing else: release builds (scripts/docker-build,
// make) pass -ldflags "-X main.version=v1.2.0". Other builds report what
// the Go toolchain stamped into the binary.
var version string

// BuildInfo is what this binary knows about its own build: printed by
// `pisyncd version`, logged first at start, in `status` and, as
// pisyncd_build_info, in /metrics, so a report says which code ran.
type BuildInfo struct {
	// Version is the -X main.version of a release, else the module
	// version Go stamped (a pseudo-version from the VCS), else "devel".
	Version string `json:"version"`
	// Revision and Modified are the VCS revision and whether the work
	// tree had changes, when Go stamped them (go build in a git clone).
	Revision  string `json:"revision,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
}

// readBuildInfo reads this binary's build.
func readBuildInfo() BuildInfo {
	bi, _ := debug.ReadBuildInfo()
	return newBuildInfo(version, bi)
}

func newBuildInfo(release string, bi *debug.BuildInfo) BuildInfo {
	b := BuildInfo{Version: "devel", GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			b.GoVersion = bi.GoVersion
		}
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			b.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if release != "" {
		b.Version = release
	}
	return b
}

// String is the one-line form: "v1.2.0 (7bf0917, modified, go1.26.8)".
func (b BuildInfo) String() string {
	var parts []string
	if b.Revision != "" {
		parts = append(parts, shortRevision(b.Revision))
	}
	if b.Modified {
		parts = append(parts, "modified")
	}
	parts = append(parts, b.GoVersion)
	return b.Version + " (" + strings.Join(parts, ", ") + ")"
}

func shortRevision(r string) string {
	if len(r) > 12 {
		return r[:12]
	}
	return r
}

// LogAttrs are the build's attributes for the first log line.
func (b BuildInfo) LogAttrs() []any {
	attrs := []any{"version", b.Version, "go", b.GoVersion}
	if b.Revision != "" {
		attrs = append(attrs, "revision", shortRevision(b.Revision), "modified", b.Modified)
	}
	return attrs
}

// collector is pisyncd_build_info, the usual constant 1 whose labels say
// which build is running.
func (b BuildInfo) collector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "pisyncd", Name: "build_info",
		Help: "The running build: version, VCS revision and Go version in the labels; always 1.",
		ConstLabels: prometheus.Labels{
			"version": b.Version, "revision": b.Revision,
			"modified": fmt.Sprint(b.Modified), "goversion": b.GoVersion,
		},
	})
	g.Set(1)
	return g
}
