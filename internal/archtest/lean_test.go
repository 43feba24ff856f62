package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLeanClient: pisync, the client for one-shot commands on a file,
// stays lean: none of the daemon's heavy dependencies (the embedded NATS
// server and its client, the search index, the web view's Markdown, the
// metrics registry, the configuration that loads them) reaches it, so its
// start costs a millisecond rather than pisyncd's ten of package init and
// page faults (docs/PERFORMANCE.md, "One shot"). In the style of
// tailscale's depaware check: a dependency that creeps in fails here, not
// in a benchmark months later.
func TestLeanClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", module+"cmd/pisync").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps found %d packages", len(deps))
	}
	forbidden := []string{
		"github.com/nats-io/",         // nats-server and nats.go
		"github.com/blevesearch/",     // search/
		"github.com/yuin/goldmark",    // web/
		"github.com/prometheus/",      // metrics
		"github.com/klauspost/",       // compression, with nats
		"google.golang.org/protobuf",  // with prometheus
		"github.com/fsnotify/",        // the watcher
		"github.com/kelseyhightower/", // config
		module + "config",
		module + "eventlog",
		module + "projection",
		module + "replicate",
		module + "search",
		module + "watch",
		module + "web",
		module + "internal/metrics",
		"net/http", // pisync talks to no daemon
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f) && (strings.HasSuffix(f, "/") || strings.HasPrefix(d[len(f):], "/")) {
				t.Errorf("pisync imports %s (via go list -deps): keep it to the session core and internal/cli", d)
			}
		}
	}
}
