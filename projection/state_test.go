package projection

import (
	"testing"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// The catalog's session name is text for JSON readers: a lone surrogate
// in it (which the tree keeps, as pi does) becomes one U+FFFD, as when pi
// writes the name out, not three (encoding/json on its WTF-8 bytes).
func TestCatalogNameLoneSurrogate(t *testing.T) {
	s := newSessionState("s1")
	s.tree = session.NewTree()
	for k, line := range []string{
		`{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}`,
		`{"type":"session_info","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","name":" x\ud800 "}`,
	} {
		s.appendLine(&eventlog.Event{Stream: "S", Seq: uint64(k + 1), Raw: []byte(line)})
	}
	s.refreshCatalog(nil, &names{}, nil)
	if want := "x\uFFFD"; s.cat.Name != want {
		t.Errorf("catalog name %q, want %q", s.cat.Name, want)
	}
}
