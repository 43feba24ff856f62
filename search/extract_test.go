package search

import (
	"strings"
	"testing"
)

func TestExtract(t *testing.T) {
	for _, tc := range []struct {
		name, line    string
		ok            bool
		typ, role, id string
		has, hasNot   []string
	}{
		{"header", `{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/home/u/proj"}`,
			true, "session", "", "", []string{"/home/u/proj"}, nil},
		{"user string", `{"type":"message","id":"a1","parentId":null,"timestamp":"t","message":{"role":"user","content":"fix the frobnicator"}}`,
			true, "message", "user", "a1", []string{"fix the frobnicator"}, nil},
		{"assistant blocks", `{"type":"message","id":"a2","parentId":"a1","timestamp":"t","message":{"role":"assistant","content":[` +
			`{"type":"thinking","thinking":"secret musing"},{"type":"text","text":"Let me look."},` +
			`{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"grep -rn frob .\nls","timeout":5}}]}}`,
			true, "message", "assistant", "a2", []string{"Let me look.", "bash", "grep -rn frob .\nls", "5"}, []string{"secret musing", `\n`}},
		{"tool result", `{"type":"message","id":"a3","parentId":"a2","timestamp":"t","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"main.go:3: frob"},{"type":"image","data":"AAAA","mimeType":"image/png"}],"isError":false}}`,
			true, "message", "toolResult", "a3", []string{"bash", "main.go:3: frob"}, []string{"AAAA"}},
		{"bash execution", `{"type":"message","id":"a4","parentId":"a3","timestamp":"t","message":{"role":"bashExecution","command":"make test","output":"ok pkg 0.1s","exitCode":0}}`,
			true, "message", "bashExecution", "a4", []string{"make test", "ok pkg 0.1s"}, nil},
		{"compaction", `{"type":"compaction","id":"c","parentId":"a4","timestamp":"t","summary":"we fixed frob","firstKeptEntryId":"a3","tokensBefore":9}`,
			true, "compaction", "", "c", []string{"we fixed frob"}, nil},
		{"branch summary", `{"type":"branch_summary","id":"b","parentId":"a4","timestamp":"t","fromId":"a2","summary":"abandoned path"}`,
			true, "branch_summary", "", "b", []string{"abandoned path"}, nil},
		{"custom message", `{"type":"custom_message","customType":"note","content":[{"type":"text","text":"remember this"}],"display":true,"id":"cm","parentId":"b","timestamp":"t"}`,
			true, "custom_message", "", "cm", []string{"note", "remember this"}, nil},
		{"label", `{"type":"label","id":"l","parentId":"cm","timestamp":"t","targetId":"a1","label":"checkpoint"}`,
			true, "label", "", "l", []string{"checkpoint"}, nil},
		{"name", `{"type":"session_info","id":"n","parentId":"l","timestamp":"t","name":"Frob refactor"}`,
			true, "session_info", "", "n", []string{"Frob refactor"}, nil},
		{"settings only", `{"type":"model_change","id":"m","parentId":"n","timestamp":"t","provider":"x","modelId":"y"}`, false, "", "", "", nil, nil},
		{"no id", `{"type":"message","parentId":null,"timestamp":"t","message":{"role":"user","content":"x"}}`, false, "", "", "", nil, nil},
		{"thinking only", `{"type":"message","id":"z","parentId":null,"timestamp":"t","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hm"}]}}`, false, "", "", "", nil, nil},
		{"malformed", `{"type":"message","id":`, false, "", "", "", nil, nil},
		{"wrong types", `{"type":"message","id":7,"message":"x"}`, false, "", "", "", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := Extract([]byte(tc.line))
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (%+v)", ok, tc.ok, d)
			}
			if !ok {
				return
			}
			if d.Type != tc.typ || d.Role != tc.role || d.EntryID != tc.id {
				t.Errorf("type %q role %q id %q, want %q %q %q", d.Type, d.Role, d.EntryID, tc.typ, tc.role, tc.id)
			}
			for _, s := range tc.has {
				if !strings.Contains(d.Text, s) {
					t.Errorf("text %q lacks %q", d.Text, s)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(d.Text, s) {
					t.Errorf("text %q holds %q", d.Text, s)
				}
			}
		})
	}
}

func TestExtractBoundsText(t *testing.T) {
	big := strings.Repeat("é", MaxText) // 2 bytes a rune: cut mid-text
	d, ok := Extract([]byte(`{"type":"message","id":"a","message":{"role":"user","content":"` + big + `"}}`))
	if !ok || len(d.Text) > MaxText || !strings.HasPrefix(d.Text, "éé") || strings.ContainsRune(d.Text, '\uFFFD') {
		t.Fatalf("ok %v, %d bytes (max %d)", ok, len(d.Text), MaxText)
	}
}
