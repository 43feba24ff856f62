package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/replicate"
)

// The first session, written on A by the real pi writer: tool use, a
// branch, a compaction, a label and a session name.
const piScriptA = `[
  {"op": "model_change", "provider": "anthropic", "modelId": "claude-sonnet-4-5"},
  {"op": "thinking_level_change", "thinkingLevel": "off"},
  {"op": "user", "text": "hello", "as": "u1"},
  {"op": "assistant", "text": "hi", "toolCalls": [{"id": "c1", "name": "bash", "arguments": {"command": "ls"}}]},
  {"op": "toolResult", "toolCallId": "c1", "toolName": "bash", "text": "a b"},
  {"op": "assistant", "text": "done", "as": "a2"},
  {"op": "branch", "to": "@u1"},
  {"op": "assistant", "text": "another answer"},
  {"op": "user", "text": "more", "as": "u2"},
  {"op": "assistant", "text": "ok"},
  {"op": "compaction", "summary": "what happened so far", "firstKeptEntryId": "@u2", "tokensBefore": 1000},
  {"op": "label", "target": "@u1", "label": "checkpoint"},
  {"op": "session_info", "name": "started on A"},
  {"op": "user", "text": "after the compaction"},
  {"op": "assistant", "text": "fine"}
]`

// The continuation on B (%s: an entry id of A's, to branch back to).
const piScriptB = `[
  {"op": "user", "text": "continued on B", "as": "bu"},
  {"op": "assistant", "text": "sure", "toolCalls": [{"id": "c2", "name": "read", "arguments": {"path": "x"}}]},
  {"op": "toolResult", "toolCallId": "c2", "toolName": "read", "text": "contents"},
  {"op": "branch", "to": %q},
  {"op": "user", "text": "a branch from A's first question"},
  {"op": "assistant", "text": "ok from B"},
  {"op": "label", "target": "@bu", "label": "b-checkpoint"},
  {"op": "session_info", "name": "renamed on B"},
  {"op": "thinking_level_change", "thinkingLevel": "high"},
  {"op": "model_change", "provider": "openai", "modelId": "gpt-5"},
  {"op": "user", "text": "last question"},
  {"op": "assistant", "text": "last answer"}
]`

type oracleSummary struct {
	Done        bool              `json:"done"`
	SessionFile string            `json:"sessionFile"`
	SessionID   string            `json:"sessionId"`
	LeafID      string            `json:"leafId"`
	EntryCount  int               `json:"entryCount"`
	Refs        map[string]string `json:"refs"`
}

// piWrite runs the real pi writer and returns its summary line.
func piWrite(t *testing.T, script string, args ...string) oracleSummary {
	t.Helper()
	sp := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(sp, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := testenv.RunOracle(t, time.Minute, append(append([]string{"write"}, args...), "--script", sp)...)
	if err != nil {
		t.Fatal(err)
	}
	lines := splitLines(strings.TrimSpace(string(out)))
	var sum oracleSummary
	if len(lines) == 0 || json.Unmarshal([]byte(lines[len(lines)-1]), &sum) != nil || !sum.Done {
		t.Fatalf("pi-oracle write: no summary in %s", out)
	}
	return sum
}

// piRead runs a read command of the oracle on file and returns its JSON
// object without the fields that describe the copy rather than the session
// (openEffects carries the byte sizes, which differ with the header's cwd).
func piRead(t *testing.T, cmd, file string) map[string]any {
	t.Helper()
	out, err := testenv.RunOracle(t, time.Minute, cmd, file)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("pi-oracle %s %s: %v: %s", cmd, file, err, out)
	}
	if e, ok := v["error"]; ok {
		t.Fatalf("pi-oracle %s %s: %v", cmd, file, e)
	}
	if eff, ok := v["openEffects"].(map[string]any); ok {
		for _, k := range []string{"modified", "newlineAppended", "rewritten"} {
			if eff[k] == true {
				t.Errorf("pi-oracle %s %s: opening the file %s it", cmd, file, k)
			}
		}
	}
	delete(v, "openEffects")
	return v
}

// samePi compares what pi makes of two files with one read command.
func samePi(t *testing.T, cmd, fileA, fileB string) map[string]any {
	t.Helper()
	va, vb := piRead(t, cmd, fileA), piRead(t, cmd, fileB)
	if !reflect.DeepEqual(va, vb) {
		ja, _ := json.MarshalIndent(va, "", " ")
		jb, _ := json.MarshalIndent(vb, "", " ")
		t.Fatalf("pi-oracle %s differs:\nA: %s\nB: %s", cmd, ja, jb)
	}
	return va
}

// The cwds of mappedPair's stations: B maps A's /Users/ann to /home/ann.
const pairCwdA, pairCwdB = "/Users/ann/proj", "/home/ann/proj"

// mappedPair starts a hub and two stations, ws-a and ws-b, where B maps
// A's /Users/ann to /home/ann; it makes A's project folder for pairCwdA and
// returns it, with B's for pairCwdB (made when the first copy lands): the
// set-up of the tests where real pi writes on A and B's copy is compared.
func mappedPair(t *testing.T) (hub *testHub, a, b *station, aDir, bDir string) {
	t.Helper()
	hub = startTestHub(t)
	a = newStation(t, "ws-a", hub.url(), "")
	b = newStation(t, "ws-b", hub.url(), "/Users/ann=/home/ann")
	aDir = filepath.Join(a.cfg.SessionsDir, replicate.CwdFolder(pairCwdA))
	if err := os.MkdirAll(aDir, 0o700); err != nil {
		t.Fatal(err)
	}
	return hub, a, b, aDir, filepath.Join(b.cfg.SessionsDir, replicate.CwdFolder(pairCwdB))
}

// TestReplicationRealPi: the real pi writer creates a session on A; B's copy
// (cwd mapped /Users/ann → /home/ann) gives pi the same context and tree;
// pi lists it on B under B's path; pi continues it on B, and A's file
// then gives pi the same context and tree as B's.
func TestReplicationRealPi(t *testing.T) {
	testenv.Oracle(t) // skips without node or shared/
	hub, a, b, aDir, bDir := mappedPair(t)
	const cwdA, cwdB = pairCwdA, pairCwdB
	s1 := piWrite(t, piScriptA, aDir, "--cwd", cwdA)
	aFile := s1.SessionFile
	if filepath.Dir(aFile) != aDir {
		t.Fatalf("pi wrote %s, not in %s", aFile, aDir)
	}
	bFile := filepath.Join(bDir, filepath.Base(aFile))

	readLines := func(p string) []string {
		raw, _ := os.ReadFile(p)
		return splitLines(string(raw))
	}
	aLines := readLines(aFile)
	hdrA := aLines[0]
	if len(aLines) != 1+s1.EntryCount {
		t.Fatalf("A's file has %d lines for %d entries", len(aLines), s1.EntryCount)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := len(readLines(bFile))
		return n == len(aLines), fmt.Sprintf("B's copy %s has %d of %d lines", bFile, n, len(aLines))
	})
	bLines := readLines(bFile)
	wantHdr := strings.Replace(aLines[0], `"cwd":"`+cwdA+`"`, `"cwd":"`+cwdB+`"`, 1)
	if bLines[0] != wantHdr || wantHdr == aLines[0] {
		t.Fatalf("B's header is not A's with the cwd mapped:\nA: %s\nB: %s", aLines[0], bLines[0])
	}
	if !reflect.DeepEqual(aLines[1:], bLines[1:]) {
		t.Fatalf("B's entries are not A's bytes")
	}
	ctx := samePi(t, "context", aFile, bFile)
	if ctx["leafId"] != s1.LeafID {
		t.Errorf("context leaf %v, pi's writer ended on %s", ctx["leafId"], s1.LeafID)
	}
	samePi(t, "tree", aFile, bFile)

	// pi on B lists the session in the folder of B's cwd (what `pi
	// --resume` in /home/ann/proj reads).
	out, err := testenv.RunOracle(t, time.Minute, "list", bDir)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Sessions []struct{ File, ID, Cwd, Name string }
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("pi-oracle list: %v: %s", err, out)
	}
	if len(list.Sessions) != 1 || list.Sessions[0].ID != s1.SessionID || list.Sessions[0].Cwd != cwdB || list.Sessions[0].Name != "started on A" {
		t.Fatalf("pi's list on B: %s", out)
	}

	// pi continues the session on B; A receives every new entry.
	s2 := piWrite(t, fmt.Sprintf(piScriptB, s1.Refs["u1"]), bDir, "--cwd", cwdB, "--open", bFile)
	if s2.SessionFile != bFile || s2.SessionID != s1.SessionID {
		t.Fatalf("pi continued %s (%s), want %s", s2.SessionFile, s2.SessionID, bFile)
	}
	bLines = readLines(bFile)
	if len(bLines) != 1+s2.EntryCount {
		t.Fatalf("B's file has %d lines for %d entries", len(bLines), s2.EntryCount)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := len(readLines(aFile))
		return n == len(bLines), fmt.Sprintf("A's file has %d of %d lines", n, len(bLines))
	})
	aLines = readLines(aFile)
	if !reflect.DeepEqual(aLines[1:], bLines[1:]) {
		t.Fatalf("A's entries differ from B's (same order expected: nothing was written concurrently)")
	}
	ctx = samePi(t, "context", aFile, bFile)
	tree := samePi(t, "tree", aFile, bFile)
	if ctx["leafId"] != s2.LeafID || tree["leafId"] != s2.LeafID {
		t.Errorf("leaf: context %v, tree %v; pi's writer ended on %s", ctx["leafId"], tree["leafId"], s2.LeafID)
	}
	if ctx["thinkingLevel"] != "high" {
		t.Errorf("context thinking level %v, want B's last change", ctx["thinkingLevel"])
	}
	if labels, _ := tree["labels"].(map[string]any); labels[s1.Refs["u1"]] != "checkpoint" || labels[s2.Refs["bu"]] != "b-checkpoint" {
		t.Errorf("labels %v", tree["labels"])
	}

	// Each node published only the lines its own pi wrote.
	hub.waitCount(t, 10*time.Second, "pi.up.ws-a.>", uint64(1+s1.EntryCount))
	hub.waitCount(t, 10*time.Second, "pi.up.ws-b.>", uint64(s2.EntryCount-s1.EntryCount))
	for _, s := range []*station{a, b} {
		if files := s.sessionFiles(); len(files) != 1 {
			t.Errorf("%s holds %d session files, want 1", s.name, len(files))
		}
	}
	if aLines[0] != hdrA {
		t.Errorf("A's header changed: %s", aLines[0])
	}
}
