package web

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestVisible: the controls that reorder text and the marks no one sees
// are shown as their code points; the joiners emoji are written with, and
// text without any of them, are left as they are (a web probe found the
// zero-width space and the directional marks passed through unseen,
// 2026-12-07).
func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"rm -rf /tmp/x \u202e; echo safe": "rm -rf /tmp/x ‹U+202E›; echo safe",
		"curl https://exa\u200bmple.com":  "curl https://exa‹U+200B›mple.com",
		"a\u200eb\u200fc\u061cd":          "a‹U+200E›b‹U+200F›c‹U+061C›d",
		"\ufeffx\u2060y":                  "‹U+FEFF›x‹U+2060›y",
		"family 👨\u200d👩\u200d👧":          "family 👨\u200d👩\u200d👧",
		"می\u200cخواهم":                   "می\u200cخواهم",
		"plain ascii, ünïcode, ✓ — Ø":     "plain ascii, ünïcode, ✓ — Ø",
	} {
		if got := visible(in); got != want {
			t.Errorf("visible(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSessionIDShown: a session id holding a bidi control (a hand-made
// file, another machine's line) comes with the form the view shows, its
// controls visible, beside the exact id its links use (the list showed
// "x\u202eyz" as "xzy": a probe, 2026-12-07).
func TestSessionIDShown(t *testing.T) {
	d := startDaemon(t)
	const sid = "x\u202eyz"
	d.write(sid, testenv.Header(sid), testenv.Entry("u1", "", "hello"))
	d.waitEntries(sid, 1)
	var list struct{ Sessions []listRow }
	if _, body := d.get("/api/sessions"); json.Unmarshal([]byte(body), &list) != nil || len(list.Sessions) != 1 ||
		list.Sessions[0].ID != sid || list.Sessions[0].Shown != "x‹U+202E›yz" {
		t.Errorf("/api/sessions: %.300s", body)
	}
	var v sessionView
	if _, body := d.get("/api/s/" + url.PathEscape(sid)); json.Unmarshal([]byte(body), &v) != nil || v.ID != sid || v.IDShown != "x‹U+202E›yz" {
		t.Errorf("/api/s/%s: id %q shown %q", sid, v.ID, v.IDShown)
	}
}
