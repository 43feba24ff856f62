package session

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// The oracle tests write random sessions with real pi's writer: a few by
// default, as many as asked for a long run, e.g.
//
//	go test ./session/ -run 'TestAgainstOracle16$' -timeout 0 -args -oracle.runs 300 -oracle.seed 9
var (
	oracleRuns = flag.Int("oracle.runs", 0, "oracle tests: sessions to write (0: each test's own few)")
	oracleSeed = flag.Uint64("oracle.seed", 0, "oracle tests: script seed (0: each test's own)")
)

// oracleRand is the scripts' generator, seeded with s1, s2, or with
// -oracle.seed when set.
func oracleRand(s1, s2 uint64) *rand.Rand {
	if *oracleSeed != 0 {
		s1, s2 = *oracleSeed, 0
	}
	return rand.New(rand.NewPCG(s1, s2))
}

// oracleRunCount is runs, or -oracle.runs when set.
func oracleRunCount(runs int) int {
	if *oracleRuns > 0 {
		return *oracleRuns
	}
	return runs
}

// randomScript builds a pi-oracle write script: a random tree with
// branches, compactions (with and without a kept range), branch summaries,
// labels, renames and custom messages. It returns the script and the names
// of the entries it creates.
func randomScript(r *rand.Rand) ([]map[string]any, []string) {
	steps := []map[string]any{
		{"op": "model_change", "provider": "anthropic", "modelId": "claude", "as": "s0"},
		{"op": "thinking_level_change", "thinkingLevel": "low", "as": "s1"},
		{"op": "user", "text": "hello", "as": "s2"},
		{"op": "assistant", "text": "hi", "as": "s3"},
	}
	names := []string{"s0", "s1", "s2", "s3"}
	pick := func() string { return "@" + names[r.IntN(len(names))] }
	for i := 4; i < 30+r.IntN(20); i++ {
		name := fmt.Sprintf("s%d", i)
		var s map[string]any
		switch k := r.IntN(14); k {
		case 0:
			steps = append(steps, map[string]any{"op": "branch", "to": pick()})
			continue
		case 1:
			s = map[string]any{"op": "compaction", "summary": fmt.Sprintf("summary %d", i), "tokensBefore": 1000 + i}
			if r.IntN(3) > 0 {
				s["firstKeptEntryId"] = pick()
			}
		case 2:
			s = map[string]any{"op": "branch_summary", "to": pick(), "summary": fmt.Sprintf("tried %d", i)}
		case 3:
			s = map[string]any{"op": "label", "target": pick(), "label": fmt.Sprintf("l%d", r.IntN(3))}
		case 4:
			s = map[string]any{"op": "session_info", "name": fmt.Sprintf("name %d", i)}
		case 5:
			s = map[string]any{"op": "custom_message", "customType": "ext", "content": fmt.Sprintf("c%d", i), "display": r.IntN(2) == 0}
		case 6:
			s = map[string]any{"op": "custom", "customType": "ext", "data": map[string]any{"n": i}}
		case 7:
			s = map[string]any{"op": "model_change", "provider": "openai", "modelId": fmt.Sprintf("gpt-%d", i)}
		case 8:
			s = map[string]any{"op": "thinking_level_change", "thinkingLevel": []string{"off", "high", "medium"}[r.IntN(3)]}
		case 9:
			s = map[string]any{"op": "bashExecution", "command": "ls", "output": "a", "exitCode": r.IntN(2)}
		case 10, 11:
			s = map[string]any{"op": "assistant", "text": fmt.Sprintf("answer %d", i)}
		default:
			s = map[string]any{"op": "user", "text": fmt.Sprintf("question %d", i)}
		}
		s["as"] = name
		steps = append(steps, s)
		names = append(names, name)
	}
	return steps, names
}

// randomScript16 builds a pi-oracle write script for pi 1.6.0's writer:
// what randomScript writes plus what only pi 1.x writes (system messages
// with sections and tools, which later compactions copy into their
// systemMessage; context_edit entries of every kind on the active branch;
// usage entries), with resets of the leaf, so that compactions nest and
// edits meet them. It follows the tree as the writer builds it, since the
// writer refuses an edit of an entry off the active branch.
func randomScript16(r *rand.Rand) []map[string]any {
	var steps []map[string]any
	var names []string
	parent := map[string]string{} // entry name -> parent name ("" for a root)
	editable := map[string]bool{} // entries with model content an edit may replace
	leaf := ""
	pick := func() string { return names[r.IntN(len(names))] }
	for i := 0; i < 30+r.IntN(30); i++ {
		name := fmt.Sprintf("s%d", i)
		var s map[string]any
		k := r.IntN(19)
		if len(names) == 0 {
			k = 18 // a user message first: the writer's first flush
		}
		switch k {
		case 0:
			leaf = pick()
			steps = append(steps, map[string]any{"op": "branch", "to": "@" + leaf})
			continue
		case 1:
			leaf = ""
			steps = append(steps, map[string]any{"op": "reset_leaf"})
			continue
		case 2, 3:
			s = map[string]any{"op": "compaction", "summary": fmt.Sprintf("summary %d", i), "tokensBefore": 1000 + i}
			if r.IntN(4) > 0 {
				s["firstKeptEntryId"] = "@" + pick()
			}
		case 4:
			to := pick()
			s = map[string]any{"op": "branch_summary", "to": "@" + to, "summary": fmt.Sprintf("tried %d", i)}
			leaf = to
		case 5:
			s = map[string]any{"op": "message", "message": map[string]any{
				"role": "system", "content": fmt.Sprintf("system %d", i), "timestamp": int64(1764457696000) + int64(i),
				"sections":   map[string]any{"identity": fmt.Sprintf("id %d", i), "tools": []any{nil, "t"}[r.IntN(2)]},
				"toolsAdded": []any{map[string]any{"name": []string{"read", "bash"}[r.IntN(2)]}},
			}}
		case 6, 16:
			var branch []string
			for n := leaf; n != ""; n = parent[n] {
				if editable[n] {
					branch = append(branch, n)
				}
			}
			if len(branch) == 0 {
				continue
			}
			s = map[string]any{"op": "context_edit", "target": "@" + branch[r.IntN(len(branch))]}
			switch r.IntN(3) {
			case 0:
				s["replacement"] = nil
			case 1:
				s["replacement"] = map[string]any{"content": fmt.Sprintf("edited %d", i)}
			default:
				s["replacement"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("edited %d", i)}}}
			}
		case 7:
			s = map[string]any{"op": "usage", "kind": "cache_warm", "provider": "p", "model": fmt.Sprintf("m%d", i)}
		case 8:
			s = map[string]any{"op": "label", "target": "@" + pick(), "label": []string{"", "cp", "x"}[r.IntN(3)]}
		case 9:
			s = map[string]any{"op": "custom_message", "customType": "ext", "content": fmt.Sprintf("c%d", i), "display": r.IntN(2) == 0}
		case 10:
			s = map[string]any{"op": "model_change", "provider": "openai", "modelId": fmt.Sprintf("gpt-%d", i)}
		case 11:
			s = map[string]any{"op": "thinking_level_change", "thinkingLevel": []string{"off", "high"}[r.IntN(2)]}
		case 12:
			s = map[string]any{"op": "toolResult", "toolCallId": "c1", "toolName": "bash", "text": fmt.Sprintf("out %d", i)}
		case 13, 14:
			s = map[string]any{"op": "assistant", "text": fmt.Sprintf("answer %d", i), "stopReason": []string{"stop", "error", "deferred"}[r.IntN(3)]}
		case 15:
			s = map[string]any{"op": "session_info", "name": fmt.Sprintf("name %d", i)}
		default:
			s = map[string]any{"op": "user", "text": fmt.Sprintf("question %d", i)}
		}
		switch s["op"] {
		case "user", "assistant", "toolResult", "custom_message":
			editable[name] = true
		}
		parent[name] = leaf
		leaf = name
		s["as"] = name
		steps = append(steps, s)
		names = append(names, name)
	}
	return steps
}

// TestAgainstOracle writes random sessions with the real pi writer and
// compares Go's context with real pi's at several leaves.
func TestAgainstOracle(t *testing.T) {
	testenv.Oracle(t)
	if testing.Short() {
		t.Skip("runs node")
	}
	r := oracleRand(1, 2)
	for run := 0; run < oracleRunCount(8); run++ {
		steps, _ := randomScript(r)
		for _, file := range writeWithOracle(t, steps, "seed") {
			compareWithOracle(t, r, fmt.Sprintf("run %d %s", run, filepath.Base(file)), file, RulesSeed, "seed")
		}
	}
}

// TestAgainstOracle16 is TestAgainstOracle with pi 1.6.0's writer, which
// writes what only pi 1.x writes (system messages, compactions that carry
// them, context_edit, usage): Go's context under pi-1.6 and under auto
// (which must choose pi-1.6 for such a file) equals pi 1.6.0's at several
// leaves.
func TestAgainstOracle16(t *testing.T) {
	testenv.Oracle(t)
	if testing.Short() {
		t.Skip("runs node")
	}
	r := oracleRand(16, 0)
	written := map[string]int{} // what the files hold, so that the test stays what it says
	for run := 0; run < oracleRunCount(6); run++ {
		for _, file := range writeWithOracle(t, randomScript16(r), "1.6.0") {
			name := fmt.Sprintf("run %d %s", run, filepath.Base(file))
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, what := range []string{`"replacement":{`, `"type":"context_edit"`, `"replacement":null`, `"systemMessage":`, `"type":"usage"`, `"type":"branch_summary"`} {
				written[what] += bytes.Count(raw, []byte(what))
			}
			mode := RulesPi16
			if testenv.HoldsNewerLine(raw) {
				mode = RulesAuto
			}
			compareWithOracle(t, r, name, file, mode, "1.6.0")
		}
	}
	for what, n := range written {
		if n == 0 {
			t.Errorf("no file holds %s", what)
		}
	}
	t.Logf("the files hold %v", written)
}

// writeWithOracle runs the script through `pi-oracle write --pi version`
// and returns the session files it wrote.
func writeWithOracle(t *testing.T, steps []map[string]any, version string) []string {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "script.json")
	b, _ := json.Marshal(steps)
	if err := os.WriteFile(script, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if _, err := testenv.RunOracle(t, 20*time.Second, "--pi", version, "--compact", "write", out, "--cwd", "/x", "--script", script); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*.jsonl"))
	if len(files) == 0 {
		t.Fatalf("pi %s: the writer produced no file for %s", version, b)
	}
	return files
}

// compareWithOracle loads file under mode and compares its context with
// `pi-oracle context --pi version` at the file's leaf and at three random
// entries. Under RulesAuto the tree must have chosen the set of version.
func compareWithOracle(t *testing.T, r *rand.Rand, name, file string, mode RuleSet, version string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := LoadRules(raw, mode)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if want := map[string]RuleSet{"seed": RulesSeed, "1.6.0": RulesPi16}[version]; f.Tree.Rules() != want {
		t.Fatalf("%s: rules %v under %v, want %v", name, f.Tree.Rules(), mode, want)
	}
	leaves := []string{""} // "" = the file's own leaf
	for k := 0; k < 3 && f.Tree.Len() > 0; k++ {
		id, _ := f.Tree.Entry(r.IntN(f.Tree.Len())).ID.String()
		leaves = append(leaves, id)
	}
	for _, leaf := range leaves {
		args := []string{"--pi", version, "--compact", "context", file}
		var ctx *Context
		if leaf == "" {
			ctx, err = f.Context()
		} else {
			args = append(args, "--leaf", leaf)
			ctx, err = f.ContextAt(&leaf)
		}
		if err != nil {
			t.Fatalf("%s leaf %q: %v", name, leaf, err)
		}
		piOut, err := testenv.RunOracle(t, 20*time.Second, args...)
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := json.Unmarshal(piOut, &want); err != nil {
			t.Fatal(err)
		}
		delete(want, "pi")
		delete(want, "openEffects")
		got := jsonValue(t, ctx)
		if !reflect.DeepEqual(got, any(want)) {
			t.Errorf("%s leaf %q (%v): %s", name, leaf, mode, firstDiff("", got, want))
		}
	}
}
