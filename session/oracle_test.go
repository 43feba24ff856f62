package session

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

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

// TestAgainstOracle writes random sessions with the real pi writer and
// compares Go's context with real pi's at several leaves.
func TestAgainstOracle(t *testing.T) {
	testenv.Oracle(t)
	if testing.Short() {
		t.Skip("runs node")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for run := 0; run < 8; run++ {
		steps, _ := randomScript(r)
		dir := t.TempDir()
		script := filepath.Join(dir, "script.json")
		b, _ := json.Marshal(steps)
		if err := os.WriteFile(script, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out")
		if _, err := testenv.RunOracle(t, 20*time.Second, "--compact", "write", out, "--cwd", "/x", "--script", script); err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(out, "*.jsonl"))
		if len(files) == 0 {
			t.Fatalf("run %d: writer produced no file", run)
		}
		for _, file := range files {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			f, err := LoadRules(raw, RulesSeed)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			leaves := []string{""} // "" = the file's own leaf
			for k := 0; k < 3 && f.Tree.Len() > 0; k++ {
				id, _ := f.Tree.Entry(r.IntN(f.Tree.Len())).ID.String()
				leaves = append(leaves, id)
			}
			for _, leaf := range leaves {
				args := []string{"--compact", "context", file}
				var ctx *Context
				if leaf == "" {
					ctx, err = f.Context()
				} else {
					args = append(args, "--leaf", leaf)
					ctx, err = f.ContextAt(&leaf)
				}
				if err != nil {
					t.Fatalf("%s leaf %q: %v", file, leaf, err)
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
					t.Errorf("run %d %s leaf %q: %s", run, filepath.Base(file), leaf, firstDiff("", got, want))
				}
			}
		}
	}
}
