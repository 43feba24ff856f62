package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// rulesScripts are sessions the real writer of each pi version writes,
// each one where the two rule sets give different contexts (so a wrong
// choice fails): compactions whose kept range holds an older compaction
// (seed emits its summary again, pi-1.6 does not); at 1.6.0 also what pi
// 1.x writes on every session (a system message on the first request, the
// compaction's systemMessage) and a context_edit dropping a failed attempt.
var rulesScripts = map[string]string{
	"0.85.1": `[
		{"op": "model_change", "provider": "anthropic", "modelId": "claude-sonnet-4-5"},
		{"op": "thinking_level_change", "thinkingLevel": "off"},
		{"op": "user", "text": "q1", "as": "u1"},
		{"op": "assistant", "text": "a1"},
		{"op": "compaction", "summary": "older", "firstKeptEntryId": "@u1", "tokensBefore": 100},
		{"op": "user", "text": "q2"},
		{"op": "assistant", "text": "a2"},
		{"op": "compaction", "summary": "newer", "firstKeptEntryId": "@u1", "tokensBefore": 200},
		{"op": "user", "text": "q3"},
		{"op": "assistant", "text": "a3"}
	]`,
	"1.6.0": `[
		{"op": "model_change", "provider": "anthropic", "modelId": "claude-sonnet-4-5"},
		{"op": "thinking_level_change", "thinkingLevel": "medium"},
		{"op": "user", "text": "q1", "as": "u1"},
		{"op": "message", "message": {"role": "system", "content": "You are pi.", "sections": {"identity": "You are pi."}, "toolsAdded": [], "timestamp": 1764457696000}},
		{"op": "assistant", "text": "", "stopReason": "error", "as": "bad"},
		{"op": "context_edit", "target": "@bad", "replacement": null},
		{"op": "assistant", "text": "a1"},
		{"op": "compaction", "summary": "older", "firstKeptEntryId": "@u1", "tokensBefore": 100},
		{"op": "user", "text": "q2"},
		{"op": "assistant", "text": "a2"},
		{"op": "compaction", "summary": "newer", "firstKeptEntryId": "@u1", "tokensBefore": 200},
		{"op": "user", "text": "q3"},
		{"op": "assistant", "text": "a3"}
	]`,
}

// TestRulesAutoRealPi: sessions written by the real pi writer at 0.85.1
// and at 1.6.0 (pi-oracle write --pi V); with PISYNC_RULES=auto, `pisyncd
// context FILE` and the daemon's context of the session (its projection,
// asked over the control socket) equal real pi's context at that version
// (pi-oracle context --pi V), and say which set auto chose; the other set
// gives another context; the daemon's views name the set too.
func TestRulesAutoRealPi(t *testing.T) {
	testenv.Oracle(t) // node, or skip (fail under CI=true)
	home := t.TempDir()
	cfg := &config.Config{
		SessionsDir: filepath.Join(home, "sessions"), StateDir: filepath.Join(home, "state"), NodeID: "rules-node",
		LogLevel: "warn", LogFormat: "text", Delete: "trash", Rules: "auto",
		IdleAfter: 150 * time.Millisecond, RescanInterval: 200 * time.Millisecond, MaxLine: 64 << 20,
		MaxStore: 1 << 30, MaxMemory: 64 << 20, Workers: 4, ShutdownTimeout: 10 * time.Second,
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := runStation(t, cfg)
	t.Setenv("PISYNC_SESSIONS_DIR", cfg.SessionsDir)
	t.Setenv("PISYNC_STATE_DIR", cfg.StateDir)
	t.Setenv("PISYNC_NODE_ID", cfg.NodeID)
	t.Setenv("PISYNC_RULES", "auto")

	for version, want := range map[string]string{"0.85.1": "seed", "1.6.0": "pi-1.6"} {
		t.Run(version, func(t *testing.T) {
			dir := filepath.Join(cfg.SessionsDir, "--work-rules-"+strings.ReplaceAll(version, ".", "")+"--")
			sum := piWrite(t, rulesScripts[version], dir, "--cwd", "/work/rules", "--pi", version)
			pi := piContextAt(t, sum.SessionFile, version)
			other := map[string]string{"seed": "pi-1.6", "pi-1.6": "seed"}[want]

			// The CLI on the file.
			rules, mode, got, err := contextOut(t, sum.SessionFile)
			if err != nil {
				t.Fatal(err)
			}
			if rules != want || mode != "auto" {
				t.Errorf("context FILE: rules %q rulesMode %q, want %q auto", rules, mode, want)
			}
			sameContext(t, "context FILE (auto)", got, pi)
			if _, _, got, err := contextOut(t, sum.SessionFile, "--rules", other); err != nil || reflect.DeepEqual(got, pi) {
				t.Errorf("context FILE --rules %s: %v; equal to pi %s's context: the case does not tell the sets apart", other, err, version)
			}

			// The daemon: its projection of the session, over the socket.
			var last string
			waitUntil(t, 30*time.Second, func() (bool, string) {
				rules, mode, got, err := contextOut(t, sum.SessionID)
				if err != nil {
					return false, err.Error()
				}
				b, _ := json.Marshal(got)
				last = string(b)
				return rules == want && mode == "auto" && reflect.DeepEqual(got, pi),
					fmt.Sprintf("rules %q rulesMode %q, context %.300s", rules, mode, last)
			})
			if rules, mode, got, err := contextOut(t, sum.SessionID, "--rules", other); err != nil || rules != other || mode != other || reflect.DeepEqual(got, pi) {
				t.Errorf("daemon context --rules %s: %v, rules %q %q", other, err, rules, mode)
			}
			waitUntil(t, 10*time.Second, func() (bool, string) {
				cat, err := s.d.proj.Catalog(t.Context())
				if err != nil {
					return false, err.Error()
				}
				for _, e := range cat {
					if e.SessionID == sum.SessionID {
						return e.Rules == want, fmt.Sprintf("catalog entry rules %q, want %q", e.Rules, want)
					}
				}
				return false, "no catalog entry"
			})
		})
	}
}

// piContextAt is real pi's context of file at version (pi-oracle context
// --pi V): the corpus shape.
func piContextAt(t *testing.T, file, version string) map[string]any {
	t.Helper()
	out, err := testenv.RunOracle(t, time.Minute, "context", file, "--pi", version)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil || v["error"] != nil {
		t.Fatalf("pi-oracle context --pi %s: %v: %s", version, err, out)
	}
	delete(v, "openEffects") // what open() did to the oracle's copy
	delete(v, "pi")          // the version that answered
	return v
}

func sameContext(t *testing.T, what string, got, want map[string]any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Errorf("%s differs from real pi's:\n got %s\nwant %s", what, g, w)
	}
}
