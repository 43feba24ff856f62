package main

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pisyncd/pisyncd/internal/cli"
)

// version names a release. It is the one package variable here, because
// the linker can set nothing else: release builds (scripts/docker-build,
// make) pass -ldflags "-X main.version=v1.2.0". Other builds report what
// the Go toolchain stamped into the binary (cli.BuildInfo).
var version string

// BuildInfo is this binary's build, as pisync reports its own.
type BuildInfo = cli.BuildInfo

// readBuildInfo reads this binary's build.
func readBuildInfo() BuildInfo { return cli.ReadBuildInfo(version) }

// buildInfoCollector is pisyncd_build_info, the usual constant 1 whose
// labels say which build is running.
func buildInfoCollector(b BuildInfo) prometheus.Collector {
	labels := prometheus.Labels{"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion, "modified": "unknown"}
	if b.Revision != "" {
		// Go stamps whether the tree was modified only with the
		// revision: without either, "false" asserted what no one knew.
		labels["modified"] = fmt.Sprint(b.Modified)
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "pisyncd", Name: "build_info",
		Help:        "The running build: version, VCS revision (\"\" and modified \"unknown\" for a build without VCS stamping) and Go version in the labels; always 1.",
		ConstLabels: labels,
	})
	g.Set(1)
	return g
}
