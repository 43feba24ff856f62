package watch

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestRealPiWriter has real pi (the oracle's writer) write sessions into the
// watched tree while the tailer runs, and checks that the stream holds
// exactly each file's lines, in file order, byte for byte, including the
// deferred first write that puts several lines on disk at once.
func TestRealPiWriter(t *testing.T) {
	testenv.Oracle(t)
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())

	var steps []map[string]any
	add := func(s map[string]any) { steps = append(steps, s) }
	add(map[string]any{"op": "model_change", "provider": "anthropic", "modelId": "claude-sonnet-4-5"})
	add(map[string]any{"op": "thinking_level_change", "thinkingLevel": "low"})
	add(map[string]any{"op": "user", "text": "hello", "as": "u1"})
	add(map[string]any{"op": "assistant", "text": "hi", "toolCalls": []map[string]any{{"id": "c1", "name": "bash", "arguments": map[string]any{"command": "ls"}}}})
	add(map[string]any{"op": "toolResult", "toolCallId": "c1", "toolName": "bash", "text": "a b"})
	for i := 0; i < 15; i++ {
		add(map[string]any{"op": "user", "text": fmt.Sprintf("question %d %s", i, strings.Repeat("é", i*50)), "as": fmt.Sprintf("q%d", i)})
		add(map[string]any{"op": "assistant", "text": fmt.Sprintf("answer %d", i)})
	}
	add(map[string]any{"op": "compaction", "summary": "so far", "firstKeptEntryId": "@q10", "tokensBefore": 1000})
	add(map[string]any{"op": "branch_summary", "to": "@u1", "summary": "tried X"})
	add(map[string]any{"op": "label", "target": "@u1", "label": "start"})
	add(map[string]any{"op": "session_info", "name": "a real session"})
	add(map[string]any{"op": "custom_message", "customType": "ext", "content": "x", "display": true})
	add(map[string]any{"op": "bashExecution", "command": "ls", "output": "a", "exitCode": 0})
	script := filepath.Join(t.TempDir(), "script.json")
	b, _ := json.Marshal(steps)
	if err := os.WriteFile(script, b, 0o600); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(root, "--home-u-proj--")
	for run := 0; run < 2; run++ {
		out, err := testenv.RunOracle(t, 60*time.Second, "write", dir, "--cwd", "/home/u/proj", "--script", script, "--delay", "3")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var done struct {
			SessionFile string `json:"sessionFile"`
			SessionID   string `json:"sessionId"`
		}
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &done); err != nil {
			t.Fatalf("oracle summary: %v", err)
		}
		data, err := os.ReadFile(done.SessionFile)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		n.waitLines(done.SessionID, want)
	}
}
