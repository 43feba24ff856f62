package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// BuildInfo is what a binary knows about its own build: printed by
// `version`, logged first at start, in `status` and, as
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

// ReadBuildInfo reads the running binary's build; release is its
// main.version ("" unless the linker set it).
func ReadBuildInfo(release string) BuildInfo {
	bi, _ := debug.ReadBuildInfo()
	return NewBuildInfo(release, bi)
}

// NewBuildInfo is the BuildInfo of release and what Go stamped (bi, nil
// when nothing).
func NewBuildInfo(release string, bi *debug.BuildInfo) BuildInfo {
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

// VersionCommand is `NAME version [--json]` (and `NAME --version`) of
// both binaries: the one-line form, or the BuildInfo as one JSON object,
// which a script that records which build ran reads without parsing the
// line.
func VersionCommand(name, release string, args []string, stdout io.Writer) error {
	usage := name + " version [--json]"
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the build as one JSON object")
	if err := ParseArgs(fs, args, usage, 0); err != nil {
		return err
	}
	b := ReadBuildInfo(release)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(b)
	}
	_, err := fmt.Fprintf(stdout, "%s %s\n", name, b)
	return err
}
