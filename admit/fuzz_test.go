package admit

import (
	"bytes"
	"crypto/sha256"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// FuzzCheck: whatever a node sends, an admitted line appended to a pi file
// adds exactly one line, one JSON object whose id, parent and type are the
// ones its headers claimed, under a file name that stays inside the
// sessions root.
func FuzzCheck(f *testing.F) {
	f.Add(`{"type":"session","version":3,"id":"s1","timestamp":"t","cwd":"/p"}`, "session", "s1", "", "--p--/a.jsonl", "s1", "")
	f.Add(`{"type":"message","id":"a","parentId":"b","message":{}}`, "message", "a", "b", "--p--/a.jsonl", "s1", "")
	f.Add("{\"type\":\"message\",\n\"id\":\"a\"}", "message", "a", "", "x.jsonl", "s1", "")
	f.Add(`{"op":"delete"}`, "tombstone", "", "", "--p--/a.jsonl", "s1", "delete")
	f.Add(`[1]`, "", "", "", "", "s1", "")
	f.Fuzz(func(t *testing.T, raw, typ, id, parent, file, sid, op string) {
		ev := &eventlog.Event{Node: "n", SID: sid, Type: typ, ID: id, ParentID: parent, File: file, Op: op,
			Raw: []byte(raw), Sha: sha256.Sum256([]byte(raw))}
		if Check(ev, 1<<16) != nil {
			return
		}
		if file != "" {
			root := "/r/sessions"
			p := filepath.Join(root, filepath.FromSlash(file))
			if rel, err := filepath.Rel(root, p); err != nil || strings.HasPrefix(rel, "..") || rel != filepath.FromSlash(file) {
				t.Fatalf("admitted file %q lands at %q", file, p)
			}
		}
		if op != "" {
			return
		}
		var file2 bytes.Buffer
		file2.WriteString(`{"type":"session","version":3,"id":"x","timestamp":"t","cwd":"/p"}` + "\n")
		file2.WriteString(raw + "\n")
		lines := bytes.Split(bytes.TrimSuffix(file2.Bytes(), []byte("\n")), []byte("\n"))
		if len(lines) != 2 {
			t.Fatalf("admitted %q adds %d lines", raw, len(lines)-1)
		}
		l := session.ParseLine(lines[1])
		if l.Kind != session.Entry && l.Kind != session.Header {
			t.Fatalf("admitted %q reads as %s", raw, l.Kind)
		}
		if l.Type != typ || (l.HasID && l.ID != id) || (!l.HasID && id != "") || (l.HasParent && l.ParentID != parent) {
			t.Fatalf("admitted %q under headers type %q id %q parent %q", raw, typ, id, parent)
		}
		if l.Kind == session.Header && l.ID != sid {
			t.Fatalf("admitted header %q on session %q", raw, sid)
		}
	})
}
