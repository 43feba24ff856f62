package web

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestEntryOutputBounded: what one entry shows is bounded as a whole, not
// per string: an edit of eight half-MiB runs of newlines, or 32 text
// blocks of half a MiB of '<' each, made answers of 150-430 MB (a probe,
// 2026-12-06: the daemon's RSS went to 1.7 GB); and once a page holds a
// few MiB of HTML, each further entry shows little. Each entry says what
// it does not show.
func TestEntryOutputBounded(t *testing.T) {
	d := startDaemon(t)
	const sid = "22222222-0000-4000-8000-000000000009"
	half := 512 << 10
	var edits []map[string]string
	for range 8 {
		edits = append(edits, map[string]string{"oldText": strings.Repeat("\n", half), "newText": strings.Repeat("\n", half)})
	}
	args, _ := json.Marshal(map[string]any{"path": "a.go", "edits": edits})
	lines := []string{testenv.Header(sid),
		fmt.Sprintf(`{"type":"message","id":"a1","parentId":null,"timestamp":"2026-11-29T23:08:18.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"edit","arguments":%s}],"timestamp":2}}`, args)}
	var blocks []string
	for range 32 {
		blocks = append(blocks, fmt.Sprintf(`{"type":"text","text":%q}`, strings.Repeat("<", half)))
	}
	lines = append(lines, fmt.Sprintf(`{"type":"message","id":"a2","parentId":"a1","timestamp":"2026-11-29T23:08:18.000Z","message":{"role":"assistant","content":[%s],"timestamp":2}}`, strings.Join(blocks, ",")))
	// Twenty more entries of half a MiB of text each.
	parent := "a2"
	for i := range 20 {
		id := fmt.Sprintf("u%d", i)
		lines = append(lines, testenv.Entry(id, parent, strings.Repeat("x", half)))
		parent = id
	}
	d.write(sid, lines...)
	d.waitEntries(sid, len(lines)-1)

	sizes := map[string]int{}
	for _, at := range []string{"a1", "a2", ""} {
		path := "/api/s/" + sid
		if at != "" {
			path += "/branch?leaf=" + at
		}
		resp, body := d.get(path)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %.200s", path, resp.StatusCode, body)
		}
		var v struct{ HTML string }
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatal(err)
		}
		sizes[path] = len(body)
		if !strings.Contains(v.HTML, "more not shown") {
			t.Errorf("%s: nothing says what is not shown", path)
		}
	}
	t.Logf("answer sizes: %v", sizes)
	// One entry: its half MiB of text, with the markup and the escapes
	// (four bytes for a '<'). A page: a few MiB at full length, then a
	// little of each entry.
	for path, limit := range map[string]int{
		"/api/s/" + sid + "/branch?leaf=a1": 2 * maxShown,
		"/api/s/" + sid + "/branch?leaf=a2": 7 * maxShown, // a1 and a2
		"/api/s/" + sid:                     pageFull + 5*maxShown + 22*5*crowdedShown,
	} {
		if sizes[path] > limit {
			t.Errorf("%s: %d bytes, over %d", path, sizes[path], limit)
		}
	}
}

// TestNamesAndLabelsBounded: a session's name and labels, a model's id and
// such, which pi writes on one line, are shown as one line of bounded
// length; 4 names of 12 MiB made the list 75 MB and the tree 302 MB (a
// probe, 2026-12-06). A bidi control in any of them, or in a command,
// shows as its code point: it would make what is shown read otherwise
// than what was written. (The catalog entry of this session was over the
// KV's value limit: its views were never written again, and the worker
// stalled, until projection.fit.)
func TestNamesAndLabelsBounded(t *testing.T) {
	d := startDaemon(t)
	const sid = "22222222-0000-4000-8000-00000000000a"
	huge := strings.Repeat("<", 1<<20)
	lines := []string{testenv.Header(sid),
		testenv.Entry("u1", "", "hello"),
		fmt.Sprintf(`{"type":"label","id":"l1","parentId":"u1","timestamp":"2026-11-29T23:08:18.000Z","targetId":"u1","label":%q}`, huge),
		fmt.Sprintf(`{"type":"model_change","id":"m1","parentId":"l1","timestamp":"2026-11-29T23:08:18.000Z","provider":"p","modelId":%q}`, huge),
		`{"type":"message","id":"b1","parentId":"m1","timestamp":"2026-11-29T23:08:18.000Z","message":{"role":"bashExecution","command":"rm -rf /tmp/x \u202e; echo safe","output":"","exitCode":0,"timestamp":1}}`,
		fmt.Sprintf(`{"type":"session_info","id":"n1","parentId":"b1","timestamp":"2026-11-29T23:08:18.000Z","name":%q}`, "evil\u202e"+huge),
	}
	d.write(sid, lines...)
	d.waitEntries(sid, len(lines)-1)
	for _, path := range []string{"/", "/api/sessions", "/api/s/" + sid, "/api/s/" + sid + "/tree"} {
		resp, body := d.get(path)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %.200s", path, resp.StatusCode, body)
		}
		if len(body) > 64<<10 {
			t.Errorf("%s: %d bytes", path, len(body))
		}
		if strings.Contains(body, "\u202e") || !strings.Contains(body, "‹U+202E›") {
			t.Errorf("%s: the bidi control is not shown as its code point", path)
		}
	}
}

// TestPageWindowFromAnyStart: a window asked from any start, the largest
// int among them, is within the path (start+pageEntries overflowed, and
// the branch page's slice panicked: a probe, 2026-12-07).
func TestPageWindowFromAnyStart(t *testing.T) {
	const maxInt = int(^uint(0) >> 1)
	for _, c := range [][2]int{{0, 5}, {3, maxInt}, {maxInt - 8, maxInt}, {maxInt - 1, maxInt}, {7, 8}, {-1, 4}, {4, 2}} {
		for _, n := range []int{0, 1, 6, 10 * pageEntries} {
			s, e := pageWindow(n, c[0], c[1])
			if s < 0 || e < s || e > n {
				t.Errorf("pageWindow(%d, %d, %d) = [%d, %d): not within [0, %d)", n, c[0], c[1], s, e, n)
			}
		}
	}
}
