//go:build docker

package docker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestRoundTrip: a session begun on ws1 appears on ws2 as a native file at
// the path pi uses there (ws1 is a "Mac" under /Users/ann, ws2 maps it to
// /home/ann), ws2 continues it and ws1 receives the continuation. Once with
// hand-written lines, once with the real pi writer.
func TestRoundTrip(t *testing.T) {
	s := newStack(t)
	l := newLedger()

	t.Run("handwritten", func(t *testing.T) {
		sid := "0199d0c0-0000-7000-8000-00000000aa01"
		p1 := sessionPath(s.sessions("ws1"), "/Users/ann/hand", sid)
		start := time.Now()
		l.append(t, "ws1", sid, p1, hdrLine(sid, "/Users/ann/hand"), msgLine("e1", "", "hello from ws1"), msgLine("e2", "e1", "more on ws1"))
		p2 := sessionPath(s.sessions("ws2"), "/home/ann/hand", sid)
		lines := waitFile(t, p2, 3, time.Minute)
		t.Logf("new session ws1 -> ws2 in %v", time.Since(start).Round(time.Millisecond))
		want1, _ := os.ReadFile(p1)
		w := splitLines(string(want1))
		if lines[0] != hdrLine(sid, "/home/ann/hand") {
			t.Fatalf("ws2's header: cwd not mapped: %s", lines[0])
		}
		if !reflect.DeepEqual(lines[1:], w[1:]) {
			t.Fatalf("ws2's entries differ:\n%q\nwant\n%q", lines[1:], w[1:])
		}
		start = time.Now()
		l.append(t, "ws2", sid, p2, msgLine("e3", "e2", "continued on ws2"))
		got := waitFile(t, p1, 4, time.Minute)
		t.Logf("continuation ws2 -> ws1 in %v", time.Since(start).Round(time.Millisecond))
		if !strings.Contains(got[3], "continued on ws2") {
			t.Fatalf("ws1's last line: %s", got[3])
		}
	})

	t.Run("pi", func(t *testing.T) {
		testenv.Oracle(t) // skips without node
		dir1 := filepath.Join(s.sessions("ws1"), "--Users-ann-proj--")
		os.MkdirAll(dir1, 0o755)
		script := writeScript(t, `[
		  {"op": "model_change", "provider": "anthropic", "modelId": "claude-sonnet-4-5"},
		  {"op": "thinking_level_change", "thinkingLevel": "off"},
		  {"op": "user", "text": "list the files", "as": "u1"},
		  {"op": "assistant", "text": "running ls", "toolCalls": [{"id": "c1", "name": "bash", "arguments": {"command": "ls"}}]},
		  {"op": "toolResult", "toolCallId": "c1", "toolName": "bash", "text": "a b"},
		  {"op": "assistant", "text": "two files: a and b"},
		  {"op": "label", "target": "@u1", "label": "start"}
		]`)
		start := time.Now()
		out, err := testenv.RunOracle(t, time.Minute, "write", dir1, "--cwd", "/Users/ann/proj", "--script", script)
		if err != nil {
			t.Fatal(err)
		}
		sum := lastJSON(t, out)
		f1 := sum.SessionFile
		b1, _ := os.ReadFile(f1)
		lines1 := splitLines(string(b1))
		l.record("ws1", sum.SessionID, lines1...)

		f2 := filepath.Join(s.sessions("ws2"), "--home-ann-proj--", filepath.Base(f1))
		lines2 := waitFile(t, f2, len(lines1), time.Minute)
		t.Logf("pi session (%d lines) ws1 -> ws2 in %v", len(lines1), time.Since(start).Round(time.Millisecond))
		if !strings.Contains(lines2[0], `"cwd":"/home/ann/proj"`) {
			t.Fatalf("ws2's header: %s", lines2[0])
		}
		if !reflect.DeepEqual(lines2[1:], lines1[1:]) {
			t.Fatalf("ws2's entries differ from ws1's")
		}

		// pi on ws2 resumes the replica and continues it.
		script2 := writeScript(t, `[
		  {"op": "user", "text": "now on the other machine"},
		  {"op": "assistant", "text": "continuing where ws1 stopped"}
		]`)
		start = time.Now()
		if _, err := testenv.RunOracle(t, time.Minute, "write", filepath.Dir(f2), "--open", f2, "--script", script2); err != nil {
			t.Fatal(err)
		}
		b2, _ := os.ReadFile(f2)
		all2 := splitLines(string(b2))
		l.record("ws2", sum.SessionID, all2[len(lines2):]...)
		waitFile(t, f1, len(all2), time.Minute)
		t.Logf("pi continuation ws2 -> ws1 in %v", time.Since(start).Round(time.Millisecond))

		// pi builds the same context from both copies.
		c1, err := testenv.RunOracle(t, time.Minute, "context", f1)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := testenv.RunOracle(t, time.Minute, "context", f2)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := contextOf(t, c1), contextOf(t, c2); !reflect.DeepEqual(a, b) {
			t.Fatalf("pi's context differs:\nws1 %s\nws2 %s", c1, c2)
		}
		// and pi on ws2 lists it among the project's sessions (`pi --resume`).
		list, err := testenv.RunOracle(t, time.Minute, "list", filepath.Dir(f2))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(list), sum.SessionID) {
			t.Fatalf("pi on ws2 does not list %s: %s", sum.SessionID, list)
		}
	})

	waitFor(t, time.Minute, func() (bool, string) { return l.check(s) })
	waitFor(t, 30*time.Second, func() (bool, string) { return l.checkPublishedOnce(s) })
}

// contextOf is pi-oracle's context output without openEffects (file sizes
// differ: the replica's header holds the mapped cwd).
func contextOf(t *testing.T, out []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("pi-oracle context: %v: %s", err, out)
	}
	delete(m, "openEffects")
	return m
}

type oracleSummary struct {
	Done        bool   `json:"done"`
	SessionFile string `json:"sessionFile"`
	SessionID   string `json:"sessionId"`
}

func lastJSON(t *testing.T, out []byte) oracleSummary {
	t.Helper()
	lines := splitLines(strings.TrimSpace(string(out)))
	var sum oracleSummary
	if len(lines) == 0 || json.Unmarshal([]byte(lines[len(lines)-1]), &sum) != nil || !sum.Done {
		t.Fatalf("pi-oracle write: no summary in %s", out)
	}
	return sum
}

func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
